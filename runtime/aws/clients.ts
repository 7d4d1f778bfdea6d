// AWS SDK client construction from one AwsConfig, with the options that make the same code work against
// AWS, LocalStack, DynamoDB Local and s3rver.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { callLogTargetFromEnv, recordAwsCalls, type AwsCallLogTarget } from './aws-call-log.js';

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface AwsConfig {
  readonly region: string;
  /**
   * Endpoint URL for every service, e.g. an emulator or LocalStack (`http://127.0.0.1:4566`).
   * @default - the public AWS endpoint of the region
   */
  readonly endpoint?: string;
  /** @default - the SDK's default provider chain (environment, ECS task role, Lambda role, profile) */
  readonly credentials?: AwsCredentials;
  /** Attempts per request, the first included; the SDK backs off between them. @default 3 */
  readonly maxAttempts?: number;
  /** Deadline to open a connection (ms). @default 3000 */
  readonly connectionTimeoutMs?: number;
  /** Deadline for a request once sent, measured as socket inactivity (ms). @default 10000 */
  readonly requestTimeoutMs?: number;
  /** Where this client records its calls (aws-call-log.ts). @default - FLOE_AWS_CALL_LOG of process.env: none when unset */
  readonly callLog?: AwsCallLogTarget;
}

/** Adds the call record to a client built from `config` (a no-op unless a call log is set). */
export function withCallLog<C>(client: C, config: AwsConfig): C {
  return recordAwsCalls(client, config.callLog ?? callLogTargetFromEnv(process.env), config.credentials?.accessKeyId);
}

export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_CONNECTION_TIMEOUT_MS = 3_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** The options every Floe client shares; exported so other clients (ECS) are built the same way. */
export function baseClientOptions(config: AwsConfig): {
  region: string;
  endpoint?: string;
  credentials?: AwsCredentials;
  maxAttempts: number;
  requestHandler: { connectionTimeout: number; requestTimeout: number };
} {
  quietNodeVersionWarning();
  return {
    region: config.region,
    ...(config.endpoint !== undefined && { endpoint: config.endpoint }),
    ...(config.credentials !== undefined && { credentials: config.credentials }),
    maxAttempts: config.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    requestHandler: {
      connectionTimeout: config.connectionTimeoutMs ?? DEFAULT_CONNECTION_TIMEOUT_MS,
      requestTimeout: config.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    },
  };
}

export interface DynamoDbClients {
  /** The low-level client; destroy it (or call `destroy` below) when done. */
  readonly client: DynamoDBClient;
  /** Plain-JS marshalling over `client`: undefined fields are dropped, as JSON would. */
  readonly documentClient: DynamoDBDocumentClient;
  destroy(): void;
}

export function createDynamoDbClients(config: AwsConfig): DynamoDbClients {
  const base = baseClientOptions(config);
  // The HTTP handler only warns once `requestTimeout` passes; socket inactivity is what ends a call whose
  // answer never comes (a lease renewal must fail in time, not hang). Not for S3: a streamed read may
  // rest while its reader is backpressured.
  const client = withCallLog(
    new DynamoDBClient({ ...base, requestHandler: { ...base.requestHandler, socketTimeout: base.requestHandler.requestTimeout } }),
    config,
  );
  const documentClient = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
  return { client, documentClient, destroy: () => client.destroy() };
}

export function createS3Client(config: AwsConfig): S3Client {
  return withCallLog(
    new S3Client({
      ...baseClientOptions(config),
      // Emulators (s3rver, LocalStack) address buckets by path, and s3rver knows neither the flexible
      // checksums nor their trailers that newer SDKs send by default.
      forcePathStyle: config.endpoint !== undefined,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    }),
    config,
  );
}

/**
 * A Kinesis Data Streams client over HTTP/1.1: the SDK's default HTTP/2 handler (made for SubscribeToShard,
 * which Floe does not use) fails against emulators that speak HTTP/1.1 only (kinesalite).
 */
export function createKinesisClient(config: AwsConfig): KinesisClient {
  const base = baseClientOptions(config);
  return withCallLog(
    new KinesisClient({
      ...base,
      requestHandler: new NodeHttpHandler({
        connectionTimeout: base.requestHandler.connectionTimeout,
        requestTimeout: base.requestHandler.requestTimeout,
        socketTimeout: base.requestHandler.requestTimeout,
      }),
    }),
    config,
  );
}

/** The SDK warns once per process about Node versions it will drop; Floe pins its Node version itself. */
function quietNodeVersionWarning(): void {
  process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
}
