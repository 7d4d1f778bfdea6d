// A record of every AWS SDK call a process makes, one JSON line per call, with the input fields that
// decide which IAM actions and resources the call needs: what lets tests check each call against the
// policy of the role that makes it. Off (no middleware, no cost) unless FLOE_AWS_CALL_LOG is set.
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { FloeEnv } from '../core/floe-env.js';

export interface AwsCallLogTarget {
  readonly dir: string;
  readonly role: string;
}

/** One recorded call. */
export interface AwsCallRecord {
  /** The role label of the process that made the call. */
  readonly role: string;
  readonly pid: number;
  /** The client's name, e.g. 'DynamoDBClient', 'S3Client', 'ECSClient'. */
  readonly client: string;
  /** The command's name without 'Command', e.g. 'TransactWriteItems', 'PutObject', 'RunTask'. */
  readonly operation: string;
  /** The fields of the input that name IAM resources or change which actions are needed. */
  readonly input: Record<string, unknown>;
  /** The access key the call is signed with, when the client was given one (a scoped session's). */
  readonly accessKeyId?: string;
  /** AssumeRole: the access key of the session it answered with, whose calls its session policy narrows. */
  readonly issuedAccessKeyId?: string;
}

export function callLogTargetFromEnv(env: NodeJS.ProcessEnv): AwsCallLogTarget | undefined {
  const dir = env[FloeEnv.AWS_CALL_LOG];
  if (dir === undefined || dir === '') return undefined;
  return { dir, role: env[FloeEnv.AWS_CALL_LOG_ROLE] || 'unknown' };
}

/** Input fields kept as they are: names of tables, indexes, buckets, keys, clusters, buses, log groups, secrets, roles. */
const PLAIN_FIELDS = [
  'TableName',
  'IndexName',
  'Bucket',
  'Key',
  'CopySource',
  'Prefix',
  'UploadId',
  'cluster',
  'taskDefinition',
  'tasks',
  'task',
  'family',
  'propagateTags',
  'capacityProviderStrategy',
  'launchType',
  'logGroupName',
  'logGroupIdentifier',
  'logGroupNames',
  'logStreamName',
  'logStreamNames',
  'SecretId',
  'RoleArn',
  'RoleSessionName',
  'Policy',
  'PolicyArns',
  'DurationSeconds',
] as const;

/** The IAM-relevant part of a command's input (no item values, no bodies, no environment overrides). */
export function iamRelevantInput(input: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of PLAIN_FIELDS) if (input[field] !== undefined) out[field] = input[field];
  const items = input['TransactItems'];
  if (Array.isArray(items)) {
    out['TransactItems'] = items.map((item: Record<string, { TableName?: unknown } | undefined>) => {
      const kind = Object.keys(item).find((k) => item[k] !== undefined) ?? 'unknown';
      return { kind, TableName: item[kind]?.TableName };
    });
  }
  const requestItems = input['RequestItems'];
  if (requestItems !== null && typeof requestItems === 'object') {
    // BatchWriteItem: per table, the kinds of its requests (PutRequest, DeleteRequest); BatchGetItem: the tables.
    out['RequestItems'] = Object.fromEntries(
      Object.entries(requestItems as Record<string, unknown>).map(([table, requests]) => [
        table,
        Array.isArray(requests) ? [...new Set(requests.flatMap((r: Record<string, unknown>) => Object.keys(r)))] : ['Get'],
      ]),
    );
  }
  const deleted = (input['Delete'] as { Objects?: { Key?: string }[] } | undefined)?.Objects;
  if (Array.isArray(deleted)) out['DeleteKeys'] = deleted.map((o) => o.Key);
  if (input['tags'] !== undefined) out['tags'] = (input['tags'] as { key?: string }[]).map((t) => t.key);
  if (input['Tagging'] !== undefined) out['Tagging'] = true;
  const entries = input['Entries'];
  if (Array.isArray(entries)) out['EventBusNames'] = entries.map((e: { EventBusName?: unknown }) => e.EventBusName ?? 'default');
  return out;
}

interface MiddlewareClient {
  readonly middlewareStack: {
    add(
      middleware: (
        next: (args: { input: object }) => Promise<unknown>,
        context: { clientName?: string; commandName?: string },
      ) => (args: { input: object }) => Promise<unknown>,
      options: { step: 'initialize'; name: string },
    ): void;
  };
}

/**
 * Adds the recording middleware to `client` when `target` (default: from process.env) is set; returns
 * the client. Each attempt's retries are one call: the record is made once, before the SDK's retries.
 */
export function recordAwsCalls<C>(client: C, target: AwsCallLogTarget | undefined = callLogTargetFromEnv(process.env), accessKeyId?: string): C {
  if (target === undefined) return client;
  mkdirSync(target.dir, { recursive: true });
  const file = join(target.dir, `${target.role}-${process.pid}.jsonl`);
  (client as unknown as MiddlewareClient).middlewareStack.add(
    (next, context) => async (args) => {
      let record: AwsCallRecord = {
        role: target.role,
        pid: process.pid,
        client: context.clientName ?? 'unknown',
        operation: (context.commandName ?? 'unknown').replace(/Command$/, ''),
        input: iamRelevantInput(args.input as Record<string, unknown>),
        ...(accessKeyId !== undefined ? { accessKeyId } : {}),
      };
      if (record.operation === 'AssumeRole') {
        // Recorded once answered, with the session's key, so the calls made with it can be told apart.
        try {
          const result = await next(args);
          const issued = (result as { output?: { Credentials?: { AccessKeyId?: string } } }).output?.Credentials?.AccessKeyId;
          if (issued !== undefined) record = { ...record, issuedAccessKeyId: issued };
          return result;
        } finally {
          appendFileSync(file, JSON.stringify(record) + '\n');
        }
      }
      // Synchronous, so a process that ends right after a call still leaves its record.
      appendFileSync(file, JSON.stringify(record) + '\n');
      return next(args);
    },
    { step: 'initialize', name: 'floeAwsCallLog' },
  );
  return client;
}

/** The `callLog` field of an AwsConfig for a process whose environment is `env` (not always process.env). */
export function callLogConfig(env: NodeJS.ProcessEnv): { callLog?: AwsCallLogTarget } {
  const callLog = callLogTargetFromEnv(env);
  return callLog !== undefined ? { callLog } : {};
}
