// What user code could try with a string it found in its process: use it as an RPC bearer, as a REST
// bearer, or as a job's data-plane key. Each helper reports what the cluster answered, for tests that
// check every such try is refused.
import { connect } from 'node:net';
import { taskExecutorBearer } from '../../runtime/core/cluster-keys.js';
import { clientProof, decodeChallenge, encodeHello, newNonce, serverProof } from '../../runtime/network/data-auth.js';
import { encodeFrame, encodeMeta, FrameDecoder, FrameType } from '../../runtime/network/frames.js';

/** Whether `s` can travel in an HTTP header at all (what cannot is no bearer token either). */
export const headerSafe = (s: string): boolean => s !== '' && /^[\x20-\x7e]+$/.test(s);

/**
 * Every string a process could hand user code, from `KEY=value` entries and other strings: the entries
 * and their values, header-safe and without duplicates.
 */
export function candidateStrings(entries: readonly string[]): string[] {
  const out = new Set<string>();
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    for (const s of [entry, eq > 0 ? entry.slice(eq + 1) : entry]) if (headerSafe(s)) out.add(s);
  }
  return [...out];
}

/** The bearers one found string gives: itself, and as the key of each named TaskExecutor for each named job. */
export function bearersOf(candidate: string, taskExecutorIds: readonly string[], jobIds: readonly string[]): string[] {
  return [candidate, ...taskExecutorIds.flatMap((resourceId) => jobIds.map((jobId) => taskExecutorBearer({ resourceId, jobId, key: candidate })))];
}

/** The HTTP status of one RPC sent with `bearer`. */
export async function rpcStatus(address: string, endpoint: string, method: string, args: unknown[], bearer: string): Promise<number> {
  const res = await fetch(`${address}/rpc/${endpoint}/${method}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify(args),
  });
  await res.arrayBuffer();
  return res.status;
}

/** The HTTP status of `GET <url>` sent with `bearer`. */
export async function restStatus(url: string, bearer: string): Promise<number> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${bearer}` } });
  await res.arrayBuffer();
  return res.status;
}

export interface HandshakeOutcome {
  /** The producer answered HELLO with a challenge (it holds a key for the job named). */
  readonly challenged: boolean;
  /** The producer's proof verifies with the key tried: the key is the job's. */
  readonly keyIsTheJobs: boolean;
  /** After our proof and a partition request, the producer closed the connection (refused it). */
  readonly closedAfterProof: boolean;
}

/**
 * A data-plane handshake with the producer at `dataAddress` for `jobId`, proving `key`, followed by a
 * request for a partition. Waits at most `waitMs` for each answer; a connection still open then counts
 * as accepted.
 */
export function dataHandshake(dataAddress: string, jobId: string, key: string, waitMs = 5_000): Promise<HandshakeOutcome> {
  const i = dataAddress.lastIndexOf(':');
  const socket = connect({ host: dataAddress.slice(0, i), port: Number(dataAddress.slice(i + 1)) });
  const clientNonce = newNonce();
  let challenged = false;
  let keyIsTheJobs = false;
  let proved = false;
  return new Promise<HandshakeOutcome>((resolve, reject) => {
    const finish = (closedAfterProof: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ challenged, keyIsTheJobs, closedAfterProof });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    const decoder = new FrameDecoder();
    socket.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (frame) => {
        const challenge = frame.type === FrameType.CHALLENGE ? decodeChallenge(frame.payload) : undefined;
        if (challenge === undefined || proved) return;
        challenged = true;
        keyIsTheJobs = Buffer.from(challenge.proof).equals(serverProof(key, jobId, clientNonce, challenge.serverNonce));
        proved = true;
        socket.write(encodeFrame(FrameType.PROOF, 0, clientProof(key, jobId, challenge.serverNonce, clientNonce)));
        socket.write(encodeFrame(FrameType.REQUEST, 1, encodeMeta({ partitionId: 'any', subpartitionIndex: 0 })));
      }),
    );
    socket.on('close', () => finish(proved));
    // A reset is one way a producer refuses; any other error (nothing listening) fails the try.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') return;
      clearTimeout(timer);
      reject(error);
    });
    socket.write(encodeFrame(FrameType.HELLO, 0, encodeHello(clientNonce, jobId)));
  });
}
