// The CompletedCheckpointStore and CheckpointIDCounter contracts on DynamoDB (DynamoDB Local, or
// FLOE_TEST_AWS_ENDPOINT): the checkpoints and the checkpoint id counters in the jobs table, checkpoint
// writes fenced by the JobMaster lease in the leases table.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { createDynamoDbClients, type DynamoDbClients } from '../../runtime/aws/clients.js';
import { DynamoDbCheckpointIdCounter } from '../../runtime/aws/dynamodb-checkpoint-id-counter.js';
import { DynamoDbCompletedCheckpointStore } from '../../runtime/aws/dynamodb-completed-checkpoint-store.js';
import { DynamoDbLeaseStore } from '../../runtime/aws/dynamodb-lease-store.js';
import { describeCheckpointIdCounterContract } from '../contracts/checkpoint-id-counter.contract.js';
import { completedCheckpoint, describeCompletedCheckpointStoreContract } from '../contracts/completed-checkpoint-store.contract.js';
import { createTables, startEmulators, type Emulators, type TestTables } from './emulators.js';

let emulators: Emulators;
let tables: TestTables;
let clients: DynamoDbClients;

beforeAll(async () => {
  emulators = await startEmulators({ s3: false });
  tables = await createTables(emulators);
  clients = createDynamoDbClients(emulators.awsConfig('dynamodb'));
});
afterAll(async () => {
  clients?.destroy();
  await emulators?.stop();
});

describeCompletedCheckpointStoreContract('DynamoDbCompletedCheckpointStore with DynamoDbLeaseStore', async (clock) => {
  const open = () =>
    new DynamoDbCompletedCheckpointStore({ documentClient: clients.documentClient, tableName: tables.jobTable, leaseTableName: tables.leaseTable });
  return {
    store: open(),
    leases: new DynamoDbLeaseStore({ documentClient: clients.documentClient, tableName: tables.leaseTable, clock, maxClockSkewMs: 0 }),
    reopen: async () => open(),
  };
});
describeCheckpointIdCounterContract('DynamoDbCheckpointIdCounter', async () => {
  const open = () => new DynamoDbCheckpointIdCounter({ documentClient: clients.documentClient, tableName: tables.jobTable });
  return { counter: open(), reopen: async () => open() };
});

it('without a leases table, two handles writing the same checkpoint at once both end with it written once', async () => {
  const open = () => new DynamoDbCompletedCheckpointStore({ documentClient: clients.documentClient, tableName: tables.jobTable });
  const [a, b] = [open(), open()];
  const id = JobId.of(`unleased-${Date.now().toString(36)}`);
  await a.addCheckpointAndSubsumeOldest(completedCheckpoint(id, 1), 1, 3);
  for (let round = 2; round <= 6; round++) {
    const both = await Promise.all([a, b].map((s) => s.addCheckpointAndSubsumeOldest(completedCheckpoint(id, round), 1, 3)));
    expect(both.map((subsumed) => subsumed.map((c) => c.checkpointId))).toContainEqual(round > 3 ? [round - 3] : []);
  }
  expect((await a.getAll(id)).map((c) => c.checkpointId)).toEqual([4, 5, 6]);
  await a.close();
  await b.close();
});
