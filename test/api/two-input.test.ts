// Translation of connected streams, joins and broadcast state into a JobGraph: a two-input operator heads its
// vertex, each input's edges say which input they feed and, when keyed, carry that input's key selector.
import { describe, expect, it } from 'vitest';
import {
  BroadcastProcessFunction,
  CoProcessFunction,
  defineJob,
  KeyedBroadcastProcessFunction,
  KeyedCoProcessFunction,
  MapStateDescriptor,
  ProcessJoinFunction,
  type Collector,
} from '../../runtime/api/index.js';
import { buildJobGraph, type BuildJobGraphOptions } from '../../runtime/api/translate.js';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { TumblingEventTimeWindows, EventTimeSessionWindows } from '../../runtime/api/windowing.js';
import { JobId } from '../../runtime/core/ids.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';

const options = (over: Partial<BuildJobGraphOptions> = {}): BuildJobGraphOptions => ({
  jobId: JobId.of('job-two'),
  args: [],
  exportName: 'default',
  library: { sha256: 'c'.repeat(64), sizeBytes: 1 },
  defaultParallelism: 2,
  cwd: '/w',
  ...over,
});

const edges = (g: JobGraph): string[] =>
  g.edges.map((e) => `${e.source}->${e.target} ${e.partitioner} input ${e.targetInput ?? 0}${e.keySelector ? ` by ${e.keySelector.role}` : ''}`);

class Pass extends CoProcessFunction<number, string, string> {
  processElement1(v: number, _ctx: unknown, out: Collector<string>): void {
    out.collect(String(v));
  }
  processElement2(v: string, _ctx: unknown, out: Collector<string>): void {
    out.collect(v);
  }
}

