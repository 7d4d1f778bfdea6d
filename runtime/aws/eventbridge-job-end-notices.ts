// JobEndNotices on AWS: a PutEvents call to the cluster's event bus (FLOE_EVENT_BUS), whose rule invokes
// the Dispatcher function, which writes the job's metrics (runtime/aws/job-metrics.ts). An entry
// EventBridge did not take is an error for the caller to log.
import { PutEventsCommand, type EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { FloeError } from '../core/errors.js';
import type { JobEndFigures, JobEndNotices } from '../protocol/job-end-notices.js';
import { JOB_ENDED_EVENT } from './job-metrics.js';

export class EventBridgeJobEndNotices implements JobEndNotices {
  constructor(
    private readonly client: EventBridgeClient,
    /** Name or ARN of the cluster's event bus. */
    private readonly eventBus: string,
  ) {}

  async jobEnded(figures: JobEndFigures): Promise<void> {
    const out = await this.client.send(
      new PutEventsCommand({
        Entries: [{ EventBusName: this.eventBus, Source: JOB_ENDED_EVENT.source, DetailType: JOB_ENDED_EVENT.detailType, Detail: JSON.stringify(figures) }],
      }),
    );
    if ((out.FailedEntryCount ?? 0) > 0) {
      const entry = out.Entries?.[0];
      throw new FloeError(
        'EVENT_NOT_PUT',
        `event bus ${this.eventBus} did not take the job-ended event of job ${figures.jobId}: ${entry?.ErrorCode ?? 'no error code'} (${entry?.ErrorMessage ?? 'no message'})`,
        { retryable: true },
      );
    }
  }

  close(): void {
    this.client.destroy();
  }
}
