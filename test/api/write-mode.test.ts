// writeAsText's write mode and path rules in the job API, and what the client makes of its paths.
import { describe, expect, it } from 'vitest';
import { defineJob } from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { buildJobGraph, type BuildJobGraphOptions } from '../../runtime/api/translate.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';

const options = (args: string[]): BuildJobGraphOptions => ({
  jobId: JobId.of('job-wm'),
  args,
  exportName: 'default',
  library: { sha256: 'a'.repeat(64), sizeBytes: 1 },
  defaultParallelism: 1,
  cwd: '/home/user/project',
});

const copy = defineJob('copy', (env, args) => {
  const writeMode = args[2] as 'overwrite' | 'no-overwrite' | undefined;
  env.readTextFile(args[0]!).writeAsText(args[1]!, writeMode === undefined ? {} : { writeMode });
});

const opsOf = (g: JobGraph): OperatorSpec[] => g.vertices.flatMap((v) => v.operators);
const sinkOf = (g: JobGraph) => opsOf(g).find((op) => op.kind === 'sink.textFile');
const sourceOf = (g: JobGraph) => opsOf(g).find((op) => op.kind === 'source.textFile');

describe('writeAsText', () => {
  it("defaults to 'no-overwrite' and carries 'overwrite' when asked", () => {
    expect(sinkOf(buildJobGraph(copy, options(['in.txt', 'out'])))).toMatchObject({ path: '/home/user/project/out', writeMode: 'no-overwrite' });
    expect(sinkOf(buildJobGraph(copy, options(['in.txt', 'out', 'overwrite'])))).toMatchObject({ writeMode: 'overwrite' });
  });

  it('refuses an unknown write mode, naming it', () => {
    expect(() => buildJobGraph(copy, options(['in.txt', 'out', 'append']))).toThrow(
      /writeAsText\('out', \{ writeMode \}\) needs one of 'no-overwrite', 'overwrite', found "append"/,
    );
  });

  it("resolves relative paths against the client's folder and normalises every path", () => {
    const g = buildJobGraph(copy, options(['./data//in.txt', '../results/']));
    expect(sourceOf(g)).toMatchObject({ path: '/home/user/project/data/in.txt' });
    expect(sinkOf(g)).toMatchObject({ path: '/home/user/results' });
    expect(sinkOf(buildJobGraph(copy, options(['/in.txt', 's3://bucket/out/'])))).toMatchObject({ path: 's3://bucket/out' });
    expect(sinkOf(buildJobGraph(copy, options(['/in.txt', '/data/./out'])))).toMatchObject({ path: '/data/out' });
  });

  it("refuses a path whose '..' leads out of the folder it names", () => {
    for (const path of ['out/../../etc', '/data/out/..', 'results/../../..']) {
      expect(() => buildJobGraph(copy, options(['in.txt', path])), path).toThrow(InvalidJobDefinitionError);
      expect(() => buildJobGraph(copy, options(['in.txt', path])), path).toThrow(`writeAsText('${path}'): the path holds '..' after a folder name`);
    }
  });
});
