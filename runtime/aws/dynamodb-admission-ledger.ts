// The admission ledger of the DynamoDB JobStore: one more item of the job table (its key can never be a
// job id) with the waiting line and the admitted jobs. Every admission step is one TransactWriteItems of
// the ledger, conditioned on the version it read, and the records it names, each conditioned on the
// admission state it read, so concurrent Dispatchers (Lambdas) never admit past the bounds or admit a job
// twice; a step that lost a race is planned again from fresh reads.
import { FloeError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import {
  admittedRecord,
  applyAbandonSubmission,
  applyCancelWaiting,
  applyEnqueue,
  applyEnqueueAndAdmit,
  applyRelease,
  assertAdmissionBounds,
  EMPTY_LEDGER,
  isWaitingRecord,
  ledgerAfterAdmission,
  parseLedger,
  planAdmission,
  refusalException,
  refusedRecord,
} from '../ha/job-rules.js';
import {
  AdmissionState,
  type AdmissionBounds,
  type AdmissionEntry,
  type AdmissionLedger,
  type AdmissionOutcome,
  type EnqueueAndAdmitOptions,
  type JobException,
  type JobRecord,
} from '../ha/job-store.js';
import {
  compareAndSet,
  CONTENDED_ITEM_BACKOFF,
  LOST_RACE,
  transactWrite,
  TransactionCancelled,
  type ConditionalUpdate,
  type LostRace,
  type TransactItems,
} from './dynamodb-conditions.js';
import { countEndedWrite } from './dynamodb-job-counts.js';
import { A, endingWrites, readItem, readRecord, recordWrite, type JobTableContext } from './dynamodb-job-items.js';
import type { DynamoDbLeaseStore } from './dynamodb-lease-store.js';

const LEDGER = { waiting: 'waiting', admitted: 'admitted', version: 'version' } as const;

/** What one planned admission step writes: the ledger (when it changes) and record updates. */
interface LedgerStep<T> {
  readonly result: T;
  readonly ledger?: AdmissionLedger;
  readonly writes?: readonly ConditionalUpdate[];
  /** Plan again after this write: it only removed stale entries. */
  readonly again?: boolean;
  /** Told why the transaction was cancelled (a code per item, in order: the writes, then the ledger) before the step is planned again. */
  readonly onCancelled?: (reasons: readonly string[]) => void;
}

type LedgerRead = { ledger: AdmissionLedger; version: number };

/** The condition of a write planned from a SUBMITTING record: still SUBMITTING, with the cancel flag and status it had. */
const SUBMITTING_CONDITION = '#admission.#state = :expectedState AND #cancel = :expectedCancel AND #status = :expectedStatus';
/** The condition of a write planned from a record in the admission state `state`. */
const IN_STATE_CONDITION = '#admission.#state = :expectedState';

function submittingExpected(before: JobRecord): { names: Record<string, string>; values: Record<string, unknown> } {
  return {
    names: { '#state': 'state', '#cancel': A.cancelRequested, '#status': A.status },
    values: { ':expectedState': AdmissionState.SUBMITTING, ':expectedCancel': before.cancelRequested, ':expectedStatus': before.status },
  };
}

const expectState = (state: AdmissionState): { names: Record<string, string>; values: Record<string, unknown> } => ({
  names: { '#state': 'state' },
  values: { ':expectedState': state },
});

export class DynamoDbAdmissionLedger {
  constructor(
    private readonly ctx: JobTableContext,
    /** The ledger item's key. */
    private readonly ledgerKey: string,
    /** The lease store whose takes and grants may join an admission's transaction. */
    private readonly leaseStore: DynamoDbLeaseStore | undefined,
  ) {}

  async enqueue(jobId: JobId): Promise<JobRecord> {
    return this.step<JobRecord>('enqueue', jobId, async (ledger) => {
      const before = await readRecord(this.ctx, jobId);
      const { record, ledger: after, changed } = applyEnqueue(jobId, before, ledger, this.ctx.clock.now());
      if (!changed) return { result: record };
      return {
        result: record,
        // A cancel requested meanwhile ends the job without putting it in line: the ledger stays as it is.
        ...(after !== ledger ? { ledger: after } : {}),
        writes: [recordWrite(this.ctx, before!, record, SUBMITTING_CONDITION, submittingExpected(before!))],
      };
    });
  }

  /**
   * One ledger step: the record goes SUBMITTING → WAITING, or straight to ADMITTED when the line is empty
   * and it fits. The first try plans from `options.expected` (the caller just wrote it), sparing a read,
   * and reads the ledger while the caller's `jobManager` promise (its blob writes) is still under way;
   * every write is conditioned on what the plan read, so a stale hint or ledger only costs a retry.
   */
  async enqueueAndAdmit(
    jobId: JobId,
    bounds: AdmissionBounds,
    options: EnqueueAndAdmitOptions = {},
  ): Promise<{ record: JobRecord; admitted?: AdmissionEntry; leaseTaken?: boolean }> {
    assertAdmissionBounds(bounds);
    let hint = options.expected?.jobId === jobId ? options.expected : undefined;
    const pending = options.jobManager;
    const early = this.read();
    // Rejected or not, it is only used once `pending` settled (and its error is the one thrown).
    early.catch(() => undefined);
    const jobManager = await pending;
    const { leaseStore } = this;
    let take = leaseStore === undefined ? undefined : await options.takeLease;
    let leaseRefused = false;
    let firstRead: Promise<LedgerRead> | undefined = early;
    return this.step<{ record: JobRecord; admitted?: AdmissionEntry; leaseTaken?: boolean }>(
      'enqueueAndAdmit',
      jobId,
      async (ledger) => {
        const before = hint ?? (await readRecord(this.ctx, jobId));
        hint = undefined;
        const now = this.ctx.clock.now();
        const { record, ledger: after, changed, admitted } = applyEnqueueAndAdmit(jobId, before, ledger, bounds, now, jobManager);
        if (!changed) return { result: { record } };
        const writes = [recordWrite(this.ctx, before!, record, SUBMITTING_CONDITION, submittingExpected(before!))];
        // The lease (and the leases it grants) go with an admission only; held by another, or a grant that
        // exists already, they are all left out and the admission planned again.
        const leaseAt =
          admitted !== undefined && take !== undefined
            ? writes.push(leaseStore!.takeWrite(take.name, take.holder, take.address, take.durationMs, now)) - 1
            : -1;
        if (leaseAt >= 0) for (const g of take!.grants ?? []) writes.push(leaseStore!.grantWrite(g.name, g.holder, g.address, g.durationMs, now));
        const leaseEnd = writes.length;
        const leaseTaken = leaseAt >= 0 ? true : admitted !== undefined && leaseRefused ? false : undefined;
        return {
          result: { record, ...(admitted !== undefined ? { admitted } : {}), ...(leaseTaken !== undefined ? { leaseTaken } : {}) },
          ...(after !== ledger ? { ledger: after } : {}),
          writes,
          onCancelled: (reasons) => {
            if (leaseAt >= 0 && reasons.slice(leaseAt, leaseEnd).includes('ConditionalCheckFailed')) {
              take = undefined;
              leaseRefused = true;
            }
          },
        };
      },
      () => {
        const read = firstRead;
        firstRead = undefined;
        return read;
      },
    );
  }

  async admit(bounds: AdmissionBounds): Promise<AdmissionOutcome> {
    assertAdmissionBounds(bounds);
    const admitted: AdmissionEntry[] = [];
    const refused: AdmissionEntry[] = [];
    const expectWaiting = expectState(AdmissionState.WAITING);
    // One transaction per step of at most MAX_ADMISSIONS_PER_STEP jobs; steps repeat while any job moves.
    for (;;) {
      const step = await this.step<{ admit: AdmissionEntry[]; refuse: AdmissionEntry[] }>('admit', undefined, async (ledger) => {
        const now = this.ctx.clock.now();
        const plan = planAdmission(ledger, bounds);
        const records = new Map<string, JobRecord | undefined>();
        for (const e of [...plan.admit, ...plan.refuse]) records.set(e.jobId, await readRecord(this.ctx, e.jobId));
        // Entries whose record moved on (or is gone) would block the line forever: drop them, then plan again.
        const stale = new Set([...records].filter(([, r]) => !isWaitingRecord(r)).map(([id]) => id));
        if (stale.size > 0)
          return { again: true, result: { admit: [], refuse: [] }, ledger: { ...ledger, waiting: ledger.waiting.filter((e) => !stale.has(e.jobId)) } };
        if (plan.admit.length === 0 && plan.refuse.length === 0) return { result: plan };
        const writes = [
          ...plan.admit.map((e) => recordWrite(this.ctx, records.get(e.jobId)!, admittedRecord(records.get(e.jobId)!, now), IN_STATE_CONDITION, expectWaiting)),
          ...plan.refuse.map((e) => {
            const before = records.get(e.jobId)!;
            return recordWrite(this.ctx, before, refusedRecord(before, refusalException(e, bounds, now), now), IN_STATE_CONDITION, expectWaiting);
          }),
        ];
        return {
          result: { admit: plan.admit.map((e) => ({ ...e, sinceMs: now })), refuse: plan.refuse },
          ledger: ledgerAfterAdmission(ledger, plan, now),
          writes,
        };
      });
      admitted.push(...step.admit);
      refused.push(...step.refuse);
      if (step.admit.length === 0 && step.refuse.length === 0) return { admitted, refused };
    }
  }

  async release(jobId: JobId): Promise<{ released: boolean; record: JobRecord | undefined }> {
    return this.step<{ released: boolean; record: JobRecord | undefined }>('release', jobId, async (ledger) => {
      const before = await readRecord(this.ctx, jobId);
      const { record, ledger: after, released } = applyRelease(jobId, before, ledger, this.ctx.clock.now());
      const ledgerChange = after !== ledger ? { ledger: after } : {};
      if (!released) return { result: { released, record }, ...ledgerChange };
      return {
        result: { released, record },
        ...ledgerChange,
        writes: [recordWrite(this.ctx, before!, record!, IN_STATE_CONDITION, expectState(AdmissionState.ADMITTED))],
      };
    });
  }

  async abandonSubmission(jobId: JobId, exception: JobException): Promise<{ abandoned: boolean; record: JobRecord | undefined }> {
    // The ledger does not change (SUBMITTING jobs are not in it); the step's retry on a lost race is the point.
    return this.step<{ abandoned: boolean; record: JobRecord | undefined }>('abandonSubmission', jobId, async () => {
      const before = await readRecord(this.ctx, jobId);
      const { record, abandoned } = applyAbandonSubmission(before, exception, this.ctx.clock.now());
      if (!abandoned) return { result: { abandoned, record } };
      return { result: { abandoned, record }, writes: [recordWrite(this.ctx, before!, record!, SUBMITTING_CONDITION, submittingExpected(before!))] };
    });
  }

  async cancelWaiting(jobId: JobId): Promise<{ canceled: boolean; record: JobRecord | undefined }> {
    return this.step<{ canceled: boolean; record: JobRecord | undefined }>('cancelWaiting', jobId, async (ledger) => {
      const before = await readRecord(this.ctx, jobId);
      const { record, ledger: after, canceled } = applyCancelWaiting(jobId, before, ledger, this.ctx.clock.now());
      if (!canceled) return { result: { canceled, record } };
      return {
        result: { canceled, record },
        ledger: after,
        writes: [recordWrite(this.ctx, before!, record!, IN_STATE_CONDITION, expectState(AdmissionState.WAITING))],
      };
    });
  }

  async read(): Promise<LedgerRead> {
    const item = await readItem(this.ctx, 'GetItem (admission ledger)', this.ledgerKey);
    if (item === undefined) return { ledger: EMPTY_LEDGER, version: 0 };
    const version = item[LEDGER.version];
    return { ledger: parseLedger(item, `table ${this.ctx.table}, item ${this.ledgerKey}`), version: typeof version === 'number' ? version : 0 };
  }

  /**
   * One admission step: reads the ledger, lets `plan` read what it needs and decide, then writes the new
   * ledger (conditioned on the version read) and the records in one transaction; a cancelled transaction
   * is planned again from fresh reads. A plan with `again` (it only cleaned the ledger) is planned again,
   * as a step of its own, once its write went through.
   */
  private async step<T>(
    op: string,
    jobId: JobId | undefined,
    plan: (ledger: AdmissionLedger) => Promise<LedgerStep<T>>,
    /** A read of the ledger already under way, for the first try (undefined: read now). */
    readAhead?: () => Promise<LedgerRead> | undefined,
  ): Promise<T> {
    const done = await compareAndSet<{ result: T } | 'again'>(
      {
        maxAttempts: CONTENDED_ITEM_BACKOFF.maximumAttempts,
        backoff: CONTENDED_ITEM_BACKOFF,
        contended: () =>
          new FloeError(
            'STORE_CONTENDED',
            `${op}${jobId === undefined ? '' : ` of job ${jobId}`} in table ${this.ctx.table} lost ${CONTENDED_ITEM_BACKOFF.maximumAttempts} races in a row for the admission ledger to other Dispatchers; retry`,
            {
              retryable: true,
            },
          ),
      },
      async () => {
        const { ledger, version } = await (readAhead?.() ?? this.read());
        const step = await plan(ledger);
        const outcome = await this.write(op, step, version);
        if (outcome instanceof TransactionCancelled) {
          step.onCancelled?.(outcome.reasons);
          return LOST_RACE as LostRace;
        }
        return step.again === true ? 'again' : { result: step.result };
      },
    );
    return done === 'again' ? this.step(op, jobId, plan) : done.result;
  }

  /** The step's transaction: the record writes, then the ledger, then the counts of the jobs it ends (nothing to write: true). */
  private async write<T>(op: string, step: LedgerStep<T>, version: number): Promise<true | TransactionCancelled> {
    const items: TransactItems = (step.writes ?? []).map((w) => ({ Update: w }));
    // The jobs this step ends are counted in the same transaction (after the record writes, so that
    // cancellation reasons keep their order: the writes, then the ledger, then the counts).
    const ended = (step.writes ?? []).flatMap((w) => endingWrites.get(w) ?? []);
    if (step.ledger !== undefined) {
      items.push({
        Put: {
          TableName: this.ctx.table,
          Item: { [A.jobId]: this.ledgerKey, [LEDGER.waiting]: step.ledger.waiting, [LEDGER.admitted]: step.ledger.admitted, [LEDGER.version]: version + 1 },
          ...(version === 0
            ? { ConditionExpression: 'attribute_not_exists(#jobId)', ExpressionAttributeNames: { '#jobId': A.jobId } }
            : {
                ConditionExpression: '#version = :version',
                ExpressionAttributeNames: { '#version': LEDGER.version },
                ExpressionAttributeValues: { ':version': version },
              }),
        },
      });
    }
    if (ended.length > 0) items.push({ Update: countEndedWrite(this.ctx, ended, this.ctx.clock.now()) });
    if (items.length === 0) return true;
    return transactWrite(this.ctx.db, `TransactWriteItems (${op})`, `table ${this.ctx.table}`, items);
  }
}
