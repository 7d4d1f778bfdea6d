// Checkpointing in the job API and the JobGraph: env.enableCheckpointing and getCheckpointConfig() with
// Flink's setters, operator uids, what the JobGraph records, how the cluster's options fill what a job
// leaves unset, and the deployment fields a checkpointing task receives.
import { describe, expect, it } from 'vitest';
import { CheckpointingMode, defineJob, ExternalizedCheckpointRetention, KeyedProcessFunction } from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { checkpointOptionsOf, checkpointsDirOf, resolveCheckpointing } from '../../runtime/checkpoint/checkpointing-settings.js';
import { loadConfig } from '../../runtime/core/config.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import { AllocationId, ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import { packTaskDeployments, unpackTaskDeployments, type TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { buildOptions, problemsOf } from '../support/job-graphs.js';

class Count extends KeyedProcessFunction<number, number, number> {
  processElement(value: number, _ctx: unknown, out: { collect(v: number): void }): void {
    out.collect(value);
  }
}

const checkpointed = defineJob('checkpointed', (env) => {
  env.enableCheckpointing(500, CheckpointingMode.AT_LEAST_ONCE);
  env
    .getCheckpointConfig()
    .setCheckpointTimeout(30_000)
    .setMinPauseBetweenCheckpoints(100)
    .setMaxConcurrentCheckpoints(1)
    .setTolerableCheckpointFailureNumber(3)
    .setExternalizedCheckpointRetention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
  env
    .fromSequence(1, 100)
    .uid('numbers')
    .keyBy((n) => n % 4)
    .process(new Count())
    .uid('counter')
    .name('count')
    .map((n) => n + 1)
    .collect()
    .uid('result');
});

const opsOf = (g: JobGraph) => g.vertices.flatMap((v) => v.operators);

describe('env.enableCheckpointing and getCheckpointConfig()', () => {
  it('records the settings the job made, and only those, in the JobGraph', () => {
    const g = buildJobGraph(checkpointed, buildOptions());
    expect(g.checkpointing).toEqual({
      intervalMs: 500,
      mode: 'AT_LEAST_ONCE',
      timeoutMs: 30_000,
      minPauseMs: 100,
      tolerableFailures: 3,
      externalizedRetention: 'RETAIN_ON_CANCELLATION',
    });
    // The graph survives the trip through JSON and the schema as it is.
    expect(parseJobGraph(JSON.parse(JSON.stringify(g)))).toEqual(g);
    const plain = buildJobGraph(
      defineJob('plain', (env) => env.fromSequence(1, 3).collect()),
      buildOptions(),
    );
    expect(plain).not.toHaveProperty('checkpointing');
  });

  it('takes unaligned checkpoints with their aligned timeout', () => {
    const job = defineJob('unaligned', (env) => {
      env.getCheckpointConfig().setCheckpointInterval(1_000).enableUnalignedCheckpoints().setAlignedCheckpointTimeout(200);
      env.fromSequence(1, 3).collect();
    });
    expect(buildJobGraph(job, buildOptions()).checkpointing).toEqual({ intervalMs: 1_000, unaligned: true, alignedCheckpointTimeoutMs: 200 });
  });

  it('refuses values Flink refuses, saying what it needs', () => {
    const refused = (configure: (env: Parameters<Parameters<typeof defineJob>[1]>[0]) => void): string => {
      const job = defineJob('bad', (env) => {
        configure(env);
        env.fromSequence(1, 3).collect();
      });
      try {
        buildJobGraph(job, buildOptions());
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidJobDefinitionError);
        return (e as Error).message;
      }
      throw new Error('expected the definition to be refused');
    };
    expect(refused((env) => env.enableCheckpointing(5))).toMatch(/enableCheckpointing\(ms, mode\?\) needs an integer >= 10 \(ms\), found 5/);
    expect(refused((env) => env.enableCheckpointing(1_000, 'EXACTLY' as never))).toMatch(
      /needs CheckpointingMode.EXACTLY_ONCE or CheckpointingMode.AT_LEAST_ONCE, found "EXACTLY"/,
    );
    expect(refused((env) => env.getCheckpointConfig().setMaxConcurrentCheckpoints(2 as 1))).toMatch(
      /setMaxConcurrentCheckpoints\(n\) takes only 1: a job has at most one checkpoint in flight.*found 2/,
    );
    expect(refused((env) => env.getCheckpointConfig().setCheckpointTimeout(0))).toMatch(/setCheckpointTimeout\(ms\) needs an integer >= 1 \(ms\), found 0/);
    expect(refused((env) => env.getCheckpointConfig().setTolerableCheckpointFailureNumber(-1))).toMatch(/needs an integer >= 0, found -1/);
    expect(refused((env) => env.getCheckpointConfig().setExternalizedCheckpointRetention('KEEP' as never))).toMatch(
      /RETAIN_ON_CANCELLATION or DELETE_ON_CANCELLATION, found "KEEP"/,
    );
  });

  it('refuses unaligned checkpoints in AT_LEAST_ONCE mode when the graph is built', () => {
    const job = defineJob('mixed', (env) => {
      env.enableCheckpointing(1_000, CheckpointingMode.AT_LEAST_ONCE).getCheckpointConfig().enableUnalignedCheckpoints();
      env.fromSequence(1, 3).collect();
    });
    expect(problemsOf(() => buildJobGraph(job, buildOptions()))).toEqual([expect.stringMatching(/unaligned checkpoints exist only for 'EXACTLY_ONCE'/)]);
  });

  it('refuses blocking exchanges in a checkpointing job when the graph is built (its final checkpoint could never be taken)', () => {
    const job = defineJob('blocking', (env) => {
      env.enableCheckpointing(1_000).setDefaultExchange('blocking');
      env
        .fromSequence(1, 3)
        .rebalance()
        .map((n) => n * 2)
        .collect();
    });
    expect(problemsOf(() => buildJobGraph(job, buildOptions()))).toEqual([
      expect.stringMatching(/checkpointing is on and edge e-1 \(.+ → .+\) is a blocking exchange: .*use pipelined exchanges/),
    ]);
    const pipelined = defineJob('pipelined', (env) => {
      env.enableCheckpointing(1_000);
      env
        .fromSequence(1, 3)
        .rebalance()
        .map((n) => n * 2)
        .collect();
    });
    expect(buildJobGraph(pipelined, buildOptions()).edges.map((e) => e.partitionType)).toEqual(['pipelined']);
  });
});

