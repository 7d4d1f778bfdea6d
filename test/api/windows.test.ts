import { describe, expect, it } from 'vitest';
import {
  CountTrigger,
  defineJob,
  EventTimeSessionWindows,
  OutputTag,
  ProcessAllWindowFunction,
  ProcessWindowFunction,
  SlidingEventTimeWindows,
  TumblingEventTimeWindows,
  TumblingProcessingTimeWindows,
  type Collector,
  type ProcessWindowContext,
} from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import type { OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { buildOptions } from '../support/job-graphs.js';

type Bid = { auction: number; price: number };

class MaxWithWindow extends ProcessWindowFunction<number, string, number> {
  process(key: number, ctx: ProcessWindowContext, elements: Iterable<number>, out: Collector<string>): void {
    for (const max of elements) out.collect(`${key}@${ctx.window().start}:${max}`);
  }
}

class CountAll extends ProcessAllWindowFunction<Bid, number> {
  process(_ctx: ProcessWindowContext, elements: Iterable<Bid>, out: Collector<number>): void {
    out.collect([...elements].length);
  }
}

const late = new OutputTag<Bid>('late-bids');
const windows = defineJob('windows', (env) => {
  const bids = env.fromCollection<Bid>([]);
  bids
    .keyBy((b) => b.auction)
    .window(SlidingEventTimeWindows.of(10_000, 2_000))
    .allowedLateness(1_000)
    .sideOutputLateData(late)
    .aggregate({ createAccumulator: () => 0, add: (b: Bid, acc: number) => Math.max(acc, b.price), getResult: (acc: number) => acc }, new MaxWithWindow())
    .collect();
  bids.windowAll(TumblingProcessingTimeWindows.of(1_000)).process(new CountAll()).writeAsText('/tmp/counts');
  bids
    .keyBy((b) => b.auction)
    .window(EventTimeSessionWindows.withGap(500))
    .trigger(CountTrigger.of(3))
    .reduce((a, b) => (a.price > b.price ? a : b))
    .writeAsText('/tmp/sessions');
});

const windowOps = (graph: { vertices: readonly { operators: readonly OperatorSpec[] }[] }) =>
  graph.vertices.flatMap((v) => v.operators).filter((op): op is Extract<OperatorSpec, { kind: 'keyed.window' }> => op.kind === 'keyed.window');

describe('windowed streams in the job API', () => {
  it('are pre-aggregated before the exchange only with event-time tumbling or sliding windows, their trigger, no lateness or late output, and a reduce or a merging aggregate', () => {
    const max = { createAccumulator: () => 0, add: (b: Bid, acc: number) => Math.max(acc, b.price), getResult: (acc: number) => acc };
    const merging = { ...max, merge: (a: number, b: number) => Math.max(a, b) };
    class Count extends ProcessWindowFunction<Bid, number, number> {
      process(_key: number, _ctx: ProcessWindowContext, elements: Iterable<Bid>, out: Collector<number>): void {
        out.collect([...elements].length);
      }
    }
    const job = defineJob('pre', (env) => {
      const bids = env.fromCollection<Bid>([]);
      const byAuction = bids.keyBy((b) => b.auction);
      const tumbling = () => byAuction.window(TumblingEventTimeWindows.of(1_000));
      const sinks: [string, { name(n: string): { writeAsText(path: string): unknown } }][] = [
        ['merging', tumbling().aggregate(merging)],
        ['all merging', bids.windowAll(SlidingEventTimeWindows.of(1_000, 100)).aggregate(merging)],
        ['reduce', tumbling().reduce((a, b) => (a.price > b.price ? a : b))],
        ['no merge', tumbling().aggregate(max)],
        ['lateness', tumbling().allowedLateness(10).aggregate(merging)],
        ['late output', tumbling().sideOutputLateData(late).aggregate(merging)],
        ['count trigger', tumbling().trigger(CountTrigger.of(2)).aggregate(merging)],
        ['processing time', byAuction.window(TumblingProcessingTimeWindows.of(1_000)).aggregate(merging)],
        ['sessions', byAuction.window(EventTimeSessionWindows.withGap(100)).aggregate(merging)],
        ['process', tumbling().process(new Count())],
      ];
      for (const [name, stream] of sinks) stream.name(name).writeAsText(`/tmp/pre-${name.replace(' ', '-')}`);
    });
    const graph = buildJobGraph(job, buildOptions());
    const pre = Object.fromEntries(windowOps(graph).map((op) => [op.name, op.preAggregate === true]));
    expect(pre).toEqual({
      merging: true,
      'all merging': true,
      reduce: true,
      'no merge': false,
      lateness: false,
      'late output': false,
      'count trigger': false,
      'processing time': false,
      sessions: false,
      process: false,
    });
    expect(parseJobGraph(JSON.parse(JSON.stringify(graph)))).toEqual(graph);
  });

  it('record a window operator with its assigner, trigger, lateness and late-data tag as plain data, reading a hash edge', () => {
    const graph = buildJobGraph(windows, buildOptions());
    const [sliding, all, sessions] = windowOps(graph);
    expect(sliding).toMatchObject({
      kind: 'keyed.window',
      name: 'window',
      window: { type: 'sliding', timeDomain: 'event-time', size: 10_000, slide: 2_000, offset: 0 },
      trigger: { type: 'event-time' },
      allowedLateness: 1_000,
      lateDataTag: 'late-bids',
      windowFunction: 'aggregate',
    });
    expect(Object.keys(sliding!).filter((k) => ['key', 'createAccumulator', 'add', 'getResult', 'merge', 'process', 'reduce'].includes(k))).toEqual([
      'key',
      'createAccumulator',
      'add',
      'getResult',
      'process',
    ]);
    expect(all).toMatchObject({
      name: 'windowAll',
      window: { type: 'tumbling', timeDomain: 'processing-time', size: 1_000 },
      trigger: { type: 'processing-time' },
    });
    expect(sessions).toMatchObject({ window: { type: 'session', gap: 500 }, trigger: { type: 'count', count: 3 }, windowFunction: 'reduce' });
    const allVertex = graph.vertices.find((v) => v.operators[0]?.id === all!.id)!;
    expect(allVertex.parallelism).toBe(1);
    for (const op of [sliding, all, sessions]) {
      expect(graph.edges.find((e) => e.target === op!.id)).toMatchObject({ partitioner: 'hash', keySelector: { operatorId: op!.id, role: 'key' } });
    }
    // The graph survives the JobGraph schema as it is.
    expect(parseJobGraph(JSON.parse(JSON.stringify(graph)))).toEqual(graph);
  });

  it('a task finds every window function by its role, and windowAll’s process sees no key', () => {
    const graph = buildJobGraph(windows, buildOptions());
    const fns = resolveUserFunctions({ default: windows }, graph.program);
    const [sliding, all] = windowOps(graph);
    expect([...fns.keys()].filter((k) => k.startsWith(`${sliding!.id}.`))).toEqual(
      ['key', 'createAccumulator', 'add', 'getResult', 'process'].map((r) => `${sliding!.id}.${r}`),
    );
    const out: unknown[] = [];
    const window = { start: 0, end: 10, maxTimestamp: () => 9 };
    const ctx = { window: () => window, currentProcessingTime: () => 0, currentWatermark: () => 0, output: () => undefined };
    fns.get(`${sliding!.id}.process`)!(7, ctx, [42], { collect: (x: unknown) => out.push(x) });
    fns.get(`${all!.id}.process`)!(0, ctx, [{}, {}], { collect: (x: unknown) => out.push(x) });
    expect(out).toEqual(['7@0:42', 2]);
    expect(fns.get(`${all!.id}.key`)!({ auction: 1, price: 2 })).toBe(fns.get(`${all!.id}.key`)!({ auction: 9, price: 9 }));
  });

  it('refuse what cannot run, saying what was expected', () => {
    const build = (f: (env: Parameters<Parameters<typeof defineJob>[1]>[0]) => void) => () => buildJobGraph(defineJob('bad', f), buildOptions());
    expect(
      build((env) =>
        env
          .fromCollection([1])
          .keyBy((x) => x)
          .window({} as never),
      ),
    ).toThrow(/window\(assigner\) needs a window assigner: TumblingEventTimeWindows.of\(size\)/);
    expect(
      build((env) =>
        env
          .fromCollection([1])
          .keyBy((x) => x)
          .window(TumblingEventTimeWindows.of(10))
          .allowedLateness(-1),
      ),
    ).toThrow(/allowedLateness\(ms\) needs an integer number of milliseconds >= 0, found -1/);
    expect(
      build((env) =>
        env
          .fromCollection([1])
          .keyBy((x) => x)
          .window(TumblingProcessingTimeWindows.of(10))
          .sideOutputLateData(new OutputTag<number>('late')),
      ),
    ).toThrow(InvalidJobDefinitionError);
    expect(() => CountTrigger.of(0)).toThrow(/CountTrigger.of\(count\) needs an integer >= 1, found 0/);
    expect(
      build((env) =>
        env
          .fromCollection([1])
          .windowAll(TumblingEventTimeWindows.of(10))
          .process({} as never),
      ),
    ).toThrow(/process\(windowFunction\) needs a ProcessAllWindowFunction/);
  });
});
