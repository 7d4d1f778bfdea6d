// The JobMaster's commit of text sinks on a MiniCluster: a FINISHED job leaves its output and a manifest
// and no staging; a target that became unsafe after submission fails the job, naming it and where the
// output waits, and nothing of the user's is touched; a failed job leaves the target as it was.
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { localStagingDir } from '../../runtime/local/fs-output-store.js';
import { waitFor } from '../support/cluster-processes.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { storeJobLibrary } from '../taskexecutor/harness.js';

const JOB_SOURCE = `
import { existsSync } from 'node:fs';
import { defineJob } from 'floe';
export default defineJob('numbers', (env, args) => {
  env.setParallelism(2);
  env.fromSequence(1, 40).map((n) => 'n' + n).writeAsText(args[0], { writeMode: args[1] });
});
export const gated = defineJob('gated', (env, args) => {
  env.setParallelism(2);
  env.fromSequence(1, 40).map((n) => {
    // The subtask holding 40 waits for the gate file, so the other one finishes first.
    const nap = new Int32Array(new SharedArrayBuffer(4));
    while (n === 40 && !existsSync(args[1])) Atomics.wait(nap, 0, 0, 20);
    return 'n' + n;
  }).writeAsText(args[0]);
});
export const failing = defineJob('failing', (env, args) => {
  env.setParallelism(2);
  env.fromSequence(1, 40).map((n) => { if (n === 33) throw new Error('boom at 33'); return n; }).writeAsText(args[0]);
});
`;

const dir = mkdtempSync(join(tmpdir(), 'floe-sink-commit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

describe('text sink commits on a MiniCluster', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  async function run(exportName: string, args: string[]) {
    cluster ??= await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 2 } });
    const graph = await storeJobLibrary(join(dir, `lib-${n++}`), JOB_SOURCE, cluster.blobStore, JobId.of(`job-${n}`), exportName, args);
    const job = await cluster.submit(graph);
    const outcome = await job.outcome;
    return { outcome, record: await cluster.record(job.jobId), jobId: job.jobId };
  }

  it('commits every part and a manifest, and leaves no staging', async () => {
    const out = join(dir, 'fresh');
    const { outcome, record, jobId } = await run('default', [out, 'no-overwrite']);
    expect(outcome.status, JSON.stringify(record.exceptions)).toBe('FINISHED');
    expect(readdirSync(out).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1']);
    const lines = ['part-0', 'part-1'].flatMap((p) => readFileSync(join(out, p), 'utf8').split('\n').filter(Boolean));
    expect(lines.sort()).toEqual(Array.from({ length: 40 }, (_, i) => `n${i + 1}`).sort());
    expect(JSON.parse(readFileSync(join(out, '_SUCCESS'), 'utf8'))).toMatchObject({ committer: 'floe', jobId, files: ['part-0', 'part-1'] });
    expect(existsSync(localStagingDir(out, jobId))).toBe(false);
  });

  it('fails the job when its target holds unrelated files at commit time, naming the target and where the output waits; the files stay', async () => {
    const out = join(dir, 'taken');
    // The submission check ran on an empty target; the user's file arrived before the commit.
    mkdirSync(out);
    writeFileSync(join(out, 'draft.txt'), 'not to be lost\n');
    const { outcome, record, jobId } = await run('default', [out, 'overwrite']);
    expect(outcome.status).toBe('FAILED');
    const assembled = join(localStagingDir(out, jobId), '_committed');
    const message = record.exceptions.map((e) => e.message).join('\n');
    expect(message).toContain(`'${out}' holds 1 entry Floe did not write ('draft.txt')`);
    expect(message).toContain(`complete in '${assembled}'`);
    expect(readdirSync(out)).toEqual(['draft.txt']);
    expect(readFileSync(join(out, 'draft.txt'), 'utf8')).toBe('not to be lost\n');
    expect(readdirSync(assembled).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1']);
  });

  it('fails the job when a part is written over after its task finished: nothing is published, the error names the part', async () => {
    const out = join(dir, 'changed');
    const gate = join(dir, 'changed-gate');
    cluster ??= await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 2 } });
    const graph = await storeJobLibrary(join(dir, `lib-${n++}`), JOB_SOURCE, cluster.blobStore, JobId.of(`job-${n}`), 'gated', [out, gate]);
    const job = await cluster.submit(graph);
    try {
      // One subtask FINISHED (its part reported); the other waits at the gate, so the job is still running.
      const finished = await waitFor(
        async () => {
          const record = await cluster!.record(job.jobId);
          const done = record.vertices?.[0]?.subtasks?.find((st) => st.state === 'FINISHED');
          return done !== undefined && record.status === 'RUNNING' ? done : undefined;
        },
        'one subtask to finish while the other waits',
        30_000,
        50,
      );
      const staging = localStagingDir(out, job.jobId);
      const attempt = readdirSync(staging).find((a) => existsSync(join(staging, a, `part-${finished.index}`)))!;
      appendFileSync(join(staging, attempt, `part-${finished.index}`), 'n999 (written after the task finished)\n');
    } finally {
      writeFileSync(gate, '');
    }
    const outcome = await job.outcome;
    const record = await cluster.record(job.jobId);
    expect(outcome.status).toBe('FAILED');
    const message = record.exceptions.map((e) => e.message).join('\n');
    expect(message).toMatch(
      /committing the job's output failed: .*the part file of subtask \d \(attempt [^)]+\) at '[^']+' was changed after its task finished: its task reported \d+ bytes, found \d+ bytes\. Nothing of this job's output is published/,
    );
    expect(existsSync(out)).toBe(false);
  });

  it('leaves the target as it was and removes the staging when a task fails', async () => {
    const out = join(dir, 'failed');
    const { outcome, record, jobId } = await run('failing', [out]);
    expect(outcome.status).toBe('FAILED');
    expect(record.exceptions.map((e) => e.message).join('\n')).toContain('boom at 33');
    expect(existsSync(out)).toBe(false);
    expect(existsSync(localStagingDir(out, jobId))).toBe(false);
  });
});
