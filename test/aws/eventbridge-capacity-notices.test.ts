// The capacity-freed notice of a ready JobManager on AWS, against the EventBridge emulator: one event on
// the cluster's bus, with the source and detail type the stack's rule matches; an entry the bus refuses
// is an error naming EventBridge's reason, never a silent loss.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPACITY_FREED_EVENT } from '../../runtime/aws/capacity-events.js';
import { createEventBridgeClient, EventBridgeCapacityNotices } from '../../runtime/aws/eventbridge-capacity-notices.js';
import { JobId } from '../../runtime/core/ids.js';
import { EventBridgeEmulator, type DeliveredEvent } from './eventbridge-emulator.js';

const BUS = 'floe-test-events';
const credentials = { accessKeyId: 'AKIAFLOETEST0000000', secretAccessKey: 'floe-test-secret' };
let events: EventBridgeEmulator;

beforeAll(async () => {
  events = await EventBridgeEmulator.start({ buses: [BUS] });
});

afterAll(async () => {
  await events.close();
});

const notices = (bus: string) => new EventBridgeCapacityNotices(createEventBridgeClient({ region: 'us-east-1', endpoint: events.endpoint, credentials }), bus);

describe('capacity-freed notices on EventBridge', () => {
  it("puts one event on the cluster's bus that the rule's pattern matches, naming the job", async () => {
    const delivered: DeliveredEvent[] = [];
    events.onEvent((e) => delivered.push(e));
    const n = notices(BUS);
    try {
      await n.capacityFreed(JobId.of('job-1'));
    } finally {
      n.close();
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(delivered).toEqual([
      expect.objectContaining({ bus: BUS, source: CAPACITY_FREED_EVENT.source, 'detail-type': CAPACITY_FREED_EVENT.detailType, detail: { jobId: 'job-1' } }),
    ]);
  });

  it('fails, naming the reason, when the bus does not take the event', async () => {
    const before = events.events.length;
    const n = notices('no-such-bus');
    try {
      await expect(n.capacityFreed(JobId.of('job-2'))).rejects.toThrow(
        'event bus no-such-bus did not take the capacity-freed event of job job-2: ResourceNotFoundException (Event bus no-such-bus does not exist.)',
      );
    } finally {
      n.close();
    }
    expect(events.events).toHaveLength(before);
  });
});
