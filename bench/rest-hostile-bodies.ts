// Benchmark: what hostile and oversized request bodies cost a running local Dispatcher (its own process,
// started as `floe cluster start` does): 12 MB hostile JSON bodies, and 80 MB over the request limit (sent
// with its content-length, and chunked). For each body: how long until it is answered, the slowest
// GET /health answer while it is handled (probed every 5 ms), and the Dispatcher's resident memory
// before, at its peak, and once idle again (after the JSON worker thread's idle stop).
// Then the same in this process, to read the heap after a full garbage collection.
// Run: npm run bench:rest   (figures also go to bench/out/rest-hostile-bodies.json).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { loadConfig } from '../runtime/core/config.js';
import { silentLogger } from '../runtime/core/logger.js';
import { startEmbeddedDispatcher } from '../runtime/local/embedded-dispatcher.js';
import { median, round, writeFigures } from './lib/bench-support.js';
import { s3FileSystem } from '../runtime/aws/s3-file-system.js';
import { registerFileSystem } from '../runtime/blob/file-systems.js';
import { localFileSystem } from '../runtime/local/fs-file-system.js';

// The file systems this process's JobMasters, Dispatchers and tasks reach: local paths, and S3.
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);

const RUNS = Number(process.env['BENCH_RUNS'] ?? 3);
const MiB = 1024 * 1024;
const SIZE = 12 * MiB;
/** The JSON worker thread ends after 5 s idle; memory is read a little after that. */
const SETTLE_MS = 7_000;

function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1] ?? NaN);
  return kb / 1024;
}

/** Posts `body` whole with its content-length, or, `chunked`, in 1 MB chunks without one (as a stream is sent). */
function post(url: string, path: string, headers: Record<string, string>, body: Buffer, chunked = false): Promise<{ status: number; text: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method: 'POST',
        path,
        headers: chunked ? headers : { ...headers, 'content-length': String(body.length) },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    if (!chunked) {
      req.end(body);
      return;
    }
    let at = 0;
    const more = (): void => {
      while (at < body.length) {
        const part = body.subarray(at, (at += MiB));
        if (!req.write(part)) {
          req.once('drain', more);
          return;
        }
      }
      req.end();
    };
    more();
  });
}

/** Probes GET /health back to back (5 ms apart) until stopped; returns the slowest answer. */
function probeHealth(url: string): { stop(): Promise<{ maxMs: number; count: number }> } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const target = new URL(url);
  let running = true;
  let maxMs = 0;
  let count = 0;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      await new Promise<void>((resolve, reject) => {
        request({ host: target.hostname, port: target.port, path: '/health', agent }, (res) => {
          res.resume();
          res.on('end', () => resolve());
        })
          .on('error', reject)
          .end();
      });
      maxMs = Math.max(maxMs, performance.now() - started);
      count++;
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      return { maxMs, count };
    },
  };
}

function body(kind: string): Buffer {
  switch (kind) {
    case 'nested': {
      // The body: 12 MB of arrays nested ~6 million deep.
      const depth = SIZE / 2 - 16;
      return Buffer.from(`{"jobGraph":{"vertices":${'['.repeat(depth)}${']'.repeat(depth)}}}`);
    }
    case 'wide':
      return Buffer.from(`{"jobGraph":[${'0,'.repeat(SIZE / 2 - 16)}0]}`);
    case 'long string':
      return Buffer.from(JSON.stringify({ jobGraph: { name: 'x'.repeat(SIZE - 32) } }));
    case 'values at the limit': {
      // 199,990 strings of 60 characters: parsed, handed back from the worker, then refused by the graph checks.
      const arg = 'a'.repeat(60);
      return Buffer.from(JSON.stringify({ jobGraph: { program: { export: 'default', args: Array.from({ length: 199_990 }, () => arg) } } }));
    }
    case 'inline library': {
      // A 12 MB body that is mostly a base64 library: what a legitimate large inline submission costs up to
      // the library checks (its size disagrees with the graph, so nothing is stored).
      const library = Buffer.alloc(Math.floor(((SIZE - 4096) * 3) / 4), 7).toString('base64');
      const jobGraph = {
        jobId: 'bench-inline',
        name: 'n',
        library: { sha256: 'a'.repeat(64), sizeBytes: 1 },
        program: { export: 'default', args: [] },
        vertices: [],
        edges: [],
      };
      return Buffer.from(JSON.stringify({ jobGraph, library }));
    }
    case 'over the limit, content-length':
    case 'over the limit, chunked':
      // 80 MB, over 'rest.server.max-content-length' (64 MiB): refused before it is read, or once 64 MiB are counted.
      return Buffer.alloc(80_000_000, 0x20);
    default:
      throw new Error(`unknown body ${kind}`);
  }
}

