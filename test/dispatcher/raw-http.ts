// Talking to a Dispatcher the way a careless or hostile client does: raw bytes over a socket (so a
// test can send what fetch refuses to, such as a negative content-length or a body cut short), and a
// /health probe that runs beside a test and records how long each answer took.
import { Agent, request } from 'node:http';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';

export interface RawResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body as text; `json` holds it parsed when it is JSON. */
  readonly text: string;
  readonly json: any;
}

/** Splits one HTTP/1.1 response (Content-Length or chunked, or read to the end of the connection). */
function parseResponse(raw: Buffer, needComplete = false): RawResponse | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = raw.subarray(end + 4);
  if (headers['content-length'] !== undefined) {
    if (needComplete && body.length < Number(headers['content-length'])) return undefined;
    body = body.subarray(0, Number(headers['content-length']));
  } else if (needComplete) return undefined;
  else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    for (let at = 0; ;) {
      const lineEnd = body.indexOf('\r\n', at);
      const size = parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
      if (!(size > 0)) break;
      parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  }
  const text = body.toString('utf8');
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, text, json };
}

/**
 * Writes `bytes` as they are to `url`'s host and port, half-closes the connection (unless `keepOpen`),
 * and reads the answer until the server closes or the response is complete.
 */
export function sendRaw(url: string, bytes: Buffer | string, options: { keepOpen?: boolean; timeoutMs?: number } = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (error?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const parsed = parseResponse(Buffer.concat(chunks));
      if (parsed !== undefined) resolve(parsed);
      else reject(error ?? new Error(`no HTTP response; received ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 200))}`));
    };
    const timer = setTimeout(() => finish(new Error(`no complete response within ${options.timeoutMs ?? 10_000} ms`)), options.timeoutMs ?? 10_000);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (parseResponse(Buffer.concat(chunks), true) !== undefined) finish();
    });
    socket.on('end', () => finish());
    socket.on('close', () => finish());
    socket.on('error', (error) => finish(error));
    socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
    if (options.keepOpen !== true) socket.end();
  });
}