describe('uid(…)', () => {
  it('puts each operator’s uid into its operator spec', () => {
    const g = buildJobGraph(checkpointed, buildOptions());
    expect(opsOf(g).map((op) => [op.name, op.uid])).toEqual([
      ['fromSequence', 'numbers'],
      ['count', 'counter'],
      ['map', undefined],
      ['collect', 'result'],
    ]);
    expect(opsOf(g).find((op) => op.name === 'map')).not.toHaveProperty('uid');
  });

  it('refuses a uid that another operator has, naming both operators, when the job is defined', () => {
    const job = defineJob('twice', (env) => {
      const a = env.fromSequence(1, 3).name('left').uid('source');
      env.fromSequence(4, 6).name('right').uid('source').union(a).collect();
    });
    expect(() => buildJobGraph(job, buildOptions())).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(job, buildOptions())).toThrow(/'right'.uid\('source'\): operator 'left' has this uid already/);
    // Renaming an operator's own uid frees the old one.
    const renamed = defineJob('renamed', (env) => {
      env
        .fromSequence(1, 3)
        .uid('a')
        .uid('b')
        .map((n) => n)
        .uid('a')
        .collect();
    });
    expect(opsOf(buildJobGraph(renamed, buildOptions())).map((op) => op.uid)).toEqual(['b', 'a', undefined]);
    expect(() =>
      buildJobGraph(
        defineJob('empty', (env) => env.fromSequence(1, 3).uid('  ').collect()),
        buildOptions(),
      ),
    ).toThrow(/uid\(uid\) needs a non-empty string/);
  });

  it('is checked again in a submitted graph: unique, and never an id the runtime generates', () => {
    const g = buildJobGraph(checkpointed, buildOptions());
    const withUids = (uids: readonly (string | undefined)[]): JobGraph => {
      let n = 0;
      return {
        ...g,
        vertices: g.vertices.map((v) => ({
          ...v,
          operators: v.operators.map((op) => {
            const { uid: _old, ...rest } = op;
            const uid = uids[n++];
            return uid === undefined ? rest : { ...rest, uid };
          }),
        })),
      };
    };
    expect(problemsOf(() => validateJobGraph(withUids(['x', 'x', undefined, undefined])))).toEqual([
      expect.stringMatching(/operators\[0\] \('count'\): uid 'x' is also the uid of vertices\[0\].*each operator's uid must be unique/),
    ]);
    const generated = `${g.vertices[1]!.id}:1`;
    expect(problemsOf(() => validateJobGraph(withUids([generated, undefined, undefined, undefined])))).toEqual([
      expect.stringMatching(new RegExp(`uid '${generated}' is the id an operator without a uid stores its state under`)),
    ]);
    expect(() => parseJobGraph({ ...JSON.parse(JSON.stringify(g)), checkpointing: { intervalMs: 1, mode: 'SOMETIMES' } })).toThrow(
      /checkpointing.intervalMs must be an integer >= 10, found 1.*checkpointing.mode must be one of 'EXACTLY_ONCE', 'AT_LEAST_ONCE', found "SOMETIMES"/s,
    );
  });
});

