// Translation of keyed streams, union, broadcast, exchange modes and operator chaining into a JobGraph.
import { describe, expect, it } from 'vitest';
import { defineJob, type JobDefinition } from '../../runtime/api/index.js';
import { buildJobGraph, type BuildJobGraphOptions } from '../../runtime/api/translate.js';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';

const options = (over: Partial<BuildJobGraphOptions> = {}): BuildJobGraphOptions => ({
  jobId: JobId.of('job-k'),
  args: [],
  exportName: 'default',
  library: { sha256: 'b'.repeat(64), sizeBytes: 1 },
  defaultParallelism: 2,
  cwd: '/w',
  ...over,
});

const chains = (g: JobGraph): string[] => g.vertices.map((v) => `${v.operators.map((o) => o.kind).join('+')}/${v.parallelism}`);
const edgeSummary = (g: JobGraph): string[] => g.edges.map((e) => `${e.source}->${e.target} ${e.partitioner} ${e.partitionType}`);

const wordcount = defineJob('wc', (env) => {
  env
    .readTextFile('/in')
    .flatMap((l: string) => l.split(' ').map((w): [string, number] => [w, 1]))
    .keyBy(([w]) => w)
    .sum(1)
    .writeAsText('/out');
});

describe('keyed streams', () => {
  it('turns keyBy + sum into a hash edge that carries the key selector, and a keyed operator heading its chain', () => {
    const g = buildJobGraph(wordcount, options());
    expect(chains(g)).toEqual(['source.textFile+flatMap/2', 'keyed.sum+sink.textFile/2']);
    expect(g.edges).toEqual([
      {
        id: 'e-1',
        source: 'op-1',
        target: 'op-3',
        distribution: 'all-to-all',
        partitioner: 'hash',
        partitionType: 'pipelined',
        keySelector: { export: 'default', operatorId: 'op-3', role: 'key' },
      },
    ]);
    expect(g.vertices[1]!.operators[0]).toEqual({
      kind: 'keyed.sum',
      id: 'op-3',
      name: 'sum',
      key: { export: 'default', operatorId: 'op-3', role: 'key' },
      field: 1,
      emit: 'final',
      preAggregate: true,
    });
    // The task finds the key selector under the role the FunctionRef names.
    const fns = resolveUserFunctions({ default: wordcount }, { export: 'default', args: [] });
    expect([...fns.keys()]).toEqual(['op-2', 'op-3.key']);
    expect((fns.get('op-3.key') as (r: unknown) => unknown)(['floe', 1])).toBe('floe');
    // What the client sends survives the Dispatcher's parsing unchanged.
    expect(parseJobGraph(JSON.parse(JSON.stringify(g)))).toEqual(g);
  });

  it('emits final values on bounded input and running updates when any source upstream is unbounded', () => {
    const job = defineJob('modes', (env) => {
      const bounded = env.fromSequence(1, 10);
      const endless = env.generate((i) => i % 7);
      bounded
        .keyBy((n) => n % 2)
        .reduce((a, b) => a + b)
        .collect();
      bounded
        .union(endless)
        .keyBy((n) => n)
        .sum()
        .writeAsText('/sums');
      env
        .generate((i) => i, { count: 5, ratePerSecond: 100 })
        .keyBy((n) => n)
        .aggregate({
          createAccumulator: () => 0,
          add: (v: number, acc: number) => acc + v,
          getResult: (acc: number) => acc,
        })
        .writeAsText('/agg');
    });
    const g = buildJobGraph(job, options());
    const keyed = g.vertices.flatMap((v) => v.operators).filter((o) => o.kind.startsWith('keyed.'));
    expect(keyed.map((o) => `${o.kind}:${'emit' in o ? o.emit : ''}`)).toEqual(['keyed.reduce:final', 'keyed.sum:updates', 'keyed.aggregate:final']);
    const gen = g.vertices.flatMap((v) => v.operators).filter((o) => o.kind === 'source.generate');
    expect(gen).toEqual([
      { kind: 'source.generate', id: 'op-2', name: 'generate', fn: { export: 'default', operatorId: 'op-2' } },
      { kind: 'source.generate', id: 'op-7', name: 'generate', fn: { export: 'default', operatorId: 'op-7' }, count: 5, ratePerSecond: 100 },
    ]);
    const agg = keyed[2]!;
    expect(agg).toMatchObject({ createAccumulator: { role: 'createAccumulator' }, add: { role: 'add' }, getResult: { role: 'getResult' } });
    expect(parseJobGraph(JSON.parse(JSON.stringify(g)))).toEqual(g);
  });

  it('keeps an aggregate object as `this` of its methods, and sums by a selector into [key, sum]', () => {
    class Average {
      readonly start = 0;
      createAccumulator() {
        return { sum: this.start, n: 0 };
      }
      add(v: number, acc: { sum: number; n: number }) {
        return { sum: acc.sum + v, n: acc.n + 1 };
      }
      getResult(acc: { sum: number; n: number }) {
        return acc.sum / acc.n;
      }
    }
    const job = defineJob('avg', (env) => {
      env
        .fromSequence(1, 4)
        .keyBy((n) => n % 2)
        .aggregate(new Average())
        .collect();
      env
        .fromSequence(1, 4)
        .keyBy((n) => `k${n % 2}`)
        .sum(() => 1)
        .writeAsText('/x');
    });
    const fns = resolveUserFunctions({ default: job }, { export: 'default', args: [] });
    expect((fns.get('op-2.createAccumulator') as () => unknown)()).toEqual({ sum: 0, n: 0 });
    const g = buildJobGraph(job, options());
    expect(g.vertices.flatMap((v) => v.operators).find((o) => o.kind === 'keyed.sum')).toMatchObject({ selector: { operatorId: 'op-5', role: 'selector' } });
  });

  it('rejects misuse with messages that say what to do', () => {
    const cases: [JobDefinition, RegExp][] = [
      [defineJob('k', (env) => void env.fromSequence(1, 2).keyBy('x' as never)), /keyBy\(fn\) needs a function, found string/],
      [
        defineJob(
          's',
          (env) =>
            void env
              .fromSequence(1, 2)
              .keyBy((n) => n)
              .sum(-1 as never)
              .collect(),
        ),
        /sum\(field\) needs a property name, a tuple index >= 0 or a selector/,
      ],
      [
        defineJob(
          'm',
          (env) =>
            void env
              .fromSequence(1, 2)
              .keyBy((n) => n)
              .minBy(undefined as never)
              .collect(),
        ),
        /minBy\(field\) needs a property name, a tuple index >= 0, found nothing/,
      ],
      [
        defineJob(
          'a',
          (env) =>
            void env
              .fromSequence(1, 2)
              .keyBy((n) => n)
              .aggregate({ createAccumulator: () => 0 } as never)
              .collect(),
        ),
        /aggregate\(\{ add \}\)\(fn\) needs a function/,
      ],
      [
        defineJob(
          'x',
          (env) =>
            void env
              .fromSequence(1, 2)
              .rebalance({ exchange: 'lazy' as never })
              .collect(),
        ),
        /rebalance\(\{ exchange \}\) must be 'pipelined' or 'blocking', found "lazy"/,
      ],
      [defineJob('d', (env) => void env.setDefaultExchange('eager' as never)), /setDefaultExchange\(mode\) needs 'pipelined' or 'blocking'/],
      [defineJob('g', (env) => void env.generate((i) => i, { count: 1.5 }).collect()), /generate\(fn, \{ count \}\) needs an integer >= 0, found 1.5/],
      [defineJob('r', (env) => void env.generate((i) => i, { ratePerSecond: 0 }).collect()), /ratePerSecond \}\) needs a finite number > 0, found 0/],
    ];
    for (const [job, message] of cases) {
      expect(() => buildJobGraph(job, options())).toThrow(InvalidJobDefinitionError);
      expect(() => buildJobGraph(job, options())).toThrow(message);
    }
  });

  it('validation: a keyed operator must be fed by hash edges that route by its own key selector', () => {
    const g = buildJobGraph(wordcount, options());
    const rebalanced = {
      ...g,
      edges: g.edges.map((e) => ({
        id: e.id,
        source: e.source,
        target: e.target,
        distribution: e.distribution,
        partitioner: 'rebalance' as const,
        partitionType: e.partitionType,
      })),
    };
    expect(() => validateJobGraph(rebalanced)).toThrow(
      /starts with keyed operator 'sum' \(keyed.sum\), which must be fed by hash edges, found a 'rebalance' edge; use keyBy/,
    );
    const noSelector = { ...g, edges: g.edges.map(({ keySelector: _k, ...e }) => e) };
    expect(() => validateJobGraph(noSelector)).toThrow(/a hash edge needs a keySelector/);
    const otherSelector = { ...g, edges: g.edges.map((e) => ({ ...e, keySelector: { export: 'default', operatorId: 'op-2' } })) };
    expect(() => validateJobGraph(otherSelector)).toThrow(
      /routes records by the function of 'flatMap' but 'sum' keys them by the key of 'sum'; both sides must use the same key selector/,
    );
    const buried = {
      ...g,
      vertices: [
        g.vertices[0]!,
        {
          ...g.vertices[1]!,
          operators: [{ kind: 'map' as const, id: 'm9', name: 'm9', fn: { export: 'default', operatorId: 'op-2' } }, ...g.vertices[1]!.operators],
        },
      ],
    };
    expect(() => validateJobGraph(buried)).toThrow(/a keyed operator \(keyed.sum\) must head its chain/);
    expect(() => validateJobGraph(g, ['other'])).toThrow(/operators\[0\] \('sum'\)\.key\.export 'default' is not exported by the library/);
  });
});

