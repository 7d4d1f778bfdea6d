// Benchmark: latency of one conditional write, the operation leadership and job records rest on, on
// DynamoDB Local (or FLOE_TEST_AWS_ENDPOINT) next to the embedded SQLite stores, in one run: a lease
// renewal (LeaseStore.renew) and a job-status update fenced by epoch (JobStore.update). Rounds alternate
// between the backends so drift of the machine's load hits both alike. Prints median, p90 and p99 per
// backend and the DynamoDB ÷ SQLite ratio of the medians.
// Run: npm run bench:conditional-write   (figures also go to bench/out/conditional-write.json;
// BENCH_OPS, BENCH_WARMUP and BENCH_ROUND set the measured writes per operation, warm-up writes, round size).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDynamoDbClients } from '../runtime/aws/clients.js';
import { DynamoDbJobStore } from '../runtime/aws/dynamodb-job-store.js';
import { DynamoDbLeaseStore } from '../runtime/aws/dynamodb-lease-store.js';
import { JobId } from '../runtime/core/ids.js';
import { packageRoot } from '../runtime/core/paths.js';
import type { JobStore } from '../runtime/ha/job-store.js';
import type { LeaseStore } from '../runtime/ha/lease-store.js';
import { JobStatus, type TaskCounts } from '../runtime/jobgraph/job-status.js';
import { SqliteJobStore } from '../runtime/local/sqlite-job-store.js';
import { SqliteLeaseStore } from '../runtime/local/sqlite-lease-store.js';
import { createTables, startEmulators } from '../test/aws/emulators.js';

const OPS = Number(process.env['BENCH_OPS'] ?? 1_000);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 300);
const ROUND = Number(process.env['BENCH_ROUND'] ?? 50);
const LEASE_MS = 60_000;

interface Backend {
  readonly name: string;
  readonly leases: LeaseStore;
  readonly jobs: JobStore;
}

interface Subject {
  readonly backend: string;
  readonly op: 'lease renew' | 'job-status update';
  /** One conditional write. */
  readonly write: () => Promise<unknown>;
  readonly samplesMs: number[];
}