describe("the cluster's execution.checkpointing.* and state.* options", () => {
  it('fill what the job left unset; the job’s own settings win', () => {
    const config = loadConfig({
      'execution.checkpointing.timeout': 60_000,
      'execution.checkpointing.unaligned.enabled': true,
      'execution.checkpointing.aligned-checkpoint-timeout': 250,
      'state.checkpoints.num-retained': 3,
    });
    expect(resolveCheckpointing(undefined, config)).toBeUndefined();
    const resolved = resolveCheckpointing({ intervalMs: 500, timeoutMs: 5_000 }, config)!;
    expect(resolved).toEqual({
      intervalMs: 500,
      mode: 'EXACTLY_ONCE',
      timeoutMs: 5_000,
      minPauseMs: 0,
      tolerableFailures: 0,
      alignedCheckpointTimeoutMs: 250,
      unaligned: true,
      externalizedRetention: 'DELETE_ON_CANCELLATION',
      maxConcurrent: 1,
      numRetained: 3,
    });
    // Barriers of a checkpoint turn unaligned after 250 ms; a savepoint's never do, nor AT_LEAST_ONCE ones.
    expect(checkpointOptionsOf(resolved)).toEqual({ type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: 250 });
    expect(checkpointOptionsOf(resolved, 'savepoint').alignedCheckpointTimeoutMs).toBe(-1);
    expect(checkpointOptionsOf({ ...resolved, mode: 'AT_LEAST_ONCE' }).alignedCheckpointTimeoutMs).toBe(-1);
    expect(checkpointOptionsOf({ ...resolved, unaligned: false }).alignedCheckpointTimeoutMs).toBe(-1);
    // The cluster's interval turns checkpointing on for every job.
    expect(resolveCheckpointing(undefined, loadConfig({ 'execution.checkpointing.interval': 2_000 }))?.intervalMs).toBe(2_000);
  });

  it('refuses values out of range, and defaults the checkpoints folder to the state dir', () => {
    expect(() => loadConfig({ 'execution.checkpointing.interval': 5, 'state.backend.type': 'rocksdb', 'execution.checkpointing.mode': 'ONCE' })).toThrow(
      ConfigurationError,
    );
    expect(() => loadConfig({ 'execution.checkpointing.interval': 5 })).toThrow(
      /'execution.checkpointing.interval' must be 0 \(off\) or at least 10 ms, found 5/,
    );
    expect(() => loadConfig({ 'state.backend.type': 'rocksdb' })).toThrow(/'state.backend.type' must be one of hashmap, lmdb, found "rocksdb"/);
    const config = loadConfig({ 'state.backend.type': 'lmdb', 'state.backend.incremental': true });
    expect([config.stateBackend, config.stateBackendIncremental, config.checkpointsNumRetained]).toEqual(['lmdb', 'true', 1]);
    expect(checkpointsDirOf(config, '/var/floe')).toBe('/var/floe/checkpoints');
    expect(checkpointsDirOf(loadConfig({ 'state.checkpoints.dir': 'file:///data/chk' }), '/var/floe')).toBe('/data/chk');
    expect(checkpointsDirOf(loadConfig({ 'state.checkpoints.dir': 's3://bucket/_entropy_/chk' }), '/var/floe')).toBe('s3://bucket/_entropy_/chk');
  });
});

describe('the deployment of a checkpointing task', () => {
  it('carries the storage and options once per batch, and each task its own restore', () => {
    const options = { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 } as const;
    const checkpointing = { storageUri: 's3://bucket/chk/job-1', options };
    const tdd = (subtask: number): TaskDeploymentDescriptor => ({
      jobId: JobId.of('job-1'),
      vertexId: 'op-1',
      taskName: `src (${subtask + 1}/2)`,
      attemptId: ExecutionAttemptId.of(`a${subtask}`),
      attemptNumber: 0,
      subtaskIndex: subtask,
      parallelism: 2,
      allocationId: AllocationId.of(`s${subtask}`),
      library: { sha256: 'a'.repeat(64) },
      program: { export: 'default', args: [] },
      operators: [],
      inputs: [],
      outputs: [],
      checkpointing,
      ...(subtask === 1
        ? { restore: { checkpointId: 7, state: { operators: { numbers: { keyed: [], operator: [{ handle: { uri: 'file:///x', size: 3 }, lists: [] }] } } } } }
        : {}),
    });
    const descriptors = [tdd(0), tdd(1)];
    const batch = packTaskDeployments(descriptors);
    expect(batch.checkpointing).toEqual(checkpointing);
    expect(batch.tasks.map((t) => t.restore?.checkpointId)).toEqual([undefined, 7]);
    expect(unpackTaskDeployments(JSON.parse(JSON.stringify(batch)))).toEqual(descriptors);
    expect(() => packTaskDeployments([tdd(0), { ...tdd(1), checkpointing: { storageUri: 'file:///other', options } }])).toThrow(
      /share the job's checkpointing; src \(2\/2\) differs from src \(1\/2\)/,
    );
  });
});
