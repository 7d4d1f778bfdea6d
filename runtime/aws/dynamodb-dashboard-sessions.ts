// The dashboard's sessions and one-time login codes in the job table, under keys no job id can take
// (`#dashboard/…`): every Lambda container reads the same items, so a code works once across all of
// them and revoking the sessions ends them everywhere at their next request. Only a hash of each code
// and session token is stored; the token itself exists only in the link or the browser's cookie.
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createHash, randomBytes } from 'node:crypto';
import { LOGIN_CODE_TTL_MS, SESSION_TTL_MS, type DashboardSession, type DashboardSessions } from '../dispatcher/dashboard.js';
import { FloeError } from '../core/errors.js';
import { awsCall } from './aws-errors.js';
import { compareAndSet, ConditionFailed, conditionally, LOST_RACE } from './dynamodb-conditions.js';
import { jobTable } from './tables.js';

/** Every key of these items starts with '#', which a job id never does (see dynamodb-job-store.ts). */
const SESSIONS_KEY = '#dashboard/sessions';
const CODE_KEY_PREFIX = '#dashboard/code/';
const SESSION_PREFIX = 's2.';
const CODE_PREFIX = 'c2.';
/** Expired sessions removed with each new one, so the sessions item stays small. */
const PRUNE_PER_LOGIN = 50;
/** Logins racing a revocation or each other retry this often before the error goes to the caller. */
const MAX_CREATE_ATTEMPTS = 5;

const A = { key: jobTable.partitionKey.name, sessions: 'sessions', expiresAtMs: 'expiresAtMs', ttl: jobTable.timeToLiveAttribute } as const;

/** The stored name of a token: 128 bits of its SHA-256, so the item never holds what logs in. */
const hashOf = (token: string): string => createHash('sha256').update(token).digest('base64url').slice(0, 22);
const newToken = (prefix: string): string => `${prefix}${randomBytes(32).toString('base64url')}`;
/** Whether `value` has the shape newToken gives: anything else is refused without a call to DynamoDB. */
const isToken = (value: string, prefix: string): boolean =>
  value.length === prefix.length + 43 && value.startsWith(prefix) && /^[\w-]+$/.test(value.slice(prefix.length));

export interface DynamoDbDashboardSessionsOptions {
  readonly documentClient: DynamoDBDocumentClient;
  /** The job table (tables.ts `jobTable`): its TTL removes expired codes. */
  readonly tableName: string;
}

/**
 * Sessions are entries of one item (`#dashboard/sessions`: token hash → expiry), so checking a session is
 * one GetItem and revoking all of them is one DeleteItem. Each login code is an item of its own, consumed
 * by a DeleteItem conditioned on its expiry: of two containers redeeming it, one delete finds it.
 */
export class DynamoDbDashboardSessions implements DashboardSessions {
  private readonly db: DynamoDBDocumentClient;
  private readonly table: string;

  constructor(options: DynamoDbDashboardSessionsOptions) {
    this.db = options.documentClient;
    this.table = options.tableName;
  }

  private get resource(): string {
    return `table ${this.table}`;
  }

  async createSession(nowMs: number): Promise<DashboardSession> {
    const token = newToken(SESSION_PREFIX);
    const expiresAtMs = nowMs + SESSION_TTL_MS;
    const held = await awsCall('DynamoDB', 'GetItem', this.resource, () =>
      this.db.send(new GetCommand({ TableName: this.table, Key: { [A.key]: SESSIONS_KEY }, ConsistentRead: true })),
    );
    const sessions = (held.Item?.[A.sessions] ?? {}) as Record<string, number>;
    const expired = Object.entries(sessions)
      .filter(([, at]) => at <= nowMs)
      .slice(0, PRUNE_PER_LOGIN)
      .map(([hash]) => hash);
    await compareAndSet(
      {
        maxAttempts: MAX_CREATE_ATTEMPTS,
        contended: () =>
          new FloeError(
            'DASHBOARD_SESSION_CONFLICT',
            `could not store a dashboard session in ${this.resource} after ${MAX_CREATE_ATTEMPTS} tries: the sessions item kept changing between an update and a create; log in again`,
            { retryable: true },
          ),
      },
      async () => {
        const added = await awsCall('DynamoDB', 'UpdateItem', this.resource, () =>
          conditionally(() =>
            this.db.send(
              new UpdateCommand({
                TableName: this.table,
                Key: { [A.key]: SESSIONS_KEY },
                UpdateExpression: `SET #s.#new = :at${expired.length > 0 ? ` REMOVE ${expired.map((_, i) => `#s.#old${i}`).join(', ')}` : ''}`,
                ConditionExpression: 'attribute_exists(#s)',
                ExpressionAttributeNames: { '#s': A.sessions, '#new': hashOf(token), ...Object.fromEntries(expired.map((hash, i) => [`#old${i}`, hash])) },
                ExpressionAttributeValues: { ':at': expiresAtMs },
              }),
            ),
          ),
        );
        if (!(added instanceof ConditionFailed)) return true;
        // No sessions item (none yet, or all revoked): create it with this session, unless another login just did.
        const created = await awsCall('DynamoDB', 'PutItem', this.resource, () =>
          conditionally(() =>
            this.db.send(
              new PutCommand({
                TableName: this.table,
                Item: { [A.key]: SESSIONS_KEY, [A.sessions]: { [hashOf(token)]: expiresAtMs } },
                ConditionExpression: 'attribute_not_exists(#k)',
                ExpressionAttributeNames: { '#k': A.key },
              }),
            ),
          ),
        );
        // Another login created it in between: add to it.
        return created instanceof ConditionFailed ? LOST_RACE : true;
      },
    );
    return { value: token, maxAgeSeconds: SESSION_TTL_MS / 1000 };
  }

