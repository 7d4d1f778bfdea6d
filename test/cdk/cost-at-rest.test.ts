// What the default stack costs while no job runs: every resource billed by the hour or month regardless
// of use must be listed, with its reason and price, in the README's "Cost at rest" table.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, describe, expect, it } from 'vitest';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, GetCommand, ScanCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { createDynamoDbClients, type DynamoDbClients } from '../../runtime/aws/clients.js';
import { DynamoDbJobStore } from '../../runtime/aws/dynamodb-job-store.js';
import { DynamoDbLeaseStore } from '../../runtime/aws/dynamodb-lease-store.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { packageRoot } from '../../runtime/core/paths.js';
import { Dispatcher } from '../../runtime/dispatcher/dispatcher.js';
import { AdmissionState, type JobRecord } from '../../runtime/ha/job-store.js';
import { JobStatus } from '../../runtime/jobgraph/job-status.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { createTables, startEmulators, type Emulators } from '../aws/emulators.js';
import { newJobRecord } from '../contracts/job-store.contract.js';

type Resource = { Type: string; Properties?: Record<string, unknown> };

/** The README's name for each resource that bills while idle, or undefined when it bills per use only. */
function billedAtRest(r: Resource): string | undefined {
  const p = r.Properties ?? {};
  switch (r.Type) {
    case 'AWS::EC2::NatGateway':
      return 'NAT gateway';
    case 'AWS::EC2::VPCEndpoint':
      return p['VpcEndpointType'] === 'Gateway' ? undefined : 'Interface VPC endpoint';
    case 'AWS::EC2::EIP':
      return 'Elastic IP address';
    case 'AWS::ElasticLoadBalancingV2::LoadBalancer':
    case 'AWS::ElasticLoadBalancing::LoadBalancer':
      return 'Load balancer';
    case 'AWS::ECS::Service':
      return 'ECS service';
    case 'AWS::EC2::Instance':
    case 'AWS::AutoScaling::AutoScalingGroup':
      return 'EC2 instances';
    case 'AWS::DynamoDB::Table':
    case 'AWS::DynamoDB::GlobalTable':
      return p['BillingMode'] === 'PAY_PER_REQUEST' ? undefined : 'DynamoDB provisioned capacity';
    case 'AWS::Lambda::Alias':
    case 'AWS::Lambda::Version':
      return p['ProvisionedConcurrencyConfig'] !== undefined ? 'Lambda provisioned concurrency' : undefined;
    case 'AWS::KMS::Key':
      return 'KMS customer key';
    case 'AWS::SecretsManager::Secret':
      return 'Secrets Manager secret';
    case 'AWS::CloudWatch::Alarm':
    case 'AWS::CloudWatch::CompositeAlarm':
      return 'CloudWatch alarm';
    case 'AWS::CloudWatch::Dashboard':
      return 'CloudWatch dashboard';
    case 'AWS::EC2::FlowLog':
      return 'VPC flow logs';
    case 'AWS::Route53::HostedZone':
      return 'Route 53 hosted zone';
    case 'AWS::ECS::Cluster': {
      const settings = (p['ClusterSettings'] as { Name: string; Value: string }[] | undefined) ?? [];
      return settings.some((s) => s.Name === 'containerInsights' && s.Value !== 'disabled') ? 'Container Insights' : undefined;
    }
    case 'AWS::Events::Rule':
      // A schedule invokes its target whether or not a job runs.
      return p['ScheduleExpression'] !== undefined ? 'Reconcile schedule' : undefined;
    default:
      return undefined;
  }
}

/** Resource names in the first column of the README's "Cost at rest" table. */
function readmeCostTable(): string[] {
  const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
  const section = readme.split(/^#### Cost at rest$/m)[1];
  expect(section, 'README.md has a "#### Cost at rest" section').toBeDefined();
  const rows = section!
    .split('\n\n')
    .find((block) => block.trimStart().startsWith('|'))!
    .split('\n')
    .slice(2);
  return rows.map((row) => row.split('|')[1]!.trim()).filter((name) => name !== '' && !name.startsWith('**'));
}

describe('the default stack at rest', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-cost-'));
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it('bills by the hour or month only for what the README lists and justifies', () => {
    const cdkDir = join(packageRoot, 'cdk');
    const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Record<string, unknown>;
    const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...committed, 'aws:cdk:bundling-stacks': [] } });
    const stack = new FloeStack(app, 'Floe', { env: { account: '123456789012', region: 'us-east-1' } });
    const resources = Object.values(Template.fromStack(stack).toJSON()['Resources'] as Record<string, Resource>);
    const atRest = [...new Set(resources.map(billedAtRest).filter((name): name is string => name !== undefined))].sort();
    expect(atRest).toEqual(['Reconcile schedule', 'Secrets Manager secret']);
    expect(readmeCostTable().sort()).toEqual(atRest);
  });
});

