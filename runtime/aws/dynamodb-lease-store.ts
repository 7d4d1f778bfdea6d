// LeaseStore on DynamoDB. Every change is one conditional write on the lease's item, so DynamoDB
// serializes contenders: two can never take the same epoch. Items are never deleted, so an epoch, once
// handed out, is never handed out again. Time is the caller's clock, never DynamoDB's.
//
// Clocks on different machines disagree. With `maxClockSkewMs` = S, the bound every clock must keep
// against every other, and a holder whose lease says `expiresAtMs` = E (set from its own clock):
// - another contender takes the lease only once its own clock reads E + S, i.e. not before the
//   holder's clock reads E;
// - the holder stops acting before its clock reads E (LeaderElection steps down a safety margin ahead
//   of E, and renew() refuses at E), so the two never act at once;
// - the holder itself, whose clock set E, may take the lease again at E, at a new epoch.
// A released lease is free to anyone at once: its holder already stopped acting.
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { systemClock, type Clock } from '../core/clock.js';
import { InvalidRequestError } from '../core/errors.js';
import type { Lease, LeaseStore } from '../ha/lease-store.js';
import { assertLeaseArgs } from '../ha/lease-rules.js';
import { awsCall } from './aws-errors.js';
import { ConditionFailed, conditionally, type ConditionalUpdate, type Item } from './dynamodb-conditions.js';
import { leaseTable } from './tables.js';

export interface DynamoDbLeaseStoreOptions {
  readonly documentClient: DynamoDBDocumentClient;
  readonly tableName: string;
  /** @default systemClock */
  readonly clock?: Clock;
  /**
   * The most any two contenders' clocks may disagree (ms); see the file comment. AWS hosts keep their
   * clocks within a millisecond of each other (Amazon Time Sync), so a second leaves a wide margin.
   * @default 0
   */
  readonly maxClockSkewMs?: number;
  /** Runs on close(), e.g. to destroy a client the store owns. */
  readonly onClose?: () => void;
}

const A = leaseTable.attributes;
const NAMES = {
  '#name': A.name,
  '#holder': A.holder,
  '#address': A.address,
  '#epoch': A.epoch,
  '#expires': A.expiresAtMs,
  '#released': A.released,
} as const;

function names<K extends keyof typeof NAMES>(...keys: K[]): Record<K, string> {
  return Object.fromEntries(keys.map((k) => [k, NAMES[k]])) as unknown as Record<K, string>;
}

export class DynamoDbLeaseStore implements LeaseStore {
  private readonly db: DynamoDBDocumentClient;
  private readonly table: string;
  private readonly clock: Clock;
  private readonly skewMs: number;
  private closed = false;

  constructor(private readonly options: DynamoDbLeaseStoreOptions) {
    this.db = options.documentClient;
    this.table = options.tableName;
    this.clock = options.clock ?? systemClock;
    this.skewMs = options.maxClockSkewMs ?? 0;
    if (!Number.isFinite(this.skewMs) || this.skewMs < 0) {
      throw new InvalidRequestError(`maxClockSkewMs must be a non-negative number of ms, found ${this.skewMs}`);
    }
  }

  /**
   * The conditional write that takes a free lease (absent, released, or lapsed for others) at the next
   * epoch, as of `now`: what tryAcquire sends, and what a DynamoDbJobStore puts into an admission
   * transaction to take the warm pool's claim with it.
   */
  takeWrite(name: string, holder: string, address: string, durationMs: number, now: number): ConditionalUpdate {
    return this.holderWrite(name, holder, address, durationMs, now, {
      epoch: 'if_not_exists(#epoch, :zero) + :one',
      condition: 'attribute_not_exists(#name) OR #released = :true OR #expires <= :freeForOthersAt OR (#holder = :holder AND #expires <= :now)',
      values: { ':true': true, ':zero': 0, ':now': now, ':freeForOthersAt': now - this.skewMs },
    });
  }

  /**
   * The conditional write that creates a lease that never existed at epoch 1 for `holder`, as of `now`:
   * what a DynamoDbJobStore puts into an admission transaction to give a new job's ResourceManager and
   * JobMaster leases to the ready JobManager it claims. Refused when the lease exists (whatever its
   * state), so the holder can count on epoch 1 without reading it.
   */
  grantWrite(name: string, holder: string, address: string, durationMs: number, now: number): ConditionalUpdate {
    return this.holderWrite(name, holder, address, durationMs, now, { epoch: ':one', condition: 'attribute_not_exists(#name)', values: {} });
  }

  /** A write that makes `holder` the lease's holder until now + durationMs, at the epoch `how.epoch` gives, under `how.condition`. */
  private holderWrite(
    name: string,
    holder: string,
    address: string,
    durationMs: number,
    now: number,
    how: { readonly epoch: string; readonly condition: string; readonly values: Record<string, unknown> },
  ): ConditionalUpdate {
    assertLeaseArgs(name, holder, durationMs);
    return {
      TableName: this.table,
      Key: { [A.name]: name },
      UpdateExpression: `SET #holder = :holder, #address = :address, #expires = :expires, #released = :false, #epoch = ${how.epoch}`,
      ConditionExpression: how.condition,
      ExpressionAttributeNames: names('#name', '#holder', '#address', '#expires', '#released', '#epoch'),
      ExpressionAttributeValues: { ':holder': holder, ':address': address, ':expires': now + durationMs, ':false': false, ':one': 1, ...how.values },
    };
  }

