// Windows through a whole in-process cluster: tumbling, sliding and session windows over an out-of-order
// generated stream equal what plain code computes from the same events. The bounded-out-of-orderness
// watermark stays behind every event's timestamp, so no element is late whenever the watermarks come; the
// late-data run adds, at the end, elements behind by less than the allowed lateness (counted, windows
// fire again) and elements at time 0 (far beyond it: to the side output).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { slotWorkerBundle, storeJobLibrary } from '../taskexecutor/harness.js';

const COUNT = 1_500;
const BOUND = 50;
type Ev = { k: string; v: number; i: number; ts: number };
const LATE_FROM = COUNT - 20;
// Event i: about 10 ms after event i-1, up to BOUND ms out of order. With late data, the last 20 events
// alternate: 500 ms behind (within a lateness of 1000 ms) and at time 0 (beyond it).
const event = (i: number, withLate = false): Ev => ({
  k: `k${i % 4}`,
  v: 1 + ((i * 31) % 17),
  i,
  ts: withLate && i >= LATE_FROM ? (i % 2 === 0 ? i * 10 - 500 : 0) : i * 10 - ((i * 7919) % BOUND),
});

const JOB_SOURCE = `
import { defineJob, WatermarkStrategy, TumblingEventTimeWindows, SlidingEventTimeWindows, EventTimeSessionWindows, OutputTag } from 'floe';
const LATE_FROM = ${LATE_FROM};
const event = ${event.toString()};
const BOUND = ${BOUND};
const sum = {
  createAccumulator: () => ({ v: 0, n: 0 }),
  add: (e, a) => ({ v: a.v + e.v, n: a.n + 1 }),
  getResult: (a) => a,
  merge: (a, b) => ({ v: a.v + b.v, n: a.n + b.n }),
};
export const windows = defineJob('windows', (env, [kind, lateness, mode]) => {
  // 'pre': two generator subtasks, each with its watermarks, and no late-data output: they fold per key and pane
  // before the exchange (pre-aggregation).
  const pre = mode === 'pre';
  const late = new OutputTag('late');
  const withLate = Number(lateness) > 0;
  env.getConfig().setAutoWatermarkInterval(5);
  const strategy = WatermarkStrategy.forBoundedOutOfOrderness(BOUND).withTimestampAssigner((e) => e.ts);
  const assigner =
    kind === 'tumbling' ? TumblingEventTimeWindows.of(100) : kind === 'sliding' ? SlidingEventTimeWindows.of(200, 50) : EventTimeSessionWindows.withGap(35);
  const windowed = env
    .generate((i) => event(i, withLate), { count: ${COUNT}, ...(withLate ? { ratePerSecond: 2000 } : {}) })
    .setParallelism(pre ? 2 : 1)
    .assignTimestampsAndWatermarks(strategy)
    .setParallelism(pre ? 2 : 1)
    .keyBy((e) => e.k)
    .window(assigner)
    .allowedLateness(Number(lateness));
  const results = (pre ? windowed : windowed.sideOutputLateData(late))
    .aggregate(sum, { process(key, ctx, elements, out) { for (const r of elements) out.collect({ k: key, end: ctx.window().end, v: r.v, n: r.n }); } })
    .setParallelism(2);
  (pre ? results : results.union(results.getSideOutput(late).map((e) => ({ late: e.i })))).collect({ maxRecords: 100000 });
});
`;

/** The windows' final sums of the events that are not far behind, and those that are, by plain code. */
function reference(kind: string, lateness: number): { windows: string[]; late: number[] } {
  const events = Array.from({ length: COUNT }, (_, i) => event(i, lateness > 0));
  const counted = events.filter((e) => !(lateness > 0 && e.i >= LATE_FROM && e.ts === 0));
  const sums = new Map<string, { v: number; n: number }>();
  const add = (id: string, e: Ev): void => {
    const s = sums.get(id) ?? { v: 0, n: 0 };
    sums.set(id, { v: s.v + e.v, n: s.n + 1 });
  };
  if (kind === 'session') {
    for (const k of new Set(counted.map((e) => e.k))) {
      let end = -Infinity;
      let run: Ev[] = [];
      const close = (): void => run.forEach((e) => add(`${k} ${end}`, e));
      for (const e of counted.filter((x) => x.k === k).sort((a, b) => a.ts - b.ts)) {
        if (e.ts > end) {
          close();
          run = [];
        }
        end = Math.max(end, e.ts + 35);
        run.push(e);
      }
      close();
    }
  } else {
    const [size, slide] = kind === 'tumbling' ? [100, 100] : [200, 50];
    for (const e of counted) for (let s = e.ts - (((e.ts % slide) + slide) % slide); s > e.ts - size; s -= slide) add(`${e.k} ${s + size}`, e);
  }
  const late = events.filter((e) => !counted.includes(e)).map((e) => e.i);
  return { windows: [...sums].map(([id, s]) => `${id} ${s.v} ${s.n}`).sort(), late };
}

const libraryDir = mkdtempSync(join(tmpdir(), 'floe-windows-lib-'));
const store = new InMemoryBlobStore();
beforeAll(async () => {
  await slotWorkerBundle();
});
afterAll(() => rmSync(libraryDir, { recursive: true, force: true }));

describe('windows on a MiniCluster', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  async function run(args: string[]): Promise<{ windows: string[]; late: number[]; preAggregated: boolean }> {
    const graph: JobGraph = await storeJobLibrary(libraryDir, JOB_SOURCE, store, JobId.random(), 'windows', args);
    const window = graph.vertices.flatMap((v) => v.operators).find((o) => o.kind === 'keyed.window');
    cluster ??= await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 4 } });
    await cluster.blobStore.put(blobKeys.library(graph.library.sha256), (await store.get(blobKeys.library(graph.library.sha256)))!);
    const job = await cluster.submit(graph);
    const outcome = await job.outcome;
    const rec = await cluster.record(job.jobId);
    expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
    const records = (await cluster.result(rec)).records as ({ k: string; end: number; v: number; n: number } | { late: number })[];
    // A window that fires again (a late element within the lateness) emits its new total: the last one counts.
    const last = new Map<string, string>();
    const late: number[] = [];
    for (const r of records) {
      if ('late' in r) late.push(r.late);
      else last.set(`${r.k} ${r.end}`, `${r.k} ${r.end} ${r.v} ${r.n}`);
    }
    return {
      windows: [...last.values()].sort(),
      late: late.sort((a, b) => a - b),
      preAggregated: window !== undefined && 'preAggregate' in window && window.preAggregate === true,
    };
  }

  for (const [kind, lateness] of [
    ['tumbling', 0],
    ['sliding', 0],
    ['session', 0],
    ['tumbling', 1000],
    ['sliding', 1000],
  ] as const) {
    const what = lateness === 0 ? 'no element is late' : 'elements within the lateness fire their windows again, those beyond it go to the side output';
    it(`${kind} windows over out-of-order events equal the plain-code reference (allowed lateness ${lateness} ms: ${what})`, async () => {
      const expected = reference(kind, lateness);
      expect(expected.late.length).toBe(lateness === 0 ? 0 : 10);
      expect(await run([kind, String(lateness)])).toEqual({ ...expected, preAggregated: false });
    });
  }

  for (const kind of ['tumbling', 'sliding'] as const) {
    it(`${kind} windows pre-aggregated by two generator subtasks before the exchange equal the plain-code reference`, async () => {
      expect(await run([kind, '0', 'pre'])).toEqual({ ...reference(kind, 0), preAggregated: true });
    });
  }
});
