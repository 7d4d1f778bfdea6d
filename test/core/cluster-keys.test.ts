import { describe, expect, it } from 'vitest';
import { sameBytes, taskExecutorBearer, taskExecutorKey, verifyBearer } from '../../runtime/core/cluster-keys.js';

describe('verifyBearer, the one check of a cluster credential', () => {
  const secret = 'the-cluster-secret';
  const own = { resourceId: 'te-1', jobId: 'job-a', key: taskExecutorKey(secret, 'job-a', 'te-1') };

  it('takes the secret as the cluster, and a TaskExecutor bearer whose key the secret derives as that TaskExecutor', () => {
    expect(verifyBearer(secret, { secret })).toEqual({ kind: 'cluster' });
    expect(verifyBearer(taskExecutorBearer(own), { secret })).toEqual({ kind: 'taskexecutor', resourceId: 'te-1', jobId: 'job-a' });
  });

  it('refuses another secret, a key for another job or TaskExecutor, and malformed bearers', () => {
    expect(verifyBearer('wrong', { secret })).toBeUndefined();
    expect(verifyBearer(taskExecutorBearer({ ...own, jobId: 'job-b' }), { secret })).toBeUndefined();
    expect(verifyBearer(taskExecutorBearer({ ...own, resourceId: 'te-2' }), { secret })).toBeUndefined();
    for (const token of ['', 'te.', 'te.a.b', `te.${taskExecutorBearer(own).slice(3)}.extra`]) expect(verifyBearer(token, { secret }), token).toBeUndefined();
  });

  it("lets a TaskExecutor accept only its own bearer, as the cluster's", () => {
    const ownBearer = taskExecutorBearer(own);
    expect(verifyBearer(ownBearer, { ownBearer })).toEqual({ kind: 'cluster' });
    expect(verifyBearer(secret, { ownBearer })).toBeUndefined();
    expect(verifyBearer(taskExecutorBearer({ ...own, resourceId: 'te-2', key: taskExecutorKey(secret, 'job-a', 'te-2') }), { ownBearer })).toBeUndefined();
  });

  it('compares proofs in constant time and refuses any of the wrong length', () => {
    const a = Buffer.alloc(32, 1);
    expect(sameBytes(a, Buffer.alloc(32, 1), 32)).toBe(true);
    expect(sameBytes(a, Buffer.alloc(32, 2), 32)).toBe(false);
    expect(sameBytes(a.subarray(0, 31), Buffer.alloc(31, 1), 32)).toBe(false);
  });
});
