// Object reuse at a chain's branches through a whole cluster (slot workers in child processes): one branch's
// map changes its record in place, and its sibling branch still sees every record as the source made it,
// as Flink's default (object reuse off) promises; a job that enables object reuse says so in its JobGraph
// and in each task's descriptor.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { AllocationId, ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { packTaskDeployments, unpackTaskDeployments, type TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { slotWorkerBundle, storeJobLibrary } from '../taskexecutor/harness.js';

const COUNT = 300;

const JOB_SOURCE = `
import { defineJob } from 'floe';
const COUNT = ${COUNT};
// The source's records branch: the first branch marks each record in place, the second passes it on.
const branches = (env) => {
  env.setParallelism(2);
  const events = env.generate((i) => ({ id: i, tag: 'made', nested: { ids: [i] } }), { count: COUNT });
  const changed = events.map((e) => { e.tag = 'changed'; e.nested.ids.push(-1); return e; });
  const kept = events.map((e) => ({ ...e, branch: 'kept' }));
  changed.union(kept).collect({ maxRecords: 100000 });
};
export const copies = defineJob('branch-copies', (env) => branches(env));
export const reuse = defineJob('branch-reuse', (env) => {
  env.getConfig().enableObjectReuse();
  branches(env);
});
`;

const libraryDir = mkdtempSync(join(tmpdir(), 'floe-object-reuse-lib-'));
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

const sorted = (xs: unknown[]): unknown[] => [...xs].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe('records at the branches of a chain', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it('without object reuse, a branch that changes its record in place changes nothing its sibling branch sees', async () => {
    const graph = await graphOf('copies');
    // The source and both maps run in one chain that branches after the source.
    expect(graph.vertices[0]!.chainInputs).toEqual([-1, 0, 0]);
    expect(graph.objectReuse).toBeUndefined();
    cluster = await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 4 } });
    await cluster.blobStore.put(blobKeys.library(graph.library.sha256), code);
    const job = await cluster.submit(graph);
    const outcome = await job.outcome;
    const rec = await cluster.record(job.jobId);
    expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
    const result = await cluster.result(rec);
    const ids = Array.from({ length: COUNT }, (_, i) => i);
    const expected = [
      ...ids.map((i) => ({ id: i, tag: 'changed', nested: { ids: [i, -1] } })),
      ...ids.map((i) => ({ id: i, tag: 'made', nested: { ids: [i] }, branch: 'kept' })),
    ];
    expect(sorted(result.records)).toEqual(sorted(expected));
  });

  it('a job that enables object reuse carries it in its JobGraph', async () => {
    const graph = await graphOf('reuse');
    expect(graph.vertices[0]!.chainInputs).toEqual([-1, 0, 0]);
    expect(graph.objectReuse).toBe(true);
    expect(parseJobGraph(JSON.parse(JSON.stringify(graph))).objectReuse).toBe(true);
    expect(() => parseJobGraph({ ...JSON.parse(JSON.stringify(graph)), objectReuse: 'yes' })).toThrow(/objectReuse must be true or false, found "yes"/);
  });

  it("a task's descriptor carries the job's object reuse through a deployment batch", () => {
    const tdd = (subtask: number, objectReuse: boolean): TaskDeploymentDescriptor => ({
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
      ...(objectReuse ? { objectReuse: true } : {}),
    });
    const descriptors = [tdd(0, true), tdd(1, true)];
    expect(unpackTaskDeployments(JSON.parse(JSON.stringify(packTaskDeployments(descriptors))))).toEqual(descriptors);
    const plain = [tdd(0, false), tdd(1, false)];
    expect(unpackTaskDeployments(packTaskDeployments(plain))).toEqual(plain);
    expect(() => packTaskDeployments([tdd(0, true), tdd(1, false)])).toThrow(/share the job's objectReuse; src \(2\/2\) differs from src \(1\/2\)/);
  });
});
