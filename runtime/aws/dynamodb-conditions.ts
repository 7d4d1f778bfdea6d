// Conditional writes of the DynamoDB adapters: what a failed condition tells them (that it failed, and the
// item as it was, ReturnValuesOnConditionCheckFailure: ALL_OLD, unmarshalled like the document client's
// results), what a cancelled transaction tells them, and the one compare-and-set loop they all run
// (read, compute, write on condition that what was read still holds, try again on a lost race).
import { randomUUID } from 'node:crypto';
import { ConditionalCheckFailedException, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { processHoldingClock } from '../core/clock.js';
import { retryDelayMs, sleepOn, type RetryPolicy } from '../core/retry.js';
import { awsCall } from './aws-errors.js';

export type Item = Record<string, unknown>;

/** One conditional Update, as sent alone or as an item of a TransactWriteItems. */
export interface ConditionalUpdate {
  readonly TableName: string;
  readonly Key: Record<string, unknown>;
  readonly UpdateExpression: string;
  readonly ConditionExpression: string;
  readonly ExpressionAttributeNames: Record<string, string>;
  readonly ExpressionAttributeValues: Record<string, unknown>;
}

export class ConditionFailed {
  /** The item when the condition was evaluated; undefined when there was none. */
  constructor(readonly item: Item | undefined) {}
}

/**
 * Runs a conditional write; a failed condition comes back as a ConditionFailed value rather than an
 * error, so each caller must decide what it means (lost lease, stale writer, existing job).
 */
export async function conditionally<T>(write: () => Promise<T>): Promise<T | ConditionFailed> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException || (error as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException') {
      const raw = (error as { Item?: Record<string, AttributeValue> }).Item;
      return new ConditionFailed(raw === undefined ? undefined : unmarshallItem(raw));
    }
    throw error;
  }
}

/** The exception's item arrives in wire format even through the document client. */
export function unmarshallItem(raw: Record<string, AttributeValue>): Item {
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, unmarshallValue(v)]));
}

function unmarshallValue(v: AttributeValue): unknown {
  if (v.S !== undefined) return v.S;
  if (v.N !== undefined) return Number(v.N);
  if (v.BOOL !== undefined) return v.BOOL;
  if (v.NULL !== undefined) return null;
  if (v.M !== undefined) return unmarshallItem(v.M);
  if (v.L !== undefined) return v.L.map(unmarshallValue);
  if (v.SS !== undefined) return new Set(v.SS);
  if (v.NS !== undefined) return new Set(v.NS.map(Number));
  if (v.B !== undefined) return v.B;
  if (v.BS !== undefined) return new Set(v.BS);
  return undefined;
}

/** What one try of a compare-and-set answers when its condition failed because the item changed after its read. */
export const LOST_RACE: unique symbol = Symbol('lost race');
export type LostRace = typeof LOST_RACE;

export interface CompareAndSetOptions {
  /** Tries in all, the first included. */
  readonly maxAttempts: number;
  /** The pause before each retry. @default - none: the next try reads again at once */
  readonly backoff?: RetryPolicy;
  /** The error thrown once every try lost its race. */
  readonly contended: () => Error;
}

/**
 * Contended items (the admission ledger, the upgrade marker): a full-jitter pause before retry n of
 * 0..min(200, 5 * 2^n) ms, so that writers that lost a race to each other spread out.
 */
export const CONTENDED_ITEM_BACKOFF: RetryPolicy = { initialIntervalMs: 5, backoffCoefficient: 2, maximumIntervalMs: 100, jitter: 1, maximumAttempts: 40 };

/**
 * The compare-and-set loop: `attempt` reads what it needs, computes the change and writes it on condition
 * that what it read still holds. It answers LOST_RACE when the condition failed for a reason a fresh read
 * resolves (the item changed in between); any other answer (or error) ends the loop. The pause between
 * tries is real time (the writers it waits for are other processes), never the caller's clock.
 */
export async function compareAndSet<T>(options: CompareAndSetOptions, attempt: (n: number) => Promise<T | LostRace>): Promise<T> {
  for (let n = 1; n <= options.maxAttempts; n++) {
    if (n > 1 && options.backoff !== undefined) await sleepOn(processHoldingClock, retryDelayMs(options.backoff, n - 1));
    const out = await attempt(n);
    if (out !== LOST_RACE) return out;
  }
  throw options.contended();
}

/** An Update for a transaction, with or without a condition. */
export type PlainUpdate = Omit<ConditionalUpdate, 'ConditionExpression'> & { readonly ConditionExpression?: string };

export type TransactItems = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>;

/** A transaction DynamoDB cancelled: a condition failed or another transaction touched an item. */
export class TransactionCancelled {
  /** A code per item, in the order of the transaction ('None' for an item that was not the cause). */
  constructor(readonly reasons: readonly string[]) {}
}

/**
 * One TransactWriteItems; a cancelled transaction comes back as a TransactionCancelled value, any other
 * failure as awsCall's error. The client request token makes the SDK's own retries of this very request
 * idempotent.
 */
export async function transactWrite(db: DynamoDBDocumentClient, op: string, resource: string, items: TransactItems): Promise<true | TransactionCancelled> {
  return awsCall('DynamoDB', op, resource, async () => {
    try {
      await db.send(new TransactWriteCommand({ TransactItems: items, ClientRequestToken: randomUUID() }));
      return true as const;
    } catch (error) {
      const cancelled = cancellationOf(error);
      if (cancelled === undefined) throw error;
      return cancelled;
    }
  });
}

/** The TransactionCancelled a transaction's error stands for (a conflict has no reasons), or undefined for any other error. */
export function cancellationOf(error: unknown): TransactionCancelled | undefined {
  const name = (error as { name?: unknown } | null)?.name;
  if (name !== 'TransactionCanceledException' && name !== 'TransactionConflictException') return undefined;
  return new TransactionCancelled(((error as { CancellationReasons?: { Code?: string }[] }).CancellationReasons ?? []).map((r) => r.Code ?? 'None'));
}