const work = mkdtempSync(join(tmpdir(), 'floe-bench-rest-'));
const stateDir = join(work, 'cluster');
const { info } = await startCluster(stateDir, {});
const headers = { authorization: `Bearer ${info.secret}`, 'content-type': 'application/json' };
const figures: Record<string, unknown> = {};
try {
  // Warm up the routes once, then let the Dispatcher settle: that is the baseline.
  await post(info.restUrl, '/artifacts', headers, Buffer.from('{}'));
  await new Promise((r) => setTimeout(r, 2_000));
  const baselineMiB = rssMiB(info.pid);
  process.stderr.write(`Dispatcher pid ${info.pid}, baseline RSS ${baselineMiB.toFixed(0)} MiB\n`);
  figures['baselineRssMiB'] = round(baselineMiB, 1);

  for (const kind of ['nested', 'wide', 'long string', 'values at the limit', 'inline library', 'over the limit, content-length', 'over the limit, chunked']) {
    const bytes = body(kind);
    const answered: number[] = [];
    const slowestHealth: number[] = [];
    const peaks: number[] = [];
    const settled: number[] = [];
    let answer = '';
    for (let run = 0; run < RUNS; run++) {
      let peak = rssMiB(info.pid);
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(info.pid))), 10);
      const probe = probeHealth(info.restUrl);
      const started = performance.now();
      const res = await post(info.restUrl, '/jobs', headers, bytes, kind.endsWith('chunked'));
      answered.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 100));
      const health = await probe.stop();
      clearInterval(sampler);
      slowestHealth.push(health.maxMs);
      peaks.push(peak);
      answer = `${res.status} ${res.text.slice(0, 140)}`;
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      settled.push(rssMiB(info.pid));
      process.stderr.write(
        `${kind} run ${run + 1}/${RUNS}: answered in ${answered.at(-1)!.toFixed(0)} ms (${answer.slice(0, 60)}…), slowest /health ${health.maxMs.toFixed(1)} ms of ${health.count}, ` +
          `RSS peak ${peak.toFixed(0)} MiB, settled ${settled.at(-1)!.toFixed(0)} MiB\n`,
      );
    }
    figures[kind] = {
      bodyMiB: round(bytes.length / MiB, 1),
      answer,
      answeredMs: round(median(answered), 0),
      slowestHealthMs: round(median(slowestHealth), 1),
      rssPeakMiB: round(median(peaks), 0),
      rssSettledMiB: round(median(settled), 0),
      rssSettledOverBaseline: round(median(settled) / baselineMiB, 2),
    };
  }

  // Memory must not accumulate: the body ten times in a row, then idle.
  const nested = body('nested');
  let peak = rssMiB(info.pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(info.pid))), 10);
  const started = performance.now();
  for (let i = 0; i < 10; i++) await post(info.restUrl, '/jobs', headers, nested);
  const tookMs = performance.now() - started;
  clearInterval(sampler);
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const settled = rssMiB(info.pid);
  process.stderr.write(`nested ×10: ${tookMs.toFixed(0)} ms, RSS peak ${peak.toFixed(0)} MiB, settled ${settled.toFixed(0)} MiB\n`);
  figures['nested ×10'] = {
    answeredMs: round(tookMs, 0),
    rssPeakMiB: round(peak, 0),
    rssSettledMiB: round(settled, 0),
    rssSettledOverBaseline: round(settled / (figures['baselineRssMiB'] as number), 2),
  };
} finally {
  await stopCluster(stateDir);
}

// The same ten bodies to a Dispatcher in this process, where a full garbage collection can be asked for
// (npm run bench:rest runs node with --expose-gc): what the JavaScript heap and the array buffers hold
// before and after, once the JSON worker thread has ended. RSS above also counts what the allocator keeps
// for reuse; this is what the Dispatcher itself still holds.
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) {
  process.stderr.write('run with node --expose-gc to measure the heap after a full collection\n');
} else {
  const embedded = await startEmbeddedDispatcher({ stateDir: join(work, 'embedded'), config: loadConfig({}), logger: silentLogger });
  try {
    const held = (): number => {
      gc();
      const m = process.memoryUsage();
      return (m.heapUsed + m.arrayBuffers) / MiB;
    };
    const nested = body('nested');
    await post(embedded.url, '/artifacts', { authorization: `Bearer ${embedded.secret}`, 'content-type': 'application/json' }, Buffer.from('{}'));
    const before = held();
    for (let i = 0; i < 10; i++) await post(embedded.url, '/jobs', { authorization: `Bearer ${embedded.secret}`, 'content-type': 'application/json' }, nested);
    const during = held();
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const after = held();
    process.stderr.write(
      `in-process, heap + array buffers after a full GC: ${before.toFixed(1)} MiB before, ${during.toFixed(1)} MiB right after ten nested bodies, ${after.toFixed(1)} MiB once idle\n`,
    );
    figures['nested ×10, heap + array buffers after GC (MiB)'] = { before: round(before, 1), rightAfter: round(during, 1), idle: round(after, 1) };
  } finally {
    await embedded.close();
  }
}
rmSync(work, { recursive: true, force: true });
console.log(JSON.stringify(figures, null, 2));
console.log(`written to ${writeFigures('rest-hostile-bodies', figures)}`);
