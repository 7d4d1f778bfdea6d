// The DynamoDB tables and the S3 bucket Floe uses, as plain data: the one source of truth for the adapters,
// the emulator test harness that creates them, and the CDK construct that deploys them.

export type KeyAttributeType = 'S' | 'N' | 'B';

export interface TableDefinition {
  /** Appended to a deployment's prefix: `<prefix>-<suffix>`. */
  readonly suffix: string;
  readonly partitionKey: { readonly name: string; readonly type: KeyAttributeType };
  /** Epoch-seconds attribute after which DynamoDB may delete an item; absent when items must never expire. */
  readonly timeToLiveAttribute?: string;
  /** Every table is on-demand: leases and job records are small, bursty and rare. */
  readonly billingMode: 'PAY_PER_REQUEST';
  /** Global secondary indexes, each projecting every attribute. */
  readonly indexes?: readonly GlobalIndexDefinition[];
}

export interface GlobalIndexDefinition {
  readonly name: string;
  readonly partitionKey: { readonly name: string; readonly type: KeyAttributeType };
  readonly sortKey: { readonly name: string; readonly type: KeyAttributeType };
}

/**
 * The job list, newest first: every job item carries the same `listKey` value, so one Query on this
 * index, sorted by submittedAtMs and read backwards, pages through the jobs without a Scan. (One
 * partition holds every job: fine for a cluster's job history, whose writes are a few per job.) Items
 * that are not jobs (the admission ledger) have no `listKey` and stay out of it.
 */
export const jobsBySubmissionIndex = {
  name: 'bySubmittedAt',
  partitionKey: { name: 'listKey', type: 'S' },
  sortKey: { name: 'submittedAtMs', type: 'N' },
  /** The one value of `listKey`. */
  listKeyValue: 'jobs',
} as const satisfies GlobalIndexDefinition & { listKeyValue: string };

/**
 * The active jobs (isActiveRecord: not ended, or still holding or awaiting a reservation): only their
 * items carry `activeKey`, so this sparse index holds them alone and one Query reads them, however many
 * ended jobs the table keeps. A job's item loses the attribute in the write that makes it history.
 */
export const activeJobsIndex = {
  name: 'activeJobs',
  partitionKey: { name: 'activeKey', type: 'S' },
  sortKey: { name: 'submittedAtMs', type: 'N' },
  /** The one value of `activeKey`. */
  activeKeyValue: 'active',
} as const satisfies GlobalIndexDefinition & { activeKeyValue: string };

/**
 * Leases, one item per lease name (`rm/<job>`, `jm/<job>`). Items are never deleted and have no TTL:
 * a deleted lease would hand out epoch 1 again, and a fencing token must never repeat.
 */
export const leaseTable = {
  suffix: 'leases',
  partitionKey: { name: 'name', type: 'S' },
  billingMode: 'PAY_PER_REQUEST',
  attributes: {
    name: 'name',
    holder: 'holder',
    address: 'address',
    /** Number; the fencing token. */
    epoch: 'epoch',
    /** Number, wall-clock ms of the holder's clock. */
    expiresAtMs: 'expiresAtMs',
    /** Boolean. */
    released: 'released',
  },
} as const satisfies TableDefinition & { attributes: Record<string, string> };

/** Job records, one item per job; the record's fields are top-level attributes of the item. */
export const jobTable = {
  suffix: 'jobs',
  partitionKey: { name: 'jobId', type: 'S' },
  billingMode: 'PAY_PER_REQUEST',
  /** Set only on ended jobs, and only when a retention is configured (DynamoDbJobStore `endedJobRetentionMs`). */
  timeToLiveAttribute: 'expiresAtEpochS',
  indexes: [jobsBySubmissionIndex, activeJobsIndex],
  attributes: {
    jobId: 'jobId',
    submittedAtMs: 'submittedAtMs',
    /** Partition key of jobsBySubmissionIndex; not a field of the record. */
    listKey: 'listKey',
    /** Partition key of activeJobsIndex, present while the job is active; not a field of the record. */
    activeKey: 'activeKey',
    /**
     * True on an ended job once the ended-job counts include it (set by the write that counts it), so the
     * one-time pass over records that ended before the counts existed counts each of them once.
     */
    endCounted: 'endCounted',
    status: 'status',
    epoch: 'epoch',
    exceptions: 'exceptions',
    cancelRequested: 'cancelRequested',
    updatedAtMs: 'updatedAtMs',
    /** Id of the last write, so a write the SDK retried after a lost response is recognised as done. */
    writeId: 'writeId',
  },
} as const satisfies TableDefinition & { attributes: Record<string, string> };

/**
 * The bucket of JobGraphs, job libraries and results, all under one key prefix. Objects are written
 * whole (PUT or multipart upload) and never appended to.
 */
export const blobBucket = {
  suffix: 'blobs',
} as const;

/** `<prefix>-<suffix>`; DynamoDB table names allow [a-zA-Z0-9_.-], 3 to 255 characters. */
export function tableName(prefix: string, table: { readonly suffix: string }): string {
  return `${prefix}-${table.suffix}`;
}
