// Which keyed operators take pre-aggregated input (translation), what the JobMaster hands their producers
// (combinerFor), and what validation accepts.
import { describe, expect, it } from 'vitest';
import { defineJob } from '../../runtime/api/index.js';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import { combinerFor } from '../../runtime/protocol/task-deployment.js';

const build = (job: ReturnType<typeof defineJob>): JobGraph =>
  buildJobGraph(job, {
    jobId: JobId.of('job-pre'),
    args: [],
    exportName: 'default',
    library: { sha256: 'c'.repeat(64), sizeBytes: 1 },
    defaultParallelism: 2,
    cwd: '/w',
  });

const keyedOps = (g: JobGraph): OperatorSpec[] => g.vertices.flatMap((v) => v.operators).filter((o) => o.kind.startsWith('keyed.'));
const count = { createAccumulator: () => 0, add: (_: number, n: number) => n + 1, getResult: (n: number) => n };

const job = defineJob('modes', (env) => {
  const bounded = env.fromSequence(1, 100);
  bounded
    .keyBy((n) => n % 10)
    .sum()
    .collect();
  bounded
    .keyBy((n) => n % 3)
    .reduce((a, b) => Math.max(a, b))
    .writeAsText('/max');
  bounded
    .keyBy((n) => n % 2)
    .aggregate({ ...count, merge: (a: number, b: number) => a + b })
    .writeAsText('/merged');
  bounded
    .keyBy((n) => n % 2)
    .aggregate(count)
    .writeAsText('/unmerged');
  env
    .generate((i) => i)
    .keyBy((n) => n % 4)
    .sum()
    .writeAsText('/running');
});

describe('pre-aggregation in the JobGraph', () => {
  it('marks bounded sum, reduce and aggregate-with-merge; never an aggregate without merge or running updates', () => {
    const g = build(job);
    expect(keyedOps(g).map((o) => `${o.kind} ${'emit' in o ? o.emit : ''} ${'preAggregate' in o && o.preAggregate === true ? 'pre' : '-'}`)).toEqual([
      'keyed.sum final pre',
      'keyed.reduce final pre',
      'keyed.aggregate final pre',
      'keyed.aggregate final -',
      'keyed.sum updates -',
    ]);
    const merged = keyedOps(g)[2]!;
    expect(merged).toMatchObject({ merge: { export: 'default', operatorId: merged.id, role: 'merge' } });
    expect(parseJobGraph(JSON.parse(JSON.stringify(g)))).toEqual(g);
    // The producer resolves the merge function by its role, like the operator's others.
    expect(resolveUserFunctions({ default: job }, { export: 'default', args: [] }).has(`${merged.id}.merge`)).toBe(true);
  });

  it('hands the keyed operator to the producers of its hash edges only when it takes pre-aggregated input', () => {
    const g = build(job);
    const targets = g.edges.map((e) => g.vertices.find((v) => v.id === e.target)!);
    expect(targets.map((t) => combinerFor(t).combiner?.kind ?? 'none')).toEqual(['keyed.sum', 'keyed.reduce', 'keyed.aggregate', 'none', 'none']);
    expect(combinerFor({ operators: [{ kind: 'map', id: 'm', name: 'm', fn: { export: 'default', operatorId: 'm' } }] })).toEqual({});
  });

  it('rejects preAggregate on running updates, on an aggregate without merge, and a non-boolean flag', () => {
    const g = build(job);
    const withOp = (i: number, change: (op: Record<string, unknown>) => void): JobGraph => {
      const copy = JSON.parse(JSON.stringify(g)) as { vertices: { operators: Record<string, unknown>[] }[] };
      const keyed = copy.vertices.flatMap((v) => v.operators).filter((o) => String(o['kind']).startsWith('keyed.'));
      change(keyed[i]!);
      return copy as unknown as JobGraph;
    };
    expect(() => validateJobGraph(withOp(4, (op) => (op['preAggregate'] = true)))).toThrow(
      /preAggregate needs emit 'final' \(bounded input\), found emit 'updates'/,
    );
    expect(() => validateJobGraph(withOp(3, (op) => (op['preAggregate'] = true)))).toThrow(/preAggregate on an aggregate needs its merge function, found none/);
    expect(() => parseJobGraph(withOp(0, (op) => (op['preAggregate'] = 'yes')))).toThrow(/preAggregate must be true or false, found "yes"/);
  });
});