  async tryAcquire(name: string, holder: string, address: string, durationMs: number): Promise<Lease | undefined> {
    const now = this.clock.now();
    const write = this.takeWrite(name, holder, address, durationMs, now);
    const taken = await this.send('tryAcquire', () =>
      this.db.send(new UpdateCommand({ ...write, ReturnValues: 'ALL_NEW', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })),
    );
    if (!(taken instanceof ConditionFailed)) return toLease(taken.Attributes);
    const current = taken.item;
    // Held, unexpired: only its holder may extend it, at the same epoch. This is also how a take whose
    // answer was lost and retried by the SDK comes back: as the holder's own unexpired lease.
    if (current === undefined || current[A.holder] !== holder || current[A.released] === true || Number(current[A.expiresAtMs]) <= now) return undefined;
    return this.extend('tryAcquire', name, holder, Number(current[A.epoch]), durationMs, now, address);
  }

  async renew(name: string, holder: string, epoch: number, durationMs: number): Promise<Lease | undefined> {
    assertLeaseArgs(name, holder, durationMs);
    return this.extend('renew', name, holder, epoch, durationMs, this.clock.now());
  }

  private async extend(op: string, name: string, holder: string, epoch: number, durationMs: number, now: number, address?: string): Promise<Lease | undefined> {
    const result = await this.send(op, () =>
      this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { [A.name]: name },
          UpdateExpression: address === undefined ? 'SET #expires = :expires' : 'SET #expires = :expires, #address = :address',
          ConditionExpression: '#holder = :holder AND #epoch = :epoch AND #released = :false AND #expires > :now',
          ExpressionAttributeNames:
            address === undefined ? names('#holder', '#epoch', '#released', '#expires') : names('#holder', '#epoch', '#released', '#expires', '#address'),
          ExpressionAttributeValues: {
            ':holder': holder,
            ':epoch': epoch,
            ':false': false,
            ':now': now,
            ':expires': now + durationMs,
            ...(address !== undefined && { ':address': address }),
          },
          ReturnValues: 'ALL_NEW',
        }),
      ),
    );
    return result instanceof ConditionFailed ? undefined : toLease(result.Attributes);
  }

  async release(name: string, holder: string, epoch: number): Promise<boolean> {
    const now = this.clock.now();
    const release = (expire: boolean): Promise<ConditionFailed | object> =>
      this.send('release', () =>
        this.db.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { [A.name]: name },
            // Expiry moves back to now, never forward: DynamoDB has no min(), so a lease that already
            // lapsed keeps its expiry (the second attempt below).
            UpdateExpression: expire ? 'SET #released = :true, #expires = :now' : 'SET #released = :true',
            ConditionExpression: expire
              ? '#holder = :holder AND #epoch = :epoch AND #released = :false AND #expires >= :now'
              : '#holder = :holder AND #epoch = :epoch AND #released = :false',
            ExpressionAttributeNames: expire ? names('#holder', '#epoch', '#released', '#expires') : names('#holder', '#epoch', '#released'),
            ExpressionAttributeValues: { ':holder': holder, ':epoch': epoch, ':false': false, ':true': true, ...(expire && { ':now': now }) },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
    const first = await release(true);
    if (!(first instanceof ConditionFailed)) return true;
    const item = first.item;
    const stillOurs = item !== undefined && item[A.holder] === holder && Number(item[A.epoch]) === epoch && item[A.released] !== true;
    if (!stillOurs) return false;
    return !((await release(false)) instanceof ConditionFailed);
  }

  async get(name: string): Promise<Lease | undefined> {
    const out = await awsCall('DynamoDB', 'GetItem', `table ${this.table}`, () =>
      // Strongly consistent: leader retrieval must not see a lease older than a write that succeeded.
      this.db.send(new GetCommand({ TableName: this.table, Key: { [A.name]: name }, ConsistentRead: true })),
    );
    return out.Item === undefined ? undefined : toLease(out.Item);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.options.onClose?.();
  }

  private send<T>(op: string, write: () => Promise<T>): Promise<T | ConditionFailed> {
    return awsCall('DynamoDB', `UpdateItem (${op})`, `table ${this.table}`, () => conditionally(write));
  }
}

function toLease(item: Item | undefined): Lease {
  if (item === undefined) throw new Error('DynamoDB returned no attributes for ReturnValues ALL_NEW');
  return {
    name: String(item[A.name]),
    holder: String(item[A.holder]),
    epoch: Number(item[A.epoch]),
    expiresAtMs: Number(item[A.expiresAtMs]),
    address: String(item[A.address]),
  };
}
