// Keyed state backends alone, in this process: BENCH_KEYS keys (default 1 M) of a ~100-byte value each,
// written once (puts), read back in a shuffled order (gets), then a full snapshot and, after 1 % of the keys
// change, an incremental one (lmdb). Prints puts/s, gets/s, the snapshots' duration and size and the
// process's RSS with the state loaded. Each backend runs in a child process of its own so RSS is its own.
//   npm run build && node dist/bench/state-backends.js            (both, figures to bench/out/state-backends.json)
//   node dist/bench/state-backends.js lmdb 4096                   (one backend; lmdb: write-cache entries)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ValueStateDescriptor } from '../runtime/api/state.js';
import { ManualClock } from '../runtime/core/clock.js';
import type { CheckpointStreamFactory } from '../runtime/checkpoint/checkpoint-storage.js';
import type { StreamStateHandle } from '../runtime/protocol/checkpoints.js';
import { HeapKeyedStateBackend } from '../runtime/task/state/heap-keyed-state-backend.js';
import type { KeyedStateBackend } from '../runtime/task/state/keyed-state-backend.js';
import { LmdbKeyedStateBackend } from '../runtime/task/state/lmdb-keyed-state-backend.js';
import { snapshotKeyedState } from '../runtime/task/keyed-state-snapshots.js';
import { round, writeFigures } from './lib/bench-support.js';

const KEYS = Number(process.env.BENCH_KEYS ?? 1_000_000);
const MAX = 128;

interface Figures {
  backend: string;
  writeCacheEntries?: number;
  keys: number;
  putsPerSec: number;
  getsPerSec: number;
  fullSnapshotMs: number;
  fullSnapshotMB: number;
  incrementalSnapshotMs?: number;
  incrementalSnapshotMB?: number;
  rssMB: number;
  heapUsedMB: number;
}

/** Checkpoint files counted, not kept: the figure is the backend's side. */
class CountingStreams implements CheckpointStreamFactory {
  write(checkpointId: number, name: string, bytes: Uint8Array): Promise<StreamStateHandle> {
    return Promise.resolve({ uri: `count://${checkpointId}/${name}`, size: bytes.length });
  }
  read(): Promise<Uint8Array> {
    return Promise.reject(new Error('not kept'));
  }
}

const valueOf = (i: number): { id: number; user: string; ts: number; tags: number[] } => ({
  id: i,
  user: `user-${i.toString(36).padStart(8, '0')}-${'x'.repeat(48)}`,
  ts: 1_700_000_000_000 + i,
  tags: [i % 7, i % 11, i % 13],
});

async function measure(kind: string, cacheEntries: number): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), 'floe-bench-state-'));
  const options = { maxParallelism: MAX, keyGroupRange: { start: 0, end: MAX - 1 }, clock: new ManualClock() };
  const backend: KeyedStateBackend =
    kind === 'lmdb'
      ? new LmdbKeyedStateBackend({ ...options, dir: join(dir, 'env'), writeCacheEntries: cacheEntries, fullEvery: 10 })
      : new HeapKeyedStateBackend(options);
  try {
    const state = backend.getPartitionedState(new ValueStateDescriptor<ReturnType<typeof valueOf>>('v'));
    const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
    let t = performance.now();
    for (let i = 0; i < KEYS; i++) {
      backend.setCurrentKey(keys[i]);
      state.update(valueOf(i));
    }
    if (backend instanceof LmdbKeyedStateBackend) backend.flush();
    const putsPerSec = KEYS / ((performance.now() - t) / 1000);
    const order = Uint32Array.from({ length: KEYS }, (_, i) => i);
    for (let i = KEYS - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    t = performance.now();
    let found = 0;
    for (let i = 0; i < KEYS; i++) {
      backend.setCurrentKey(keys[order[i]!]);
      if (state.value()?.id === order[i]) found++;
    }
    const getsPerSec = KEYS / ((performance.now() - t) / 1000);
    if (found !== KEYS) throw new Error(`read back ${found} of ${KEYS} values`);
    const streams = new CountingStreams();
    t = performance.now();
    const full = await snapshotKeyedState(1, streams, backend, [], 'bench');
    const fullSnapshotMs = performance.now() - t;
    const figures: Figures = {
      backend: kind,
      ...(kind === 'lmdb' ? { writeCacheEntries: cacheEntries } : {}),
      keys: KEYS,
      putsPerSec: round(putsPerSec),
      getsPerSec: round(getsPerSec),
      fullSnapshotMs: round(fullSnapshotMs),
      fullSnapshotMB: round(full.keyed.reduce((s, h) => s + h.handle.size, 0) / 2 ** 20, 1),
      rssMB: round(process.memoryUsage().rss / 2 ** 20),
      heapUsedMB: round(process.memoryUsage().heapUsed / 2 ** 20),
    };
    if (backend instanceof LmdbKeyedStateBackend) {
      for (let i = 0; i < KEYS; i += 100) {
        backend.setCurrentKey(keys[i]);
        state.update(valueOf(i + 1));
      }
      t = performance.now();
      const incremental = await backend.snapshotKeyGroups(2, streams, 'bench', () => []);
      figures.incrementalSnapshotMs = round(performance.now() - t);
      figures.incrementalSnapshotMB = round(incremental.bytesPersisted / 2 ** 20, 1);
    }
    return figures;
  } finally {
    backend.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

const [kind, cache] = process.argv.slice(2);
if (kind !== undefined) {
  console.log(JSON.stringify(await measure(kind, Number(cache ?? 4096))));
} else {
  const self = fileURLToPath(import.meta.url);
  const runs: Figures[] = [];
  for (const args of [['heap'], ['lmdb', '4096'], ['lmdb', '1']]) {
    // One write per transaction is slow: it is measured on a tenth of the keys.
    const env = { ...process.env, BENCH_KEYS: String(args[1] === '1' ? Math.ceil(KEYS / 10) : KEYS) };
    const out = execFileSync(process.execPath, [self, ...args], { env, encoding: 'utf8', maxBuffer: 1 << 20 });
    const figures = JSON.parse(out.trim().split('\n').pop()!) as Figures;
    console.log(figures);
    runs.push(figures);
  }
  const heap = runs[0]!;
  const lmdb = runs[1]!;
  const summary = {
    runs,
    lmdbOverHeap: {
      puts: round(lmdb.putsPerSec / heap.putsPerSec, 3),
      gets: round(lmdb.getsPerSec / heap.getsPerSec, 3),
      rss: round(lmdb.rssMB / heap.rssMB, 3),
    },
  };
  console.log(summary.lmdbOverHeap);
  console.log(`figures: ${writeFigures('state-backends', summary)}`);
}