// What an idle cluster pays per reconcile (every minute) and per dashboard poll of /overview, as the
// number of ended jobs kept grows: measured on DynamoDB Local with every call asking for its consumed
// capacity, and the items each read returns. Neither may grow with the ended jobs stored.
describe('the job table at rest, with 100 and with 10,000 ended jobs stored', () => {
  let emulators: Emulators | undefined;
  let clients: DynamoDbClients | undefined;
  const closers: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    clients?.destroy();
    await emulators?.stop();
  });

  it('one reconcile, one overview poll and the first page of GET /jobs read the same with 100 and with 10,000 stored', { timeout: 240_000 }, async () => {
    emulators = await startEmulators({ s3: false });
    const tables = await createTables(emulators);
    clients = createDynamoDbClients(emulators.awsConfig('dynamodb'));
    const meter = new ReadMeter();
    meter.attach(clients.client);
    const clock = new ManualClock(Date.now());
    const startMs = clock.now();
    const jobStore = new DynamoDbJobStore({
      documentClient: clients.documentClient,
      tableName: tables.jobTable,
      clock,
      endedJobRetentionMs: 30 * 24 * 3_600_000,
    });
    const leaseStore = new DynamoDbLeaseStore({ documentClient: clients.documentClient, tableName: tables.leaseTable, clock });
    const launcher = new InProcessWorkerLauncher(async () => ({ stop: async () => undefined, exited: new Promise<number>(() => undefined) }));
    const rpc = new LocalRpcService(new LocalRpcNetwork(), 'dispatcher');
    const config = loadConfig();
    const dispatcher = new Dispatcher({
      jobStore,
      blobStore: new InMemoryBlobStore(),
      leaseStore,
      launcher,
      rpc,
      config,
      clock,
      logger: silentLogger,
      jobManagerEnv: {},
    });
    closers.push(
      () => dispatcher.close(),
      () => launcher.close(),
      () => rpc.close(),
      () => jobStore.close(),
    );
    const bounds = { maxJobManagers: 10, maxTaskExecutors: 10 };
    // A container's first reconcile on a new table also runs the store's one-time pass over older records:
    // the marker read (absent), one Scan page (empty) and the transaction that writes the marker done.
    expect(await meter.during(() => dispatcher.reconcile())).toEqual({ calls: 6, items: 0, capacityUnits: 5 });
    // At rest: no job stored. The README's figures per reconcile and per poll.
    expect(await meter.during(() => dispatcher.reconcile())).toEqual({ calls: 3, items: 0, capacityUnits: 2 });
    expect(await meter.during(() => dispatcher.overview())).toEqual({ calls: 4, items: 0, capacityUnits: 3 });

    // A few active jobs: admitted, their JobManagers just launched and running.
    const taskExecutors = [{ resourceId: 'te-1', slots: [{ index: 0, tasks: [] }] }];
    for (let i = 0; i < 3; i++) {
      const r = newJobRecord(clock, { admission: { state: AdmissionState.SUBMITTING, taskExecutors: 1 } });
      await jobStore.create(r);
      await jobStore.enqueueAndAdmit(r.jobId, bounds, {
        expected: r,
        jobManager: { launches: 1, workerId: `jobmanager-${r.jobId}`, launchedAtMs: clock.now() },
      });
      await jobStore.update(r.jobId, { status: JobStatus.RUNNING, taskExecutors }, 1);
      clock.advance(1);
    }
    // 100 ended jobs, each through the store: submitted, admitted, finished, its reservation given back.
    let ended: JobRecord | undefined;
    for (let i = 0; i < 100; i++) {
      const r = newJobRecord(clock, { admission: { state: AdmissionState.SUBMITTING, taskExecutors: 1 } });
      await jobStore.create(r);
      await jobStore.enqueueAndAdmit(r.jobId, bounds, { expected: r });
      await jobStore.update(r.jobId, { status: JobStatus.FINISHED, endedAtMs: clock.now() }, 1);
      ended = (await jobStore.release(r.jobId)).record;
      clock.advance(1);
    }

    const measure = async (): Promise<Measured> => ({
      reconcile: await meter.during(() => dispatcher.reconcile()),
      overview: await meter.during(() => dispatcher.overview()),
      firstPage: await meter.during(() => jobStore.listPage(20)),
      wholeTable: await meter.during(() => jobStore.list()),
    });
    const atHundred = await measure();
    const overviewAtHundred = await dispatcher.overview();
    expect(overviewAtHundred.jobs).toEqual({ total: 103, running: 3, finished: 100, failed: 0, canceled: 0 });

    // 9,900 more ended jobs, stored as the store stores them: copies of the last one's item, submitted
    // before all others, batch-written.
    const doc = clients.documentClient;
    const item = (await doc.send(new GetCommand({ TableName: tables.jobTable, Key: { jobId: ended!.jobId } }))).Item!;
    expect(item['activeKey']).toBeUndefined();
    const copies = Array.from({ length: 9_900 }, (_, i) => ({ ...item, jobId: `ended-${i}`, submittedAtMs: startMs - 1 - i }));
    const batches = Array.from({ length: Math.ceil(copies.length / 25) }, (_, b) => copies.slice(b * 25, b * 25 + 25));
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let b = w; b < batches.length; b += 8) await batchWriteAll(doc, tables.jobTable, batches[b]!);
      }),
    );
    let stored = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await doc.send(new ScanCommand({ TableName: tables.jobTable, Select: 'COUNT', ExclusiveStartKey: start }));
      stored += page.Count ?? 0;
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    // 10,000 ended jobs, 3 active ones and the three items of the store's own (the admission ledger, the
    // ended-job counts and the marker of the one-time pass).
    expect(stored).toBe(10_003 + 3);

    const atTenThousand = await measure();
    // The instrument sees what grows: reading the whole table costs a hundred times more...
    expect(atTenThousand.wholeTable.items).toBe(atHundred.wholeTable.items + 9_900);
    expect(atTenThousand.wholeTable.capacityUnits).toBeGreaterThan(20 * atHundred.wholeTable.capacityUnits);
    // ...and what an idle cluster does reads the same.
    expect(atTenThousand.reconcile).toEqual(atHundred.reconcile);
    expect(atTenThousand.overview).toEqual(atHundred.overview);
    expect(atTenThousand.firstPage).toEqual(atHundred.firstPage);
    // Another container reads the marker, done, once (1 unit), and scans nothing.
    const cold = new DynamoDbJobStore({ documentClient: clients.documentClient, tableName: tables.jobTable, clock, endedJobRetentionMs: 30 * 24 * 3_600_000 });
    closers.push(() => cold.close());
    expect(await meter.during(() => cold.countEnded())).toEqual({ calls: 2, items: 2, capacityUnits: 2 });
    expect(await meter.during(() => cold.countEnded())).toEqual({ calls: 1, items: 1, capacityUnits: 1 });
    // Each running job adds the read of its lease (1 unit) to a reconcile; the Query returns the 3 for half a unit.
    expect(atHundred.reconcile).toEqual({ calls: 6, items: 4, capacityUnits: 5.5 });
    expect(atHundred.overview).toEqual({ calls: 4, items: 5, capacityUnits: 3.5 });
    expect((await dispatcher.overview()).jobs).toEqual(overviewAtHundred.jobs);
  });
});

