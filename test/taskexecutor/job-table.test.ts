import { describe, expect, it } from 'vitest';
import { FencingTokenError, RpcConnectionError, RpcTimeoutError } from '../../runtime/core/errors.js';
import { ExecutionAttemptId, FencingToken, JobId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { TaskExecutionStateUpdate } from '../../runtime/protocol/jobmaster-gateway.js';
import { JobMasterConnection, JobTable } from '../../runtime/taskexecutor/job-table.js';
import { TestingJobMasterGateway } from '../support/testing-job-master-gateway.js';

const job = JobId.of('job-1');

function connection(token: number, updateTaskExecutionState?: (u: TaskExecutionStateUpdate) => Promise<boolean>): JobMasterConnection {
  const builder = TestingJobMasterGateway.builder('jm');
  if (updateTaskExecutionState !== undefined) builder.setUpdateTaskExecutionStateFunction(updateTaskExecutionState);
  return new JobMasterConnection(job, `local://jm-${token}`, FencingToken.of(token), builder.build(), ResourceId.of('jm'), silentLogger);
}

describe('JobTable', () => {
  it('lets calls act only through the connected leader of the job, with its token', () => {
    const table = new JobTable('TaskExecutor te-1');
    table.getOrCreate(job);
    expect(() => table.checkToken(job, FencingToken.of(3))).toThrow(FencingTokenError);
    const c = connection(3);
    table.connect(job, c);
    expect(table.checkToken(job, FencingToken.of(3))).toBe(c);
    expect(() => table.checkToken(job, FencingToken.of(2))).toThrow(
      /TaskExecutor te-1 \(JobMaster connection of job job-1\) rejected a call fenced with token 2: the current leader's token is 3/,
    );
    expect(() => table.checkToken(JobId.of('other'), FencingToken.of(3))).toThrow(FencingTokenError);
  });

  it('refuses a second connection while one is open; a disconnect closes it and keeps the job', () => {
    const table = new JobTable('TaskExecutor te-1');
    const first = connection(1);
    table.connect(job, first);
    expect(() => table.connect(job, connection(2))).toThrow(/still connected to local:\/\/jm-1 \(token 1\)/);
    expect(table.disconnect(job)).toBe(first);
    expect(first.closed).toBe(true);
    expect(table.get(job)).toBeDefined();
    expect(table.connection(job)).toBeUndefined();
    const second = connection(2);
    table.connect(job, second);
    table.remove(job);
    expect(second.closed).toBe(true);
    expect(table.get(job)).toBeUndefined();
  });

  it('retries a terminal task update on retryable errors while open, and gives up on the rest', async () => {
    const attemptId = ExecutionAttemptId.of('a1');
    let calls = 0;
    const flaky = connection(1, async () => {
      if (++calls < 3) throw new RpcTimeoutError('local://jm-1/jobmaster.updateTaskExecutionState', 10);
      return true;
    });
    await flaky.reportTaskState({ attemptId, state: 'FINISHED' });
    expect(calls).toBe(3);

    let running = 0;
    const once = connection(1, async () => {
      running++;
      throw new RpcConnectionError('local://jm-1');
    });
    await once.reportTaskState({ attemptId, state: 'RUNNING' });
    expect(running).toBe(1);

    let closedCalls = 0;
    const closed = connection(1, async () => {
      closedCalls++;
      throw new RpcConnectionError('local://jm-1');
    });
    closed.closed = true;
    await closed.reportTaskState({ attemptId, state: 'FAILED' });
    expect(closedCalls).toBe(1);
  });
});
