// Two-input operators through a whole cluster with its slot workers in child processes: an interval join, a
// window join, connected streams (CoMap and a KeyedCoProcessFunction with state and an event-time timer) and
// keyed broadcast state, and a window coGroup of two branches of one stream (a chain that fans out), each over out-of-order generated input at parallelism 2, equal a reference computed
// here by plain code from the same generator functions.
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

const COUNT = 400;
const KEYS = 7;
// Record i of the left (l) and right (r) streams: a key and an event time that runs 10 ms per record and
// jumps back by up to 49 ms (out of order within the watermark's 60 ms bound).
const left = (i: number): { id: number; k: number; t: number } => ({ id: i, k: (i * 31) % KEYS, t: i * 10 + ((i * 7919) % 50) });
const right = (i: number): { id: number; k: number; t: number } => ({ id: 1000 + i, k: (i * 17) % KEYS, t: i * 10 + ((i * 104729) % 50) });

const JOB_SOURCE = `
import {
  defineJob, WatermarkStrategy, TumblingEventTimeWindows, KeyedCoProcessFunction, ProcessJoinFunction,
  KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor, ListStateDescriptor,
} from 'floe';
const COUNT = ${COUNT};
const KEYS = ${KEYS};
const left = ${left.toString()};
const right = ${right.toString()};
const mixed = (i) => (i % 3 === 0 ? left(i) : right(i));
const strategy = () => WatermarkStrategy.forBoundedOutOfOrderness(60).withTimestampAssigner((e) => e.t);
const streams = (env) => [
  env.generate(left, { count: COUNT }).setParallelism(2).assignTimestampsAndWatermarks(strategy()),
  env.generate(right, { count: COUNT }).setParallelism(2).assignTimestampsAndWatermarks(strategy()),
];

class Pair extends ProcessJoinFunction {
  processElement(l, r, ctx, out) {
    out.collect([l.id, r.id, ctx.getTimestamp()]);
  }
}
export const intervalJoin = defineJob('interval-join', (env) => {
  const [a, b] = streams(env);
  a.keyBy((e) => e.k).intervalJoin(b.keyBy((e) => e.k)).between(-30, 20).process(new Pair()).setParallelism(2).collect({ maxRecords: 100000 });
});

export const windowJoin = defineJob('window-join', (env) => {
  const [a, b] = streams(env);
  a.join(b).where((e) => e.k).equalTo((e) => e.k).window(TumblingEventTimeWindows.of(200)).apply((l, r) => [l.id, r.id]).setParallelism(2).collect({ maxRecords: 100000 });
});

// One stream's two filtered branches (chained to its source, as Flink chains a fan-out) meet in a coGroup.
export const branchCoGroup = defineJob('branch-co-group', (env) => {
  env.setParallelism(2);
  const events = env.generate(mixed, { count: COUNT }).assignTimestampsAndWatermarks(strategy());
  const ls = events.filter((e) => e.id < 1000).map((e) => ({ id: e.id, k: e.k }));
  const rs = events.filter((e) => e.id >= 1000);
  ls.coGroup(rs).where((e) => e.k).equalTo((e) => e.k).window(TumblingEventTimeWindows.of(200))
    .apply((a, b, out) => out.collect([a.map((e) => e.id).sort((x, y) => x - y), b.map((e) => e.id).sort((x, y) => x - y)]))
    .collect({ maxRecords: 100000 });
});

export const coMap = defineJob('co-map', (env) => {
  const [a, b] = streams(env);
  a.connect(b).map({ map1: (e) => 'l' + e.id, map2: (e) => 'r' + e.id }).setParallelism(2).collect({ maxRecords: 100000 });
});

// Per key: the sum of the left ids minus the sum of the right ids and the record count, emitted once by an
// event-time timer at the end of time.
class Balance extends KeyedCoProcessFunction {
  open() {
    this.sum = this.getRuntimeContext().getState(new ValueStateDescriptor('sum', 0));
    this.n = this.getRuntimeContext().getState(new ValueStateDescriptor('n', 0));
  }
  processElement1(e, ctx) { this.add(e.id, ctx); }
  processElement2(e, ctx) { this.add(-e.id, ctx); }
  add(v, ctx) {
    this.sum.update(this.sum.value() + v);
    this.n.update(this.n.value() + 1);
    ctx.timerService().registerEventTimeTimer(1e12);
  }
  onTimer(ts, ctx, out) {
    out.collect([ctx.getCurrentKey(), this.sum.value(), this.n.value(), this.getRuntimeContext().getNumberOfParallelSubtasks()]);
  }
}
export const keyedCoProcess = defineJob('keyed-co-process', (env) => {
  const [a, b] = streams(env);
  a.keyBy((e) => e.k).connect(b.keyBy((e) => e.k)).process(new Balance()).setParallelism(2).collect();
});

// The right stream broadcasts (key → weight) rules; each left record waits in keyed state, and a timer at
// the end of time emits its key's records weighed by the rules every subtask then holds.
const rules = new MapStateDescriptor('weights');
class Weigh extends KeyedBroadcastProcessFunction {
  processElement(e, ctx) {
    this.getRuntimeContext().getListState(new ListStateDescriptor('ids')).add(e.id);
    ctx.timerService().registerEventTimeTimer(1e12);
  }
  processBroadcastElement(e, ctx) {
    const w = ctx.getBroadcastState(rules);
    w.put(e.k, (w.get(e.k) ?? 0) + 1);
  }
  onTimer(ts, ctx, out) {
    const w = ctx.getBroadcastState(rules).get(ctx.getCurrentKey()) ?? 0;
    for (const id of this.getRuntimeContext().getListState(new ListStateDescriptor('ids')).get()) out.collect([id, id * w]);
  }
}
export const broadcastState = defineJob('broadcast-state', (env) => {
  const [a, b] = streams(env);
  a.keyBy((e) => e.k).connect(b.broadcast(rules)).process(new Weigh()).setParallelism(2).collect({ maxRecords: 100000 });
});
`;

