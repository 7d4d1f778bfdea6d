// FileSink, DefaultRollingPolicy and sinkTo in the job API: a sink on an unbounded stream rolls part
// files (writeAsText with Flink's default policy), a sink on a bounded one is committed at the end, and
// what each builder refuses.
import { describe, expect, it } from 'vitest';
import { DefaultRollingPolicy, defineJob, FileSink, SimpleStringEncoder } from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import { buildJobGraph, type BuildJobGraphOptions } from '../../runtime/api/translate.js';
import { JobId } from '../../runtime/core/ids.js';
import { DEFAULT_ROLLING_POLICY, functionKey, type JobGraph } from '../../runtime/jobgraph/jobgraph.js';

const options = (args: string[] = []): BuildJobGraphOptions => ({
  jobId: JobId.of('job-fs'),
  args,
  exportName: 'default',
  library: { sha256: 'a'.repeat(64), sizeBytes: 1 },
  defaultParallelism: 1,
  cwd: '/home/user/project',
});

const sinkOf = (g: JobGraph) => g.vertices.flatMap((v) => v.operators).find((op) => op.kind === 'sink.textFile');

describe('file sinks on unbounded and bounded streams', () => {
  it("writeAsText on an unbounded stream rolls parts with Flink's default policy; on a bounded one it is committed at the end", () => {
    const unbounded = defineJob('u', (env) => env.generate((i: number) => `r${i}`).writeAsText('out'));
    expect(sinkOf(buildJobGraph(unbounded, options()))).toMatchObject({ path: '/home/user/project/out', rolling: DEFAULT_ROLLING_POLICY });
    expect(DEFAULT_ROLLING_POLICY).toEqual({
      rolloverIntervalMs: 60_000,
      inactivityIntervalMs: 60_000,
      maxPartSizeBytes: 128 * 1024 * 1024,
      checkIntervalMs: 60_000,
    });
    const bounded = defineJob('b', (env) => env.generate((i: number) => `r${i}`, { count: 10 }).writeAsText('out'));
    expect(sinkOf(buildJobGraph(bounded, options()))).not.toHaveProperty('rolling');
  });

  it('sinkTo(FileSink.forRowFormat(…).withRollingPolicy(…)) carries the policy, the check interval and the encoder', () => {
    const job = defineJob('fs', (env) =>
      env
        .generate((i: number) => ({ i }))
        .sinkTo(
          FileSink.forRowFormat('s3://bucket/out', { encode: (e: { i: number }) => `#${e.i}` })
            .withRollingPolicy(DefaultRollingPolicy.builder().withRolloverInterval(5000).withInactivityInterval(2000).withMaxPartSize(1024).build())
            .withBucketCheckInterval(250)
            .build(),
        ),
    );
    const g = buildJobGraph(job, options());
    const sink = sinkOf(g)!;
    expect(sink).toMatchObject({
      name: 'FileSink',
      path: 's3://bucket/out',
      writeMode: 'no-overwrite',
      rolling: { rolloverIntervalMs: 5000, inactivityIntervalMs: 2000, maxPartSizeBytes: 1024, checkIntervalMs: 250 },
      encoder: { export: 'default', operatorId: sink.id, role: 'encoder' },
    });
    // A task finds the encoder by its reference and gets the line it makes.
    const encoder = resolveUserFunctions({ default: job }, g.program).get(functionKey({ operatorId: sink.id, role: 'encoder' }))!;
    expect(encoder({ i: 7 })).toBe('#7');
  });

  it('takes SimpleStringEncoder as the default line (no user function to carry)', () => {
    const job = defineJob('fs', (env) => env.generate((i: number) => i).sinkTo(FileSink.forRowFormat('out', new SimpleStringEncoder<number>()).build()));
    expect(sinkOf(buildJobGraph(job, options()))).not.toHaveProperty('encoder');
    expect(new SimpleStringEncoder<unknown>().encode({ a: 1 })).toBe('{"a":1}');
  });

  it("refuses writeMode 'overwrite' on an unbounded stream, saying why", () => {
    const job = defineJob('o', (env) => env.generate((i: number) => i).writeAsText('out', { writeMode: 'overwrite' }));
    expect(() => buildJobGraph(job, options())).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(job, options())).toThrow(/input is unbounded: a streaming file sink adds part files .* never replaces an earlier output/);
  });

  it('refuses a policy of durations or sizes that are not integers >= 1, naming the call', () => {
    expect(() => DefaultRollingPolicy.builder().withRolloverInterval(0)).toThrow(
      'DefaultRollingPolicy.builder().withRolloverInterval(ms) needs the interval as an integer number of milliseconds >= 1, found 0',
    );
    expect(() => DefaultRollingPolicy.builder().withMaxPartSize(1.5)).toThrow(
      /withMaxPartSize\(bytes\) needs the size as an integer number of bytes >= 1, found 1.5/,
    );
    expect(() => FileSink.forRowFormat('out').withBucketCheckInterval(-1)).toThrow(/withBucketCheckInterval/);
    expect(() => FileSink.forRowFormat('out', {} as never)).toThrow(/needs an Encoder/);
  });
});