describe('union, broadcast and exchange modes', () => {
  it('unions streams into one operator with an input edge per member', () => {
    const job = defineJob('u', (env) => {
      const a = env.fromSequence(1, 5).name('a');
      const b = env.fromSequence(6, 9).name('b').setParallelism(3);
      const c = env.fromCollection([10]).name('c');
      a.union(b, c)
        .map((n) => n * 2)
        .name('double')
        .collect();
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices.map((v) => v.name)).toEqual(['a', 'b', 'c', 'double -> collect']);
    // a has the same parallelism (forward); b and c do not (rebalance).
    expect(edgeSummary(g)).toEqual(['op-1->op-4 forward pipelined', 'op-2->op-4 rebalance pipelined', 'op-3->op-4 rebalance pipelined']);
    expect(() =>
      buildJobGraph(
        defineJob(
          'bad',
          (env) =>
            void env
              .fromSequence(1, 2)
              .union(null as never)
              .collect(),
        ),
        options(),
      ),
    ).toThrow(/union\(\.\.\.streams\) needs DataStreams, argument 1 is null/);
  });

  it('keyBy after a union hashes every member by the same selector', () => {
    const job = defineJob('uk', (env) => {
      env
        .fromSequence(1, 5)
        .union(env.fromSequence(6, 9))
        .keyBy((n) => n % 3)
        .sum()
        .collect();
    });
    const g = buildJobGraph(job, options());
    expect(g.edges.map((e) => [e.partitioner, e.keySelector])).toEqual([
      ['hash', { export: 'default', operatorId: 'op-3', role: 'key' }],
      ['hash', { export: 'default', operatorId: 'op-3', role: 'key' }],
    ]);
  });

  it('broadcasts over an all-to-all edge even between equal parallelism', () => {
    const job = defineJob(
      'b',
      (env) =>
        void env
          .fromSequence(1, 5)
          .broadcast()
          .map((n) => n)
          .collect(),
    );
    const g = buildJobGraph(job, options());
    expect(edgeSummary(g)).toEqual(['op-1->op-2 broadcast pipelined']);
    expect(g.edges[0]!.distribution).toBe('all-to-all');
  });

  it('makes all-to-all edges pipelined by default, blocking by env default or per edge; forward edges stay pipelined', () => {
    const build = (setup: (env: Parameters<JobDefinition['build']>[0]) => void): string[] =>
      edgeSummary(
        buildJobGraph(
          defineJob('x', (env) => setup(env)),
          options(),
        ),
      );
    const pipeline = (env: Parameters<JobDefinition['build']>[0], opt?: { exchange: 'blocking' | 'pipelined' }): void => {
      env
        .fromSequence(1, 9)
        .rebalance(opt)
        .map((n) => n)
        .keyBy((n) => n, opt)
        .reduce((a, b) => a + b)
        .broadcast(opt)
        .map((n) => n)
        .setParallelism(3)
        .disableChaining()
        .map((n) => n)
        .setParallelism(3)
        .collect()
        .setParallelism(3);
    };
    expect(build((env) => pipeline(env))).toEqual([
      'op-1->op-2 rebalance pipelined',
      'op-2->op-3 hash pipelined',
      'op-3->op-4 broadcast pipelined',
      'op-4->op-5 forward pipelined',
    ]);
    expect(build((env) => pipeline(env.setDefaultExchange('blocking')))).toEqual([
      'op-1->op-2 rebalance blocking',
      'op-2->op-3 hash blocking',
      'op-3->op-4 broadcast blocking',
      'op-4->op-5 forward pipelined',
    ]);
    expect(build((env) => pipeline(env, { exchange: 'blocking' }))).toEqual([
      'op-1->op-2 rebalance blocking',
      'op-2->op-3 hash blocking',
      'op-3->op-4 broadcast blocking',
      'op-4->op-5 forward pipelined',
    ]);
    // a per-edge choice wins over the default
    expect(build((env) => pipeline(env.setDefaultExchange('blocking'), { exchange: 'pipelined' }))[0]).toBe('op-1->op-2 rebalance pipelined');
  });
});

describe('operator chaining', () => {
  const linear = (tweak: (env: Parameters<JobDefinition['build']>[0]) => void = () => {}, mid?: 'startNewChain' | 'disableChaining'): JobDefinition =>
    defineJob('linear', (env) => {
      tweak(env);
      const m = env
        .fromSequence(1, 9)
        .map((n) => n + 1)
        .name('m');
      if (mid !== undefined) m[mid]();
      m.filter((n) => n > 2)
        .name('f')
        .map((n) => n * 2)
        .name('g')
        .collect();
    });

  it('fuses forward neighbours with equal parallelism and slot sharing group into one vertex', () => {
    const g = buildJobGraph(linear(), options());
    expect(g.vertices.map((v) => `${v.id}:${v.name}`)).toEqual(['op-1:fromSequence -> m -> f -> g -> collect']);
    expect(g.edges).toEqual([]);
  });

  it('env.disableOperatorChaining() puts every operator in a vertex of its own', () => {
    const g = buildJobGraph(
      linear((env) => env.disableOperatorChaining()),
      options(),
    );
    expect(g.vertices.map((v) => v.name)).toEqual(['fromSequence', 'm', 'f', 'g', 'collect']);
    expect(g.edges.every((e) => e.partitioner === 'forward')).toBe(true);
  });

  it('startNewChain() breaks before the operator only; disableChaining() before and after', () => {
    expect(buildJobGraph(linear(undefined, 'startNewChain'), options()).vertices.map((v) => v.name)).toEqual(['fromSequence', 'm -> f -> g -> collect']);
    expect(buildJobGraph(linear(undefined, 'disableChaining'), options()).vertices.map((v) => v.name)).toEqual(['fromSequence', 'm', 'f -> g -> collect']);
  });

  it('does not chain across a parallelism change, a partitioner, a slot sharing group or a fan-in; chains a fan-out as branches', () => {
    const job = defineJob('breaks', (env) => {
      const s = env.fromSequence(1, 9);
      const p = s
        .map((n) => n)
        .name('p3')
        .setParallelism(3); // parallelism change
      const r = p
        .rebalance()
        .map((n) => n)
        .name('r3')
        .setParallelism(3); // explicit partitioner
      const g = r
        .map((n) => n)
        .name('grp')
        .setParallelism(3)
        .slotSharingGroup('other'); // group change
      const a = g
        .map((n) => n)
        .name('a')
        .setParallelism(3)
        .slotSharingGroup('other'); // chained to grp, then fans out into two chained branches:
      a.map((n) => n)
        .name('left')
        .setParallelism(3)
        .slotSharingGroup('other')
        .union(
          a
            .map((n) => n)
            .name('right')
            .setParallelism(3)
            .slotSharingGroup('other'),
        )
        .map((n) => n) // fan-in: two inputs
        .name('join')
        .setParallelism(3)
        .slotSharingGroup('other')
        .collect()
        .setParallelism(3)
        .slotSharingGroup('other');
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices.map((v) => v.name)).toEqual(['fromSequence', 'p3', 'r3', 'grp -> a -> left -> right', 'join -> collect']);
    expect(new Set(g.vertices.map((v) => v.slotSharingGroup))).toEqual(new Set(['default', 'other']));
    // left and right both read a (index 1); each feeds the join by its own edge.
    const branching = g.vertices.find((v) => v.name === 'grp -> a -> left -> right')!;
    expect(branching.chainInputs).toEqual([-1, 0, 1, 1]);
    expect(g.edges.filter((e) => e.source === branching.id).map((e) => e.sourceOperator)).toEqual([2, 3]);
    expect(g.vertices.filter((v) => v !== branching).every((v) => v.chainInputs === undefined)).toBe(true);
  });

  it('keeps a sink out of a branching chain, and a branch that does not qualify in its own vertex', () => {
    const job = defineJob('fan-out', (env) => {
      const s = env.fromSequence(1, 9);
      s.map((n) => n + 1)
        .name('plus')
        .collect();
      s.map((n) => n * 2)
        .name('times')
        .setParallelism(3)
        .writeAsText('/tmp/out');
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices.map((v) => v.name)).toEqual(['fromSequence -> plus', 'collect', 'times', 'writeAsText']);
    const head = g.vertices[0]!;
    expect(head.chainInputs).toEqual([-1, 0]);
    // The edge to the other parallelism leaves from the source, the other from 'plus'.
    expect(g.edges.filter((e) => e.source === head.id).map((e) => e.sourceOperator)).toEqual([1, 0]);
  });

  it('gives a sink its own vertex with disableChaining()', () => {
    const job = defineJob(
      'sink',
      (env) =>
        void env
          .fromSequence(1, 3)
          .map((n) => n)
          .collect()
          .disableChaining(),
    );
    expect(buildJobGraph(job, options()).vertices.map((v) => v.name)).toEqual(['fromSequence -> map', 'collect']);
  });
});
