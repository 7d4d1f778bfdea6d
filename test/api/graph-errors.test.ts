// A job the API refuses says so in the words of the job file: its operators by the names and methods
// the user wrote, never the ids the translation gives vertices and edges (op-3, e-1).
import { describe, expect, it } from 'vitest';
import { defineJob, type JobDefinition } from '../../runtime/api/index.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { InvalidJobGraphError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';

const build = (job: JobDefinition) =>
  buildJobGraph(job, {
    jobId: JobId.of('job-e'),
    args: [],
    exportName: 'default',
    library: { sha256: 'c'.repeat(64), sizeBytes: 1 },
    defaultParallelism: 2,
    cwd: '/w',
  });

function refusal(job: JobDefinition): string {
  try {
    build(job);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidJobGraphError);
    const message = (e as Error).message;
    expect(message).not.toMatch(/\b(op|e)-\d+\b/);
    return message;
  }
  throw new Error(`job '${job.name}' was accepted`);
}

describe('errors about a job graph built by the API', () => {
  it('name each collect sink of a job that has two', () => {
    const message = refusal(
      defineJob('two-collects', (env) => {
        const s = env
          .fromSequence(1, 10)
          .map((n) => n + 1)
          .name('inc');
        s.collect().name('left');
        s.filter((n) => n > 2)
          .name('big')
          .collect()
          .name('right');
      }),
    );
    expect(message).toMatch(/2 collect sinks \('left', 'right'\), at most one is allowed .*union the streams first/);
  });

  it('name both sinks that write to one path', () => {
    const message = refusal(
      defineJob('same-path', (env) => {
        const s = env.fromSequence(1, 10);
        s.writeAsText('/w/out').name('first');
        s.map((n) => -n)
          .writeAsText('out')
          .name('second');
      }),
    );
    expect(message).toMatch(/\('second'\): writes to '\/w\/out' like .*\('first'\); give each sink its own path/);
  });

  it('accept a stream unioned with itself as one edge per occurrence, and name vertices in a bad edge', () => {
    const g = build(
      defineJob('self-union', (env) => {
        const s = env.fromSequence(1, 10).name('numbers');
        s.union(s, s).collect().name('out');
      }),
    );
    const names = new Map(g.vertices.map((v) => [v.id, v.name]));
    expect(g.edges.map((e) => `${names.get(e.source)} -> ${names.get(e.target)}`)).toEqual(['numbers -> out', 'numbers -> out', 'numbers -> out']);
  });
});
