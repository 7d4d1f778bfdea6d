// What a failed DynamoDB condition tells the adapters: that it failed, and the item as it was
// (ReturnValuesOnConditionCheckFailure: ALL_OLD), unmarshalled like the document client's results.
import { ConditionalCheckFailedException, type AttributeValue } from '@aws-sdk/client-dynamodb';

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
