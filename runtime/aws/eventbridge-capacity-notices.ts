// CapacityNotices on AWS: a PutEvents call to the cluster's event bus (FLOE_EVENT_BUS), whose rule
// invokes the Dispatcher function with the event (functions/ecs-task-events.ts), which runs admission.
// An entry EventBridge did not take is an error, not a silent loss: the caller logs it, and the
// Dispatcher's sweep admits the waiting jobs later.
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { FloeError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import type { CapacityNotices } from '../protocol/capacity-notices.js';
import { CAPACITY_FREED_EVENT, type CapacityFreedDetail } from './capacity-events.js';
import { baseClientOptions, withCallLog, type AwsConfig } from './clients.js';

export function createEventBridgeClient(config: AwsConfig): EventBridgeClient {
  return withCallLog(new EventBridgeClient(baseClientOptions(config)), config);
}

export class EventBridgeCapacityNotices implements CapacityNotices {
  constructor(
    private readonly client: EventBridgeClient,
    /** Name or ARN of the cluster's event bus. */
    private readonly eventBus: string,
  ) {}

  async capacityFreed(jobId: JobId): Promise<void> {
    const detail: CapacityFreedDetail = { jobId };
    const out = await this.client.send(
      new PutEventsCommand({
        Entries: [
          { EventBusName: this.eventBus, Source: CAPACITY_FREED_EVENT.source, DetailType: CAPACITY_FREED_EVENT.detailType, Detail: JSON.stringify(detail) },
        ],
      }),
    );
    if ((out.FailedEntryCount ?? 0) > 0) {
      const entry = out.Entries?.[0];
      throw new FloeError(
        'EVENT_NOT_PUT',
        `event bus ${this.eventBus} did not take the capacity-freed event of job ${jobId}: ${entry?.ErrorCode ?? 'no error code'} (${entry?.ErrorMessage ?? 'no message'})`,
        {
          retryable: true,
        },
      );
    }
  }

  close(): void {
    this.client.destroy();
  }
}