  async verifySession(value: string, nowMs: number): Promise<boolean> {
    if (!isToken(value, SESSION_PREFIX)) return false;
    const out = await awsCall('DynamoDB', 'GetItem', this.resource, () =>
      this.db.send(
        new GetCommand({
          TableName: this.table,
          Key: { [A.key]: SESSIONS_KEY },
          ConsistentRead: true,
          ProjectionExpression: '#s.#h',
          ExpressionAttributeNames: { '#s': A.sessions, '#h': hashOf(value) },
        }),
      ),
    );
    const expiresAtMs = (out.Item?.[A.sessions] as Record<string, unknown> | undefined)?.[hashOf(value)];
    return typeof expiresAtMs === 'number' && expiresAtMs > nowMs;
  }

  async issueLoginCode(nowMs: number): Promise<{ code: string; expiresAtMs: number }> {
    const code = newToken(CODE_PREFIX);
    const expiresAtMs = nowMs + LOGIN_CODE_TTL_MS;
    await awsCall('DynamoDB', 'PutItem', this.resource, () =>
      this.db.send(
        new PutCommand({
          TableName: this.table,
          Item: { [A.key]: `${CODE_KEY_PREFIX}${hashOf(code)}`, [A.expiresAtMs]: expiresAtMs, [A.ttl]: Math.ceil(expiresAtMs / 1000) },
          ConditionExpression: 'attribute_not_exists(#k)',
          ExpressionAttributeNames: { '#k': A.key },
        }),
      ),
    );
    return { code, expiresAtMs };
  }

  async redeemLoginCode(code: string, nowMs: number): Promise<boolean> {
    if (!isToken(code, CODE_PREFIX)) return false;
    const consumed = await awsCall('DynamoDB', 'DeleteItem', this.resource, () =>
      conditionally(() =>
        this.db.send(
          new DeleteCommand({
            TableName: this.table,
            Key: { [A.key]: `${CODE_KEY_PREFIX}${hashOf(code)}` },
            // DynamoDB's TTL removes expired items within days, not at once: the expiry is checked here.
            ConditionExpression: '#exp > :now',
            ExpressionAttributeNames: { '#exp': A.expiresAtMs },
            ExpressionAttributeValues: { ':now': nowMs },
          }),
        ),
      ),
    );
    return !(consumed instanceof ConditionFailed);
  }

  readonly endSession = async (value: string): Promise<void> => {
    if (!isToken(value, SESSION_PREFIX)) return;
    // Conditioned on the entry: removing a path from an item or map that is not there is an error, and there is nothing to end.
    await awsCall('DynamoDB', 'UpdateItem', this.resource, () =>
      conditionally(() =>
        this.db.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { [A.key]: SESSIONS_KEY },
            UpdateExpression: 'REMOVE #s.#h',
            ConditionExpression: 'attribute_exists(#s.#h)',
            ExpressionAttributeNames: { '#s': A.sessions, '#h': hashOf(value) },
          }),
        ),
      ),
    );
  };

  readonly revokeAll = async (): Promise<void> => {
    await awsCall('DynamoDB', 'DeleteItem', this.resource, () => this.db.send(new DeleteCommand({ TableName: this.table, Key: { [A.key]: SESSIONS_KEY } })));
  };
}
