// Opening a sink or a source never hangs a job: a sink under /proc (where a recursive mkdir never
// returns) and a source that cannot be opened fail the job with the path, within the open deadline.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { storeJobLibrary } from '../taskexecutor/harness.js';

const JOB_SOURCE = `
import { defineJob } from 'floe';
export default defineJob('to-proc', (env, args) => {
  env.fromSequence(1, 100).map((n) => 'line ' + n).writeAsText(args[0]);
});
export const fromProc = defineJob('from-proc', (env, args) => {
  env.readTextFile(args[0]).map((l) => l.length).collect();
});
`;

const dir = mkdtempSync(join(tmpdir(), 'floe-open-deadline-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('open deadlines on a MiniCluster', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it('fails a job whose sink lies under /proc, naming the path, instead of running forever', async () => {
    cluster = await MiniCluster.start({ config: { 'execution.file-open.timeout': 500, 'taskmanager.numberOfTaskSlots': 2 } });
    const graph = await storeJobLibrary(join(dir, 'sink'), JOB_SOURCE, cluster.blobStore, JobId.of('proc-sink'), 'default', ['/proc/floe-test/out']);
    const job = await cluster.submit(graph);
    const outcome = await job.outcome;
    expect(outcome.status).toBe('FAILED');
    const record = await cluster.record(job.jobId);
    expect(record.exceptions.map((e) => e.message).join('\n')).toContain('/proc/floe-test');
  }, 30_000);

  it('fails a job whose text source cannot be opened, naming the path', async () => {
    cluster = await MiniCluster.start({ config: { 'execution.file-open.timeout': 500 } });
    const graph = await storeJobLibrary(join(dir, 'source'), JOB_SOURCE, cluster.blobStore, JobId.of('proc-source'), 'fromProc', ['/proc/floe-test/in']);
    const job = await cluster.submit(graph);
    const outcome = await job.outcome;
    expect(outcome.status).toBe('FAILED');
    const record = await cluster.record(job.jobId);
    expect(record.exceptions.map((e) => e.message).join('\n')).toContain("'/proc/floe-test/in'");
  }, 30_000);
});
