// Benchmark: the DynamoDB job store's one-time pass after an upgrade, on DynamoDB Local (or
// FLOE_TEST_AWS_ENDPOINT). A table holds BENCH_RECORDS records as an older Floe stored them (no
// `activeKey`, no ended-job counts): BENCH_ACTIVE running jobs, the rest ended. A Dispatcher's store then
// calls listActive as each reconcile does until the pass is done. Prints, per call, its duration and
// DynamoDB requests; the calls until every active job is listed; and checks that the counts match the
// records exactly. Target: no call takes more than a tenth of the Dispatcher function's timeout.
// Run: node runtime/build.mjs && node dist/bench/upgrade-pass.js   (figures also go to bench/out/upgrade-pass.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BatchWriteCommand, GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createDynamoDbClients } from '../runtime/aws/clients.js';
import { DynamoDbJobStore } from '../runtime/aws/dynamodb-job-store.js';
import { packageRoot } from '../runtime/core/paths.js';
import { AdmissionState } from '../runtime/ha/job-store.js';
import { JobStatus } from '../runtime/jobgraph/job-status.js';
import { createTables, startEmulators } from '../test/aws/emulators.js';

const RECORDS = Number(process.env['BENCH_RECORDS'] ?? 10_000);
const ACTIVE = Number(process.env['BENCH_ACTIVE'] ?? 10);
/** The Dispatcher function's timeout (cdk/lib/floe-cluster.ts): a call must stay far inside it. */
const FUNCTION_TIMEOUT_MS = 29_000;
const ENDED = [JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED] as const;

function oldRecord(i: number): Record<string, unknown> {
  const active = i < ACTIVE;
  const jobId = `old-${String(i).padStart(6, '0')}`;
  return {
    jobId,
    name: 'word count',
    status: active ? JobStatus.RUNNING : ENDED[i % 3],
    epoch: 1,
    submittedAtMs: 1_700_000_000_000 + i,
    updatedAtMs: 1_700_000_000_000 + i,
    ...(active ? {} : { endedAtMs: 1_700_000_000_000 + i }),
    jobGraphKey: `jobs/${jobId}/jobgraph.json`,
    jobGraphSha256: 'cd'.repeat(32),
    librarySha256: 'ab'.repeat(32),
    parallelism: 2,
    exceptions: [],
    cancelRequested: false,
    admission: { state: active ? AdmissionState.ADMITTED : AdmissionState.RELEASED, taskExecutors: 1 },
    listKey: 'jobs',
  };
}

async function batchWriteAll(doc: DynamoDBDocumentClient, table: string, items: Record<string, unknown>[]): Promise<void> {
  let requests: { PutRequest: { Item: Record<string, unknown> } }[] = items.map((Item) => ({ PutRequest: { Item } }));
  for (let attempt = 0; requests.length > 0; attempt++) {
    if (attempt >= 20) throw new Error(`DynamoDB left ${requests.length} of a batch of ${items.length} unwritten after 20 tries; is it overloaded?`);
    const out = await doc.send(new BatchWriteCommand({ RequestItems: { [table]: requests } }));
    requests = (out.UnprocessedItems?.[table] ?? []) as typeof requests;
  }
}

process.stderr.write('starting DynamoDB Local (full JIT) ...\n');
const emulators = await startEmulators({ s3: false, jvmFastStart: false });
const dynamo = createDynamoDbClients(emulators.awsConfig('dynamodb'));
let requests = 0;
dynamo.client.middlewareStack.add(
  (next) => async (args) => {
    requests++;
    return next(args);
  },
  { step: 'initialize', name: 'benchRequestCount' },
);
try {
  const tables = await createTables(emulators);
  const records = Array.from({ length: RECORDS }, (_, i) => oldRecord(i));
  const batches = Array.from({ length: Math.ceil(records.length / 25) }, (_, b) => records.slice(b * 25, b * 25 + 25));
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let b = w; b < batches.length; b += 8) await batchWriteAll(dynamo.documentClient, tables.jobTable, batches[b]!);
    }),
  );
  const store = new DynamoDbJobStore({ documentClient: dynamo.documentClient, tableName: tables.jobTable });
  const marker = async (): Promise<boolean> =>
    (
      await dynamo.documentClient.send(
        new GetCommand({ TableName: tables.jobTable, Key: { jobId: '#schema/active-index-and-ended-counts' }, ConsistentRead: true }),
      )
    ).Item?.['done'] === true;
  const calls: { ms: number; requests: number; activeListed: number }[] = [];
  let allActiveAt: number | undefined;
  do {
    const before = requests;
    const t0 = performance.now();
    const active = await store.listActive();
    calls.push({ ms: performance.now() - t0, requests: requests - before, activeListed: active.length });
    if (allActiveAt === undefined && active.length === ACTIVE) allActiveAt = calls.length;
    if (calls.length > RECORDS) throw new Error(`the pass over ${RECORDS} records did not finish in ${RECORDS} calls; the marker never said done`);
  } while (!(await marker()));
  const afterBefore = requests;
  const t0 = performance.now();
  const activeAfter = await store.listActive();
  const after = { ms: performance.now() - t0, requests: requests - afterBefore, activeListed: activeAfter.length };
  const counts = await store.countEnded();
  const expected = { finished: 0, failed: 0, canceled: 0 };
  for (const r of records) {
    if (r['status'] === JobStatus.FINISHED) expected.finished++;
    if (r['status'] === JobStatus.FAILED) expected.failed++;
    if (r['status'] === JobStatus.CANCELED) expected.canceled++;
  }
  if (JSON.stringify(counts) !== JSON.stringify(expected))
    throw new Error(`countEnded after the pass: expected ${JSON.stringify(expected)}, found ${JSON.stringify(counts)}`);
  if (activeAfter.length !== ACTIVE) throw new Error(`listActive after the pass: expected ${ACTIVE} active jobs, found ${activeAfter.length}`);
  const slowest = Math.max(...calls.map((c) => c.ms));
  const figures = {
    backend: emulators.external ? `DynamoDB at ${emulators.endpoints.dynamodb}` : 'DynamoDB Local',
    records: RECORDS,
    active: ACTIVE,
    callsUntilDone: calls.length,
    callsUntilEveryActiveListed: allActiveAt,
    perCall: calls.map((c) => ({ ms: Math.round(c.ms), requests: c.requests, activeListed: c.activeListed })),
    slowestCallMs: Math.round(slowest),
    afterDone: { ms: Math.round(after.ms), requests: after.requests },
    counts,
    target: `slowest call <= ${FUNCTION_TIMEOUT_MS / 10} ms`,
    met: slowest <= FUNCTION_TIMEOUT_MS / 10,
  };
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
  mkdirSync(join(packageRoot, 'bench', 'out'), { recursive: true });
  writeFileSync(join(packageRoot, 'bench', 'out', 'upgrade-pass.json'), JSON.stringify(figures, null, 2) + '\n');
} finally {
  dynamo.destroy();
  await emulators.stop();
}
