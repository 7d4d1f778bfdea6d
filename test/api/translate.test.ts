import { describe, expect, it } from 'vitest';
import { defineJob, type JobDefinition } from '../../runtime/api/index.js';
import { buildJobGraph, defaultMaxParallelism } from '../../runtime/api/translate.js';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { InvalidJobGraphError } from '../../runtime/core/errors.js';
import { buildOptions } from '../support/job-graphs.js';

const options = buildOptions;

const uppercaseErrors = defineJob('uppercase-errors', (env, args) => {
  env
    .readTextFile(args[0] ?? 'input.txt')
    .filter((line) => line.includes('ERROR'))
    .name('errors')
    .map((line) => line.toUpperCase())
    .setParallelism(4)
    .writeAsText(args[1] ?? 'out');
});

// The same job with every operator in a vertex of its own, to look at the edges between them.
const uppercaseErrorsUnchained = defineJob('uppercase-errors', (env, args) => {
  env.disableOperatorChaining();
  uppercaseErrors.build(env, args);
});

describe('buildJobGraph', () => {
  it('gives operators the same ids on every run with the same args', () => {
    const a = buildJobGraph(uppercaseErrors, options());
    const b = buildJobGraph(uppercaseErrors, options());
    expect(a).toEqual(b);
    // the source and the filter (same parallelism, forward) are chained into one vertex
    expect(a.vertices.map((v) => `${v.id}:${v.name}`)).toEqual(['op-1:readTextFile -> errors', 'op-3:map', 'op-4:writeAsText']);
    expect(a.vertices.map((v) => v.operators.map((op) => `${op.kind}:${op.id}:${op.name}`))).toEqual([
      ['source.textFile:op-1:readTextFile', 'filter:op-2:errors'],
      ['map:op-3:map'],
      ['sink.textFile:op-4:writeAsText'],
    ]);
    // the task side finds the same ids by re-running the builder
    expect([...resolveUserFunctions({ default: uppercaseErrors }, { export: 'default', args: [] }).keys()]).toEqual(['op-2', 'op-3']);
  });

  it('records the job, its library and program, and FunctionRefs naming the export', () => {
    const g = buildJobGraph(uppercaseErrors, options({ args: ['in.log', 'res'], exportName: 'errorsJob' }));
    expect(g.jobId).toBe('job-1');
    expect(g.name).toBe('uppercase-errors');
    expect(g.library).toEqual({ sha256: 'a'.repeat(64), sizeBytes: 123 });
    expect(g.program).toEqual({ export: 'errorsJob', args: ['in.log', 'res'], planFingerprint: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(g.vertices[0]!.operators[1]).toEqual({ kind: 'filter', id: 'op-2', name: 'errors', fn: { export: 'errorsJob', operatorId: 'op-2' } });
  });

  it('uses forward edges between equal parallelism and rebalance (all-to-all) otherwise', () => {
    const g = buildJobGraph(uppercaseErrorsUnchained, options({ defaultParallelism: 2 }));
    expect(g.vertices.map((v) => v.parallelism)).toEqual([2, 2, 4, 2]);
    expect(g.edges).toEqual([
      { id: 'e-1', source: 'op-1', target: 'op-2', distribution: 'forward', partitioner: 'forward', partitionType: 'pipelined' },
      { id: 'e-2', source: 'op-2', target: 'op-3', distribution: 'all-to-all', partitioner: 'rebalance', partitionType: 'pipelined' },
      { id: 'e-3', source: 'op-3', target: 'op-4', distribution: 'all-to-all', partitioner: 'rebalance', partitionType: 'pipelined' },
    ]);
  });

  it('uses rebalance when asked, even between equal parallelism', () => {
    const job = defineJob('rebalanced', (env) => {
      env
        .setParallelism(3)
        .fromSequence(1, 100)
        .rebalance()
        .map((n) => n * 2)
        .collect();
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices.map((v) => `${v.name}/${v.parallelism}`)).toEqual(['fromSequence/3', 'map -> collect/3']);
    expect(g.edges.map((e) => `${e.distribution}/${e.partitioner}`)).toEqual(['all-to-all/rebalance']);
  });

  it('resolves relative file paths against the client cwd and keeps absolute ones', () => {
    const g = buildJobGraph(uppercaseErrors, options({ args: ['logs/in.txt', '/tmp/out'], cwd: '/home/user/project' }));
    const source = g.vertices[0]!.operators[0]!;
    const sink = g.vertices[2]!.operators[0]!;
    expect(source).toMatchObject({ kind: 'source.textFile', path: '/home/user/project/logs/in.txt', splitSizeBytes: 1024 * 1024 });
    expect(sink).toMatchObject({ kind: 'sink.textFile', path: '/tmp/out' });
  });

  it('makes a monitored text source unbounded: keyed operators after it emit updates, and a bad interval is refused', () => {
    const job = defineJob('monitored', (env) => {
      env
        .readTextFile('/in', { monitorContinuously: 250 })
        .keyBy((line) => line)
        .sum((line) => line.length)
        .collect();
    });
    const g = buildJobGraph(job, options());
    expect(g.vertices[0]!.operators[0]).toMatchObject({ kind: 'source.textFile', path: '/in', monitorIntervalMs: 250 });
    expect(g.vertices[1]!.operators[0]).toMatchObject({ kind: 'keyed.sum', emit: 'updates' });
    const bounded = buildJobGraph(
      defineJob('bounded', (env) => {
        env.readTextFile('/in').collect();
      }),
      options(),
    );
    expect(bounded.vertices[0]!.operators[0]).not.toHaveProperty('monitorIntervalMs');
    const badInterval = defineJob('bad', (env) => {
      env.readTextFile('/in', { monitorContinuously: 0.5 }).collect();
    });
    expect(() => buildJobGraph(badInterval, options())).toThrow(
      /readTextFile\('\/in', \{ monitorContinuously \}\) needs the listing interval in ms, an integer >= 1, found 0.5/,
    );
  });

  it("applies the environment's parallelism, defaults and Flink's default maxParallelism", () => {
    const job = defineJob('defaults', (env) => {
      env.setParallelism(200);
      env.readTextFile('/in', { splitSizeBytes: 4096 }).collect();
    });
    const g = buildJobGraph(job, options({ collectMaxRecords: 77 }));
    expect(g.vertices.map((v) => [v.parallelism, v.maxParallelism, v.slotSharingGroup])).toEqual([[200, 512, 'default']]);
    expect(g.vertices[0]!.operators[0]).toMatchObject({ splitSizeBytes: 4096 });
    expect(g.vertices[0]!.operators[1]).toMatchObject({ kind: 'sink.collect', maxRecords: 77 });
    expect([1, 85, 86, 1000, 30_000].map(defaultMaxParallelism)).toEqual([128, 128, 256, 2048, 32_768]);
  });

  it('inherits the slot sharing group of the inputs unless one is set', () => {
    const job = defineJob('groups', (env) => {
      env
        .fromSequence(0, 9)
        .map((n) => n + 1)
        .slotSharingGroup('heavy')
        .filter((n) => n > 2)
        .collect()
        .slotSharingGroup('sink');
    });
    const g = buildJobGraph(job, options());
    // map and filter share 'heavy' and are chained; a change of group breaks the chain
    expect(g.vertices.map((v) => `${v.name}:${v.slotSharingGroup}`)).toEqual(['fromSequence:default', 'map -> filter:heavy', 'collect:sink']);
  });

  it('leaves out branches that reach no sink, and rejects a job with no sink', () => {
    const branchy = defineJob('branchy', (env) => {
      const numbers = env.fromSequence(1, 10);
      numbers.map((n) => n * 10); // reaches no sink
      numbers.filter((n) => n % 2 === 0).collect();
    });
    const g = buildJobGraph(branchy, options());
    // the unused branch does not count as a second consumer, so the rest is one chain
    expect(g.vertices.map((v) => `${v.id}:${v.name}`)).toEqual(['op-1:fromSequence -> filter -> collect']);
    expect(g.edges).toEqual([]);

    const noSink = defineJob('no-sink', (env) => {
      env.fromSequence(1, 10).map((n) => n);
    });
    expect(() => buildJobGraph(noSink, options())).toThrow(/defines no sink/);
  });

  it('runs a collection source with parallelism 1 and refuses more', () => {
    const job = defineJob('collection', (env) => {
      env
        .fromCollection(['a', 'b'])
        .map((s) => s.toUpperCase())
        .collect();
    });
    const g = buildJobGraph(job, options({ defaultParallelism: 3 }));
    expect(g.vertices.map((v) => v.parallelism)).toEqual([1, 3]);
    expect(g.edges[0]).toMatchObject({ distribution: 'all-to-all', partitioner: 'rebalance' });
    const fns = resolveUserFunctions({ default: job }, { export: 'default', args: [] });
    expect((fns.get('op-1') as () => unknown)()).toEqual(['a', 'b']);

    const bad = defineJob('bad', (env) => {
      env.fromCollection([1]).setParallelism(2).collect();
    });
    expect(() => buildJobGraph(bad, options())).toThrow(/non-parallel operator/);
  });

  it('checks builder input and the result against the graph limits', () => {
    const cases: [JobDefinition, RegExp][] = [
      [
        defineJob(
          'p0',
          (env) =>
            void env
              .fromSequence(1, 2)
              .map((n) => n)
              .setParallelism(0)
              .collect(),
        ),
        /setParallelism\(n\) needs an integer >= 1, found 0/,
      ],
      [defineJob('seq', (env) => void env.fromSequence(5, 1).collect()), /from <= to, found from=5, to=1/],
      [
        defineJob(
          'fn',
          (env) =>
            void env
              .fromSequence(1, 2)
              .map(undefined as never)
              .collect(),
        ),
        /map\(fn\) needs a function, found undefined/,
      ],
      [defineJob('path', (env) => void env.readTextFile('').collect()), /readTextFile\(path\) needs a non-empty file path/],
      [defineJob('max', (env) => void env.fromSequence(1, 2).collect({ maxRecords: -1 })), /maxRecords.*found -1/],
      [defineJob('async', (async (env: never) => void env) as never), /returned a promise/],
    ];
    for (const [job, message] of cases) {
      expect(() => buildJobGraph(job, options())).toThrow(InvalidJobDefinitionError);
      expect(() => buildJobGraph(job, options())).toThrow(message);
    }
    const huge = defineJob('huge', (env) => void env.fromSequence(1, 2).setParallelism(40_000).collect());
    expect(() => buildJobGraph(huge, options())).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(huge, options())).toThrow(/setParallelism\(n\) needs an integer <= 32768 \(the most subtasks a vertex may have\), found 40000/);
    // What the builder cannot see, the graph's own check does.
    const job = defineJob('args', (env) => void env.fromSequence(1, 2).collect());
    const manyArgs = options({ args: Array.from({ length: 1001 }, (_, i) => `a${i}`) });
    expect(() => buildJobGraph(job, manyArgs)).toThrow(InvalidJobGraphError);
    expect(() => buildJobGraph(job, manyArgs)).toThrow(/program\.args has 1001 entries, the limit is 1000/);
  });

  it('rejects two collect sinks in one job', () => {
    const job = defineJob('two-collects', (env) => {
      const s = env.fromSequence(1, 3);
      s.collect();
      s.map((n) => n).collect();
    });
    expect(() => buildJobGraph(job, options())).toThrow(/2 collect sinks \('collect', 'collect'\), at most one/);
  });
});

describe('defineJob', () => {
  it('makes a plain marked object, recognised without instanceof', () => {
    const job = defineJob('x', () => {});
    expect(job).toMatchObject({ __floeJob: 1, name: 'x' });
    expect(Object.isFrozen(job)).toBe(true);
    const copy = { __floeJob: 1, name: 'copy', build: job.build };
    expect(() => resolveUserFunctions({ default: copy }, { export: 'default', args: [] })).not.toThrow();
  });

  it('rejects a missing name or builder', () => {
    expect(() => defineJob('', () => {})).toThrow(/non-empty job name/);
    expect(() => defineJob('x', 'nope' as never)).toThrow(/needs a builder function/);
  });
});