const libraryDir = mkdtempSync(join(tmpdir(), 'floe-two-input-lib-'));
const store = new InMemoryBlobStore();
let code: Uint8Array;
const graphOf = async (exportName: string): Promise<JobGraph> => {
  const g = await storeJobLibrary(libraryDir, JOB_SOURCE, store, JobId.random(), exportName, []);
  code = (await store.get(blobKeys.library(g.library.sha256)))!;
  return g;
};
beforeAll(async () => {
  await slotWorkerBundle();
});
afterAll(() => rmSync(libraryDir, { recursive: true, force: true }));

const lefts = Array.from({ length: COUNT }, (_, i) => left(i));
const rights = Array.from({ length: COUNT }, (_, i) => right(i));
const sorted = (xs: unknown[]): unknown[] => [...xs].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe('two-input operators on a MiniCluster', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  async function run(graph: JobGraph): Promise<unknown[]> {
    cluster ??= await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 4 } });
    await cluster.blobStore.put(blobKeys.library(graph.library.sha256), code);
    const job = await cluster.submit(graph);
    const outcome = await job.outcome;
    const rec = await cluster.record(job.jobId);
    expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
    const result = await cluster.result(rec);
    expect(result.truncated).toBe(false);
    return result.records;
  }

  it('an interval join equals the pairs a nested loop finds, each with the later timestamp', async () => {
    const expected = lefts.flatMap((l) => rights.filter((r) => r.k === l.k && r.t >= l.t - 30 && r.t <= l.t + 20).map((r) => [l.id, r.id, Math.max(l.t, r.t)]));
    expect(expected.length).toBeGreaterThan(100);
    expect(sorted(await run(await graphOf('intervalJoin')))).toEqual(sorted(expected));
  });

  it('a tumbling window join equals the pairs of one key in one window', async () => {
    const win = (t: number): number => Math.floor(t / 200);
    const expected = lefts.flatMap((l) => rights.filter((r) => r.k === l.k && win(r.t) === win(l.t)).map((r) => [l.id, r.id]));
    expect(sorted(await run(await graphOf('windowJoin')))).toEqual(sorted(expected));
  });

  it('a window coGroup of two branches of one chained stream equals the groups of one key in one window', async () => {
    const groups = new Map<string, [number[], number[]]>();
    for (let i = 0; i < COUNT; i++) {
      const e = i % 3 === 0 ? left(i) : right(i);
      const at = `${e.k}/${Math.floor(e.t / 200)}`;
      const g = groups.get(at) ?? [[], []];
      (e.id < 1000 ? g[0] : g[1]).push(e.id);
      groups.set(at, g);
    }
    const expected = [...groups.values()].map(([a, b]) => [a.sort((x, y) => x - y), b.sort((x, y) => x - y)]);
    const graph = await graphOf('branchCoGroup');
    // The source, its timestamps and both branches run in one chain.
    expect(graph.vertices.map((v) => v.chainInputs)).toEqual([[-1, 0, 1, 2, 1], undefined]);
    expect(sorted(await run(graph))).toEqual(sorted(expected));
  });

  it('connected streams: a CoMap sees every record of both inputs once', async () => {
    const expected = [...lefts.map((l) => `l${l.id}`), ...rights.map((r) => `r${r.id}`)];
    expect(sorted(await run(await graphOf('coMap')))).toEqual(sorted(expected));
  });

  it('a KeyedCoProcessFunction keeps one state per key across both inputs and fires its timer at the end of input', async () => {
    const expected = Array.from({ length: 7 }, (_, k) => {
      const ls = lefts.filter((l) => l.k === k);
      const rs = rights.filter((r) => r.k === k);
      return [k, ls.reduce((s, l) => s + l.id, 0) - rs.reduce((s, r) => s + r.id, 0), ls.length + rs.length, 2];
    });
    expect(sorted(await run(await graphOf('keyedCoProcess')))).toEqual(sorted(expected));
  });

  it('keyed broadcast state: every subtask holds the rules the broadcast stream wrote', async () => {
    const weight = (k: number): number => rights.filter((r) => r.k === k).length;
    const expected = lefts.map((l) => [l.id, l.id * weight(l.k)]);
    expect(sorted(await run(await graphOf('broadcastState')))).toEqual(sorted(expected));
  });
});
