// The continuous file source with real processes: a job reading a monitored folder (JobManager and
// TaskExecutors as child processes) reads each file once, the files there at the start and those that
// arrive while it runs (written under a hidden name, then renamed), in splits shared by two subtasks;
// the output is checked in the streaming file sink's parts while the job runs, then the job is cancelled.
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('continuous-source', { 'taskmanager.numberOfTaskSlots': 2 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** The lines of file `name`: enough to make several splits of 64 bytes. */
const linesOf = (name: string): string[] => Array.from({ length: 12 }, (_, i) => `${name}-line-${i}`);

/** Every line in the sink's visible parts, in no particular order. */
function sinkLines(target: string): string[] {
  let names: string[];
  try {
    names = readdirSync(target).filter((f) => !f.startsWith('.'));
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return [];
    throw error;
  }
  return names.flatMap((n) =>
    readFileSync(join(target, n), 'utf8')
      .split('\n')
      .filter((l) => l !== ''),
  );
}

/** Writes a file as a writer should: under a hidden name, renamed once complete. */
function drop(folder: string, name: string): void {
  writeFileSync(join(folder, `.${name}.inprogress`), linesOf(name).join('\n') + '\n');
  renameSync(join(folder, `.${name}.inprogress`), join(folder, name));
}

describe('readTextFile with monitorContinuously', () => {
  it('reads every file of a folder once, those there at the start and those that arrive while the job runs', async () => {
    const input = join(cluster.work, 'incoming');
    const target = join(cluster.work, 'monitored-out');
    mkdirSync(input);
    const files: string[] = [];
    const expected = (): string[] => files.flatMap((f) => linesOf(f).map((l) => l.toUpperCase())).sort();
    const arrived = async (what: string): Promise<void> => {
      await waitFor(() => sinkLines(target).length >= expected().length, what, 60_000);
      expect(sinkLines(target).sort()).toEqual(expected());
    };

    for (const name of ['a.txt', 'b.txt']) {
      drop(input, name);
      files.push(name);
    }
    // A file still being written keeps its hidden name: never read.
    writeFileSync(join(input, '.c.txt.inprogress'), 'HALF A LINE');
    const jobId = await cluster.submit('monitored-folder.ts', 'default', [input, target, '100', '64'], 2);
    await arrived('the lines of the files there at the start');

    for (let round = 0; round < 3; round++) {
      for (const name of [`r${round}-x.txt`, `r${round}-y.txt`]) {
        drop(input, name);
        files.push(name);
      }
      await arrived(`the lines of round ${round}'s files`);
    }
    // A last file arrives after many listings saw the others: when its lines are out, no earlier file was read twice.
    drop(input, 'last.txt');
    files.push('last.txt');
    await arrived('the last file');
    expect((await cluster.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');

    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    expect(sinkLines(target).sort()).toEqual(expected());
    await cluster.noProcessLeft();
  });
});
