// Opening a text sink's part file or a text source's split never holds a task forever: a FIFO without a
// peer blocks `open` the way a hung network filesystem does, and the task fails within
// 'execution.file-open.timeout', naming the path.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { IoTimeoutError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import type { OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { runOperatorChain, type TaskIo } from '../../runtime/task/operator-chain.js';
import type { InputSplit, TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { taskDeployment } from '../support/task-deployment.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-open-deadline-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function tdd(operators: OperatorSpec[], extra: Partial<TaskDeploymentDescriptor> = {}): TaskDeploymentDescriptor {
  return taskDeployment(operators, { jobId: JobId.of('job-open'), ...extra });
}

function io(t: TaskDeploymentDescriptor, more: Partial<TaskIo>): TaskIo {
  return { tdd: t, userFunctions: new Map(), signal: new AbortController().signal, outputs: [], input: undefined, requestSplit: async () => null, ...more };
}

function fifo(path: string): string {
  execFileSync('mkfifo', [path]);
  return path;
}

/** Gives a thread blocked opening `path` its peer, so the test leaves no thread of the pool stuck. */
function release(path: string, blockedSide: 'reader' | 'writer'): void {
  const fd = openSync(path, (blockedSide === 'writer' ? constants.O_RDONLY : constants.O_WRONLY) | constants.O_NONBLOCK);
  closeSync(fd);
}

describe('open deadlines in the task runtime', () => {
  it('fails a text sink whose part file does not open within the deadline, naming the staging folder and the target', async () => {
    const staging = join(dir, 'staging');
    mkdirSync(staging);
    const part = fifo(join(staging, 'part-0'));
    const run = runOperatorChain(
      io(
        tdd(
          [
            { kind: 'source.sequence', id: 's', name: 'seq', from: 1, to: 3 },
            { kind: 'sink.textFile', id: 'w', name: 'write', path: '/data/out' },
          ],
          { sinkStagingDir: staging },
        ),
        { fileOpenTimeoutMs: 200 },
      ),
    );
    try {
      await expect(run).rejects.toBeInstanceOf(IoTimeoutError);
      await expect(run).rejects.toThrow(
        `text sink 'write' opening its part file in '${staging}' (for '/data/out') did not complete within 'execution.file-open.timeout' (200 ms)`,
      );
    } finally {
      release(part, 'writer');
    }
  });

  it('fails a text source whose split does not open within the deadline, naming the file', async () => {
    const input = fifo(join(dir, 'input.txt'));
    const splits: InputSplit[] = [{ splitId: `${input}@0`, splitNumber: 0, path: input, start: 0, length: 100 }];
    const run = runOperatorChain(
      io(
        tdd([
          { kind: 'source.textFile', id: 's', name: 'read', path: input, splitSizeBytes: 100 },
          { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 10 },
        ]),
        {
          fileOpenTimeoutMs: 200,
          requestSplit: async () => splits.shift() ?? null,
        },
      ),
    );
    try {
      await expect(run).rejects.toBeInstanceOf(IoTimeoutError);
      await expect(run).rejects.toThrow(`text source opening '${input}' (split 0) did not complete within 'execution.file-open.timeout' (200 ms)`);
    } finally {
      release(input, 'reader');
    }
  });

  it("names the file when a text source's split cannot be read at all", async () => {
    const missing = join(dir, 'gone.txt');
    const splits: InputSplit[] = [{ splitId: `${missing}@0`, splitNumber: 3, path: missing, start: 0, length: 10 }];
    const run = runOperatorChain(
      io(
        tdd([
          { kind: 'source.textFile', id: 's', name: 'read', path: missing, splitSizeBytes: 10 },
          { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 10 },
        ]),
        {
          fileOpenTimeoutMs: 5_000,
          requestSplit: async () => splits.shift() ?? null,
        },
      ),
    );
    await expect(run).rejects.toThrow(`text source cannot read split 3 of '${missing}'`);
    // A file gone after the listing stays gone: the job ends without a restart.
    await expect(run).rejects.toMatchObject({ code: 'INPUT_SOURCE' });
  });
});