const quantile = (xs: readonly number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const round3 = (x: number): number => Number(x.toFixed(3));

async function subjectsOf(backend: Backend): Promise<Subject[]> {
  const leaseName = `jm/bench-${backend.name}-${Date.now().toString(36)}`;
  const lease = await backend.leases.tryAcquire(leaseName, 'bench', 'http://127.0.0.1:1', LEASE_MS);
  if (lease === undefined) throw new Error(`could not take lease ${leaseName} on ${backend.name}`);
  const jobId = JobId.of(`bench-${backend.name}-${Date.now().toString(36)}`);
  const now = Date.now();
  await backend.jobs.create({
    jobId,
    name: 'conditional-write benchmark',
    status: JobStatus.INITIALIZING,
    epoch: 0,
    submittedAtMs: now,
    updatedAtMs: now,
    jobGraphKey: `jobs/${jobId}/jobgraph.json`,
    librarySha256: '00'.repeat(32),
    parallelism: 4,
    exceptions: [],
    cancelRequested: false,
  });
  let n = 0;
  const statuses = [JobStatus.CREATED, JobStatus.RUNNING] as const;
  const renew = async (): Promise<void> => {
    if ((await backend.leases.renew(leaseName, 'bench', lease.epoch, LEASE_MS)) === undefined) throw new Error(`lost lease ${leaseName} on ${backend.name}`);
  };
  const update = async (): Promise<void> => {
    n++;
    const tasks: TaskCounts = { total: 4, scheduled: 0, deploying: 0, running: n % 5, finished: 4 - (n % 5), canceled: 0, failed: 0 };
    await backend.jobs.update(jobId, { status: statuses[n % 2]!, tasks }, lease.epoch);
  };
  return [
    { backend: backend.name, op: 'lease renew', write: renew, samplesMs: [] },
    { backend: backend.name, op: 'job-status update', write: update, samplesMs: [] },
  ];
}

const work = mkdtempSync(join(tmpdir(), 'floe-bench-cw-'));
process.stderr.write('starting DynamoDB Local (full JIT) ...\n');
const emulators = await startEmulators({ s3: false, jvmFastStart: false });
const dynamo = createDynamoDbClients(emulators.awsConfig('dynamodb'));
try {
  const tables = await createTables(emulators);
  const dbPath = join(work, 'floe.db');
  const backends: Backend[] = [
    {
      name: emulators.external ? `DynamoDB at ${emulators.endpoints.dynamodb}` : 'DynamoDB Local',
      leases: new DynamoDbLeaseStore({ documentClient: dynamo.documentClient, tableName: tables.leaseTable }),
      jobs: new DynamoDbJobStore({ documentClient: dynamo.documentClient, tableName: tables.jobTable }),
    },
    { name: 'SQLite', leases: new SqliteLeaseStore(dbPath), jobs: new SqliteJobStore(dbPath) },
  ];
  const subjects = (await Promise.all(backends.map(subjectsOf))).flat();

  for (const s of subjects) for (let i = 0; i < WARMUP; i++) await s.write();
  // Rounds alternate subject by subject, so every backend sees the same stretch of machine load.
  for (let done = 0; done < OPS; done += ROUND) {
    for (const s of subjects) {
      for (let i = 0; i < Math.min(ROUND, OPS - done); i++) {
        const t0 = performance.now();
        await s.write();
        s.samplesMs.push(performance.now() - t0);
      }
    }
  }
  await Promise.all(backends.flatMap((b) => [b.leases.close(), b.jobs.close()]));

  const byOp = (op: Subject['op']) => {
    const [d, q] = [subjects.find((s) => s.op === op && s.backend !== 'SQLite')!, subjects.find((s) => s.op === op && s.backend === 'SQLite')!];
    const stats = (s: Subject) => ({
      medianMs: round3(median(s.samplesMs)),
      p90Ms: round3(quantile(s.samplesMs, 0.9)),
      p99Ms: round3(quantile(s.samplesMs, 0.99)),
    });
    return { dynamodb: stats(d), sqlite: stats(q), dynamodbOverSqlite: Number((median(d.samplesMs) / median(q.samplesMs)).toFixed(1)) };
  };
  const figures = {
    what: 'one conditional write, sequential, on one connection; DynamoDB Local in-memory on loopback (HTTP + SigV4), SQLite file in WAL mode with synchronous=NORMAL',
    dynamodb: backends[0]!.name,
    writesPerOperation: OPS,
    warmupWrites: WARMUP,
    node: process.version,
    leaseRenew: byOp('lease renew'),
    jobStatusUpdate: byOp('job-status update'),
  };
  mkdirSync(join(packageRoot, 'bench', 'out'), { recursive: true });
  writeFileSync(join(packageRoot, 'bench', 'out', 'conditional-write.json'), JSON.stringify(figures, null, 2) + '\n');
  console.log(`conditional write latency, ${OPS} writes each after ${WARMUP} warm-up writes (median / p90 / p99, ms):`);
  for (const [label, f] of [
    ['lease renew', figures.leaseRenew],
    ['job-status update', figures.jobStatusUpdate],
  ] as const) {
    console.log(
      `  ${label.padEnd(18)} ${figures.dynamodb}: ${f.dynamodb.medianMs} / ${f.dynamodb.p90Ms} / ${f.dynamodb.p99Ms}   SQLite: ${f.sqlite.medianMs} / ${f.sqlite.p90Ms} / ${f.sqlite.p99Ms}   DynamoDB ÷ SQLite (median) = ${f.dynamodbOverSqlite}`,
    );
  }
} finally {
  dynamo.destroy();
  await emulators.stop();
  rmSync(work, { recursive: true, force: true });
}