/** One request over node:http with a body of any size or content; the answer's body is parsed as JSON. */
export function httpRequest(
  url: string,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: Buffer | string; agent?: Agent; timeoutMs?: number } = {},
): Promise<RawResponse> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method,
        path,
        // Node frames a GET's body only when told its length.
        headers: { ...(options.body !== undefined ? { 'content-length': String(Buffer.byteLength(options.body)) } : {}), ...options.headers },
        agent: options.agent ?? false,
        timeout: options.timeoutMs ?? 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = text === '' ? undefined : JSON.parse(text);
          } catch {
            json = undefined;
          }
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
          resolve({ status: res.statusCode ?? 0, headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} got no answer within ${options.timeoutMs ?? 30_000} ms`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * CPU time (ms) this process's main thread, the one running the event loop, has used: on Linux from the
 * scheduler's own count in nanoseconds, elsewhere the whole process's. Other threads (the Dispatcher's
 * JSON parser, the collector's helpers) are not counted: their work does not hold up the event loop.
 */
function eventLoopThreadCpuMs(): number {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'latin1').split(' ')[0]) / 1e6;
  } catch {
    const used = process.cpuUsage();
    return (used.user + used.system) / 1000;
  }
}

/** What a HealthProbe saw. */
export interface HealthReport {
  readonly count: number;
  /** The slowest answer, wall clock (ms). */
  readonly maxMs: number;
  /**
   * How long the event loop was held, counted only while its thread ran (ms): the larger of the longest
   * gap between two ticks of a 5 ms timer and the slowest /health answer, each the smaller of its wall
   * time and the CPU time this process's main thread used meanwhile. A Dispatcher that blocks its event
   * loop keeps that thread on the CPU the whole time, so a block shows whenever it falls. A thread the
   * OS did not run (a machine loaded far beyond its cores) does not, nor does work on other threads (the
   * JSON parser thread starting and scanning a body): that wait is not the event loop's doing.
   */
  readonly maxBusyMs: number;
  readonly failures: readonly string[];
  /** Every probe as `<wall ms>/<event-loop thread cpu ms>`, then the longest timer gaps alike, for messages. */
  readonly probes: string;
}

interface Sample {
  readonly wallMs: number;
  readonly cpuMs: number;
}

const busyMs = (s: Sample): number => Math.min(s.wallMs, s.cpuMs);
const show = (samples: readonly Sample[]): string => samples.map((s) => `${s.wallMs.toFixed(0)}/${s.cpuMs.toFixed(0)}`).join(' ');

/**
 * Asks GET /health over its own keep-alive connection, one probe after another with a short pause,
 * until stopped, and meanwhile times the gaps between ticks of a short timer; records, for each answer
 * and each gap, how long it took and how much CPU the event-loop thread used meanwhile. Use it where the
 * Dispatcher runs in this process: a blocked event loop shows as a long gap the thread spent on the CPU.
 */
export class HealthProbe {
  private readonly answers: Sample[] = [];
  private readonly gaps: Sample[] = [];
  private readonly failures: string[] = [];
  private running = true;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  private readonly loop: Promise<void>;
  private readonly ticker: NodeJS.Timeout;

  constructor(
    private readonly url: string,
    private readonly pauseMs = 10,
    tickMs = 5,
  ) {
    this.loop = this.run();
    let wall = performance.now();
    let cpu = eventLoopThreadCpuMs();
    this.ticker = setInterval(() => {
      const nowWall = performance.now();
      const nowCpu = eventLoopThreadCpuMs();
      this.gaps.push({ wallMs: nowWall - wall, cpuMs: nowCpu - cpu });
      wall = nowWall;
      cpu = nowCpu;
    }, tickMs);
  }

  /** How many answers have come so far. */
  get count(): number {
    return this.answers.length;
  }

  private async run(): Promise<void> {
    while (this.running) {
      const started = performance.now();
      const cpu = eventLoopThreadCpuMs();
      try {
        const res = await httpRequest(this.url, 'GET', '/health', { agent: this.agent, timeoutMs: 30_000 });
        if (res.status !== 200) this.failures.push(`GET /health answered ${res.status} ${res.text}`);
      } catch (error) {
        this.failures.push(`GET /health failed: ${(error as Error).message}`);
      }
      this.answers.push({ wallMs: performance.now() - started, cpuMs: eventLoopThreadCpuMs() - cpu });
      await new Promise((r) => setTimeout(r, this.pauseMs));
    }
  }

  /** Stops probing and reports. */
  async stop(): Promise<HealthReport> {
    this.running = false;
    clearInterval(this.ticker);
    await this.loop;
    this.agent.destroy();
    const longestGaps = [...this.gaps].sort((a, b) => busyMs(b) - busyMs(a)).slice(0, 5);
    return {
      count: this.answers.length,
      maxMs: Math.max(0, ...this.answers.map((a) => a.wallMs)),
      maxBusyMs: Math.max(0, ...this.answers.map(busyMs), ...this.gaps.map(busyMs)),
      failures: this.failures,
      probes: `answers ${show(this.answers)}; longest of ${this.gaps.length} timer gaps ${show(longestGaps)}`,
    };
  }
}

/** A request waiting in a client process of its own: `send()` sends it and resolves with the answer. */
export interface PreparedRequest {
  send(): Promise<RawResponse & { elapsedMs: number }>;
}

/**
 * Prepares one request in a separate Node process (so the test process, which hosts the Dispatcher, does
 * none of the client's work, and starting that process is over before the request goes), with the body
 * read from `bodyFile`. Resolves once the process has read the body and waits for `send()`.
 */
export function prepareInChildProcess(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  bodyFile: string,
  timeoutMs = 60_000,
): Promise<PreparedRequest> {
  const script = `
    const { request } = require('node:http');
    const { readFileSync } = require('node:fs');
    const body = readFileSync(process.env.BODY_FILE);
    const target = new URL(process.env.TARGET_URL);
    process.stdout.write('ready\\n');
    process.stdin.once('data', () => {
      const started = performance.now();
      const req = request({ host: target.hostname, port: target.port, method: process.env.METHOD, path: process.env.TARGET_PATH, headers: JSON.parse(process.env.HEADERS) }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          process.stdout.write(JSON.stringify({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), elapsedMs: performance.now() - started }));
          process.exit(0);
        });
      });
      req.on('error', (e) => { process.stderr.write(String(e)); process.exit(1); });
      req.end(body);
    });
  `;
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, BODY_FILE: bodyFile, TARGET_URL: url, METHOD: method, TARGET_PATH: path, HEADERS: JSON.stringify(headers) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const answer = new Promise<RawResponse & { elapsedMs: number }>((resolve, reject) => {
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) {
        reject(new Error(`the client process exited with ${code}: ${err}`));
        return;
      }
      const parsed = JSON.parse(out.slice(out.indexOf('\n') + 1)) as { status: number; headers: Record<string, string>; text: string; elapsedMs: number };
      let json: unknown;
      try {
        json = JSON.parse(parsed.text);
      } catch {
        json = undefined;
      }
      resolve({ ...parsed, json });
    });
  });
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.startsWith('ready\n') && out.length - d.length < 'ready\n'.length) {
        resolve({
          send: () => {
            child.stdin.end('go\n');
            return answer;
          },
        });
      }
    });
    answer.catch(reject);
  });
}
