// The one request limit of a running Dispatcher ('rest.server.max-content-length', started as
// `floe cluster start` does): a body over it, sent by a client that writes its whole body before it reads
// (as most HTTP clients do without `expect: 100-continue`), gets the 413 naming the limit, not a broken
// connection, and the Dispatcher does not take the body into memory.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readClusterInfo, stopCluster } from '../../runtime/cli/cluster.js';
import type { ClusterInfo } from '../../runtime/protocol/rest-api.js';
import { distEntry } from '../../runtime/core/paths.js';
import { killLeftovers } from '../support/cluster-processes.js';

const LIMIT = 64 * 1024 * 1024;
const BODY_BYTES = 80_000_000;
let stateDir: string;
let info: ClusterInfo;

beforeAll(() => {
  stateDir = mkdtempSync(join(tmpdir(), 'floe-request-limit-'));
  execFileSync(process.execPath, [distEntry('cli'), 'cluster', 'start', '--dir', stateDir], { stdio: 'pipe', timeout: 60_000 });
  info = readClusterInfo(stateDir)!;
});

afterAll(async () => {
  await stopCluster(stateDir).catch(() => undefined);
  expect(killLeftovers(stateDir)).toBe(0);
  rmSync(stateDir, { recursive: true, force: true });
});

function rssBytes(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))![1]) * 1024;
}

interface Exchange {
  /** The socket error the client saw while writing or reading, if any (EPIPE, ECONNRESET). */
  readonly error?: string;
  readonly status: number;
  readonly message: string;
}

/** Writes the request head and the whole body, as a client that reads only afterwards, then reads the answer to the end. */
function sendWhole(head: string, body: Iterable<Buffer>): Promise<Exchange> {
  const { hostname, port } = new URL(info.restUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    const received: Buffer[] = [];
    let error: string | undefined;
    socket.on('data', (d: Buffer) => received.push(d));
    socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    socket.on('close', () => {
      const text = Buffer.concat(received).toString('utf8');
      const json = text.includes('\r\n\r\n')
        ? (JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4) || 'null') as { error?: { message?: string } } | null)
        : null;
      resolve({ ...(error !== undefined ? { error } : {}), status: Number(text.slice(9, 12)), message: json?.error?.message ?? text.slice(0, 200) });
    });
    const parts = [Buffer.from(head, 'latin1'), ...body][Symbol.iterator]();
    const more = (): void => {
      for (let next = parts.next(); !next.done; next = parts.next()) {
        if (!socket.write(next.value)) {
          socket.once('drain', more);
          return;
        }
      }
      socket.end();
    };
    more();
  });
}

/** Samples the Dispatcher's resident memory every 5 ms while `work` runs; returns its result and the growth over the start. */
async function withPeakRss<T>(work: () => Promise<T>): Promise<{ result: T; grewBytes: number }> {
  const before = rssBytes(info.pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(info.pid))), 5);
  try {
    const result = await work();
    return { result, grewBytes: peak - before };
  } finally {
    clearInterval(sampler);
  }
}

const head = (extra: string): string =>
  `POST /jobs HTTP/1.1\r\nhost: ${new URL(info.restUrl).host}\r\nauthorization: Bearer ${info.secret}\r\ncontent-type: application/json\r\n${extra}\r\n`;

describe('request limit', () => {
  it('an 80 MB body with content-length, written whole before reading: the client reads the 413 naming the limit, and the Dispatcher does not hold the body', async () => {
    const chunk = Buffer.alloc(1_000_000, 0x20);
    const send = (): Promise<Exchange> =>
      sendWhole(
        head(`content-length: ${BODY_BYTES}\r\n`),
        Array.from({ length: BODY_BYTES / chunk.length }, () => chunk),
      );
    // The first large read grows the process's young heap once (by some tens of MiB, whatever the body's
    // size); each body after it is measured.
    for (let i = 0; i < 3; i++) {
      const { result, grewBytes } = await withPeakRss(send);
      expect(result.error).toBeUndefined();
      expect(result.status).toBe(413);
      expect(result.message).toMatch(
        new RegExp(`^header 'content-length' says ${BODY_BYTES} bytes; the limit is ${LIMIT} bytes; raise 'rest.server.max-content-length'`),
      );
      // Well below the body (holding it would grow the process by all of it): what arrives is dropped as it
      // comes. Half the body leaves room for the heap's own growth on a loaded machine.
      if (i > 0) expect(grewBytes).toBeLessThan(BODY_BYTES / 2);
    }
  });

  it('an 80 MB chunked body, written whole before reading: the 413 names the same limit, found while counting', async () => {
    const size = 1_000_000;
    const chunk = Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), Buffer.alloc(size, 0x20), Buffer.from('\r\n')]);
    const result = await sendWhole(head('transfer-encoding: chunked\r\n'), [
      ...Array.from({ length: BODY_BYTES / size }, () => chunk),
      Buffer.from('0\r\n\r\n'),
    ]);
    expect(result.error).toBeUndefined();
    expect(result.status).toBe(413);
    expect(result.message).toMatch(new RegExp(`^the request body is over ${LIMIT} bytes \\(\\d+ read\\); the limit is ${LIMIT} bytes`));
    // The Dispatcher still answers.
    expect((await fetch(`${info.restUrl}/health`)).status).toBe(200);
  });
});