describe('connected streams', () => {
  it('connect(…).process gives a two-input vertex whose second input edge says so', () => {
    const job = defineJob('co', (env) => {
      const a = env.fromSequence(1, 10);
      const b = env.fromSequence(1, 5).map((n) => `s${n}`);
      a.connect(b).process(new Pass()).writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices.map((v) => v.operators.map((o) => o.kind).join('+'))).toEqual(['source.sequence', 'source.sequence+map', 'co.process+sink.textFile']);
    expect(edges(g)).toEqual(['op-1->op-4 forward input 0', 'op-2->op-4 forward input 1']);
    expect(parseJobGraph(JSON.parse(JSON.stringify(g)))).toEqual(g);
  });

  it('keyed connect carries each input key selector on its hash edges, and the task finds both', () => {
    class Fn extends KeyedCoProcessFunction<string, { id: string }, [string, number], string> {
      processElement1(): void {}
      processElement2(): void {}
    }
    const job = defineJob('kco', (env) => {
      const a = env.fromCollection([{ id: 'x' }]).keyBy((r) => r.id);
      const b = env.fromCollection<[string, number]>([['x', 1]]).keyBy((r) => r[0]);
      a.connect(b).process(new Fn()).writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    expect(edges(g)).toEqual(['op-1->op-3 hash input 0 by key', 'op-2->op-3 hash input 1 by key2']);
    const op = g.vertices[2]!.operators[0]!;
    expect(op).toMatchObject({ kind: 'keyed.coProcess', key: { role: 'key' }, key2: { role: 'key2' }, fn: { operatorId: 'op-3' } });
    const fns = resolveUserFunctions({ default: job }, { export: 'default', args: [] });
    expect([...fns.keys()].filter((k) => k.startsWith('op-3'))).toEqual(['op-3.key', 'op-3.key2', 'op-3']);
    expect((fns.get('op-3.key2') as (r: unknown) => unknown)(['x', 1])).toBe('x');
    expect(typeof (fns.get('op-3') as unknown as { processElement1: unknown }).processElement1).toBe('function');
  });

  it('connect(…).keyBy(k1, k2) keys both inputs; map on keyed connected streams routes by the keys without keyed state', () => {
    const job = defineJob('kmap', (env) => {
      const a = env.fromSequence(1, 10);
      const b = env.fromSequence(1, 10);
      a.connect(b)
        .keyBy(
          (n) => n % 3,
          (n) => n % 3,
        )
        .map({ map1: (n: number) => n, map2: (n: number) => -n })
        .writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    expect(edges(g)).toEqual(['op-1->op-3 hash input 0 by key', 'op-2->op-3 hash input 1 by key2']);
    expect(g.vertices[2]!.operators[0]!.kind).toBe('co.map');
    const fns = resolveUserFunctions({ default: job }, { export: 'default', args: [] });
    expect([...fns.keys()].filter((k) => k.startsWith('op-3'))).toEqual(['op-3.key', 'op-3.key2', 'op-3']);
  });

  it('refuses a CoMapFunction without map2, naming what is missing', () => {
    const job = defineJob('bad', (env) => {
      env
        .fromSequence(1, 2)
        .connect(env.fromSequence(1, 2))
        .map({ map1: (n: number) => n } as never)
        .writeAsText('/out');
    });
    expect(() => buildJobGraph(job, options())).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(job, options())).toThrow(/CoMapFunction.*without map2/);
  });
});

describe('joins', () => {
  class J extends ProcessJoinFunction<{ k: string }, { k: string }, string> {
    processElement(): void {}
  }

  it('intervalJoin(…).between(…) records its bounds and key selectors; exclusive bounds are kept', () => {
    const job = defineJob('ij', (env) => {
      const a = env.fromCollection([{ k: 'a' }]).keyBy((r) => r.k);
      const b = env.fromCollection([{ k: 'a' }]).keyBy((r) => r.k);
      a.intervalJoin(b).between(-5, 10).upperBoundExclusive().process(new J()).writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices[2]!.operators[0]).toMatchObject({
      kind: 'keyed.intervalJoin',
      lowerMs: -5,
      upperMs: 10,
      lowerBoundExclusive: false,
      upperBoundExclusive: true,
    });
    expect(edges(g)).toEqual(['op-1->op-3 hash input 0 by key', 'op-2->op-3 hash input 1 by key2']);
  });

  it('refuses bounds in the wrong order', () => {
    const job = defineJob('ij', (env) => {
      const a = env.fromCollection([{ k: 'a' }]).keyBy((r) => r.k);
      a.intervalJoin(a).between(10, 5).process(new J()).writeAsText('/out');
    });
    expect(() => buildJobGraph(job, options())).toThrow(/lowerMs <= upperMs, found 10 > 5/);
  });

  it('join(…).where(…).equalTo(…).window(…).apply(fn) keys both sides and keeps the window as plain data', () => {
    const job = defineJob('wj', (env) => {
      const a = env.fromSequence(1, 10);
      const b = env.fromSequence(1, 10).map((n) => ({ id: n }));
      a.join(b)
        .where((n) => n)
        .equalTo((r) => r.id)
        .window(TumblingEventTimeWindows.of(1000))
        .apply((n, r) => `${n}:${r.id}`)
        .writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices[2]!.operators[0]).toMatchObject({
      kind: 'keyed.windowJoin',
      mode: 'join',
      window: { sizeMs: 1000, offsetMs: 0 },
      assigner: { role: 'assigner' },
    });
    expect(edges(g)).toEqual(['op-1->op-4 hash input 0 by key', 'op-2->op-4 hash input 1 by key2']);
  });

  it('refuses session windows for a window join', () => {
    const job = defineJob('wj', (env) => {
      const a = env.fromSequence(1, 10);
      a.coGroup(a)
        .where((n) => n)
        .equalTo((n) => n)
        .window(EventTimeSessionWindows.withGap(10))
        .apply(() => undefined)
        .writeAsText('/out');
    });
    expect(() => buildJobGraph(job, options())).toThrow(/tumbling or sliding windows/);
  });
});

describe('broadcast state', () => {
  const rules = new MapStateDescriptor<string, number>('rules');

  it('broadcast(descriptor) makes a broadcast edge into input 1; the operator knows the state names', () => {
    class Fn extends KeyedBroadcastProcessFunction<string, string, [string, number], string> {
      processElement(): void {}
      processBroadcastElement(): void {}
    }
    const job = defineJob('bc', (env) => {
      const rulesStream = env.fromCollection<[string, number]>([['a', 1]]).broadcast(rules);
      env
        .fromCollection(['a'])
        .keyBy((s) => s)
        .connect(rulesStream)
        .process(new Fn())
        .writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    expect(edges(g)).toEqual(['op-2->op-3 hash input 0 by key', 'op-1->op-3 broadcast input 1']);
    expect(g.vertices.find((v) => v.id === 'op-3')!.operators[0]).toMatchObject({ kind: 'keyed.broadcastProcess', broadcastStates: ['rules'] });
  });

  it('a plain stream connects to a broadcast stream too; broadcast() without descriptors stays a partitioning', () => {
    class Fn extends BroadcastProcessFunction<number, number, number> {
      processElement(): void {}
      processBroadcastElement(): void {}
    }
    const job = defineJob('bc2', (env) => {
      const s = env.fromSequence(1, 3);
      s.connect(env.fromSequence(1, 3).broadcast(rules)).process(new Fn()).writeAsText('/out');
      s.broadcast()
        .map((n) => n)
        .writeAsText('/out2');
    });
    const g = buildJobGraph(job, options());
    expect(edges(g)).toEqual(['op-1->op-3 forward input 0', 'op-2->op-3 broadcast input 1', 'op-1->op-5 broadcast input 0']);
  });

  it('validation refuses a keyed broadcast operator whose broadcast input is not a broadcast edge', () => {
    class Fn extends KeyedBroadcastProcessFunction<number, number, number, number> {
      processElement(): void {}
      processBroadcastElement(): void {}
    }
    const job = defineJob('bc3', (env) => {
      const s = env.fromSequence(1, 3);
      s.keyBy((n) => n)
        .connect(env.fromSequence(1, 3).broadcast(rules))
        .process(new Fn())
        .writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    const bad: JobGraph = { ...g, edges: g.edges.map((e) => (e.targetInput === 1 ? { ...e, partitioner: 'rebalance' as const } : e)) };
    expect(() => validateJobGraph(bad)).toThrow(/broadcast input of .* needs a broadcast edge, found a 'rebalance' edge/);
  });
});

describe('validation of two-input vertices', () => {
  it('refuses a two-input vertex that an input has no edge into, and an edge into input 1 of a one-input vertex', () => {
    const job = defineJob('co', (env) => {
      env
        .fromSequence(1, 3)
        .connect(env.fromSequence(1, 3))
        .map({ map1: (n: number) => n, map2: (n: number) => n })
        .map((n) => n)
        .disableChaining()
        .writeAsText('/out');
    });
    const g = buildJobGraph(job, options());
    const missing: JobGraph = { ...g, edges: g.edges.filter((e) => e.targetInput !== 1) };
    expect(() => validateJobGraph(missing)).toThrow(/two-input operator 'Co-Map' \(co.map\) but no edge feeds its input 1/);
    const wrong: JobGraph = { ...g, edges: g.edges.map((e) => (e.target === 'op-4' ? { ...e, targetInput: 1 } : e)) };
    expect(() => validateJobGraph(wrong)).toThrow(/feeds input 1 of 'map', whose first operator 'map' \(map\) reads one input/);
  });
});
