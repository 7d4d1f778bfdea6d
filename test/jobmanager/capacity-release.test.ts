// What a ready JobManager says when giving an ended job's capacity back fails: an error when only a fix
// helps (AWS denies the call), a warning when the reconciler will do it anyway.
import { describe, expect, it } from 'vitest';
import { AwsRequestError } from '../../runtime/aws/aws-errors.js';
import { JobId } from '../../runtime/core/ids.js';
import { capacityReleaseFailure } from '../../runtime/jobmanager/job-end-announcements.js';

const jobId = JobId.random();
/** An SDK error as DynamoDB answers a role without the permission. */
const sdkError = (name: string, message: string): Error => Object.assign(new Error(message), { name });

describe('a failed capacity release', () => {
  it('is an error naming the denied permission and what to do when AWS denies the transaction', () => {
    const denied = new AwsRequestError(
      'DynamoDB',
      'TransactWriteItems (release)',
      'table floe-jobs',
      sdkError(
        'AccessDeniedException',
        'User: arn:aws:sts::123456789012:assumed-role/JobManagerRole/task is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:123456789012:table/floe-jobs',
      ),
    );
    const told = capacityReleaseFailure(jobId, denied);
    expect(told.level).toBe('error');
    expect(told.message).toContain(`cannot give back the capacity of job ${jobId}, and trying again will not help`);
    expect(told.message).toContain('is not authorized to perform: dynamodb:PutItem');
    expect(told.message).toMatch(/JobManager task role needs .*PutItem on the job table.*redeploy$/);
  });

  it('is a warning left to the reconciler when the failure passes', () => {
    const throttled = new AwsRequestError(
      'DynamoDB',
      'TransactWriteItems (release)',
      'table floe-jobs',
      sdkError('ProvisionedThroughputExceededException', 'Rate of requests exceeds the allowed throughput.'),
    );
    expect(throttled.retryable).toBe(true);
    expect(capacityReleaseFailure(jobId, throttled)).toEqual({
      level: 'warn',
      message: `cannot give back the capacity of job ${jobId} now; the Dispatcher's reconciler will`,
    });
  });
});