interface Reads {
  /** DynamoDB requests made. */
  readonly calls: number;
  /** Items the reads returned (a Query's Count, a GetItem's item). */
  readonly items: number;
  /** Capacity units DynamoDB says the requests consumed, reads and writes. */
  readonly capacityUnits: number;
}
interface Measured {
  readonly reconcile: Reads;
  readonly overview: Reads;
  readonly firstPage: Reads;
  readonly wholeTable: Reads;
}

/** Asks every request of a client for its consumed capacity and adds up what the requests in a window read. */
class ReadMeter {
  private calls = 0;
  private items = 0;
  private units = 0;

  attach(client: DynamoDBClient): void {
    client.middlewareStack.add(
      (next) => async (args) => {
        const input = args.input as Record<string, unknown>;
        input['ReturnConsumedCapacity'] = 'TOTAL';
        const out = await next(args);
        const output = out.output as {
          Count?: number;
          Item?: unknown;
          Items?: unknown[];
          ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[];
        };
        this.calls++;
        this.items += output.Count ?? (output.Item !== undefined ? 1 : 0);
        for (const c of [output.ConsumedCapacity ?? []].flat()) this.units += c.CapacityUnits ?? 0;
        return out;
      },
      { step: 'initialize', name: 'floeReadMeter' },
    );
  }

  async during(fn: () => Promise<unknown>): Promise<Reads> {
    const before = { calls: this.calls, items: this.items, units: this.units };
    await fn();
    return { calls: this.calls - before.calls, items: this.items - before.items, capacityUnits: this.units - before.units };
  }
}

async function batchWriteAll(doc: DynamoDBDocumentClient, table: string, items: Record<string, unknown>[]): Promise<void> {
  let requests: { PutRequest: { Item: Record<string, unknown> } }[] = items.map((Item) => ({ PutRequest: { Item } }));
  for (let attempt = 0; requests.length > 0; attempt++) {
    if (attempt >= 20) throw new Error(`DynamoDB Local left ${requests.length} of a batch of ${items.length} unwritten after 20 tries; is it overloaded?`);
    const out = await doc.send(new BatchWriteCommand({ RequestItems: { [table]: requests } }));
    requests = (out.UnprocessedItems?.[table] ?? []) as typeof requests;
  }
}
