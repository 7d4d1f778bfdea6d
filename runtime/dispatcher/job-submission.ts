// Job submission (Flink's Dispatcher.submitJob): POST /jobs validated in full before anything is written,
// the job id claimed with a conditional create of its record, the library and the JobGraph stored, the
// job put in line and admitted; a resubmission of the same graph completes a submission whose first try
// died, and the reconciler completes or ends one its submitter left unfinished (sweepSubmission).
import { blobKeys, sha256Hex } from '../blob/blob-store.js';
import { checkSinkTargets, checkSourcePaths } from '../blob/submission-checks.js';
import { ConflictError, errorMessage, OutputTargetError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { AdmissionState, type JobRecord } from '../ha/job-store.js';
import { JobStatus } from '../jobgraph/job-status.js';
import { WriteMode, writeModeOf, type JobGraph } from '../jobgraph/jobgraph.js';
import { parseJobGraph } from '../jobgraph/job-graph-schema.js';
import { validateJobGraph } from '../jobgraph/validate.js';
import { statefulOperatorsWithoutUid } from '../jobgraph/operator-uids.js';
import { reservationFor, type Reservation } from './admission.js';
import type { DispatcherServices } from './dispatcher-services.js';
import type { JobManagerRunners } from './jobmanager-runners.js';
import type { LibraryArtifacts } from './library-artifacts.js';
import { parseBody, SUBMIT_JOB_BODY } from './rest-bodies.js';

/** A submission that passed validation: everything the later steps write, computed before any write. */
interface Submission {
  readonly jobGraph: JobGraph;
  /** The library's bytes when they came with the request; undefined when it is stored already (and was checked there). */
  readonly library: Uint8Array | undefined;
  /** The canonical JobGraph bytes, stored as jobgraph.json; their hash names the graph in the record. */
  readonly graphBytes: Uint8Array;
  readonly graphSha256: string;
  readonly reservation: Reservation;
}

export class JobSubmission {
  private readonly log: Logger;

  constructor(
    private readonly deps: DispatcherServices,
    private readonly artifacts: LibraryArtifacts,
    private readonly runners: JobManagerRunners,
  ) {
    this.log = deps.logger.child({ component: 'dispatcher' });
  }

  /**
   * POST /jobs, in this order (docs/ARCHITECTURE.md, "Submission and admission"):
   * 1. validate everything, writing nothing;
   * 2. claim the job id: a conditional create of the record (SUBMITTING, carrying the graph's hash), before
   *    any blob of the job is written, so only the owner of the id ever writes them;
   * 3. store the library (content-addressed) and the JobGraph;
   * 4. get in line (WAITING);
   * 5. admit what fits and start those JobManagers.
   * A resubmission of the same graph that finds the record still SUBMITTING does steps 3-5 itself (the
   * same bytes under the same keys), so a client's retry completes a submission whose first try died.
   */
  async submitJob(body: unknown): Promise<{ jobId: JobId; existing: boolean }> {
    const submission = await this.validateSubmission(body);
    const { jobGraph, reservation } = submission;
    const now = this.deps.clock.now();
    const parallelism = Math.max(...jobGraph.vertices.map((v) => v.parallelism));
    const { created, record } = await this.deps.jobStore.create({
      jobId: jobGraph.jobId,
      name: jobGraph.name,
      status: JobStatus.INITIALIZING,
      epoch: 0,
      submittedAtMs: now,
      updatedAtMs: now,
      jobGraphKey: blobKeys.jobGraph(jobGraph.jobId),
      jobGraphSha256: submission.graphSha256,
      librarySha256: jobGraph.library.sha256,
      parallelism,
      exceptions: [],
      cancelRequested: false,
      admission: { state: AdmissionState.SUBMITTING, taskExecutors: reservation.taskExecutors },
    });
    if (!created) return this.resubmission(submission, record);
    this.log.info('job submitted', { jobId: jobGraph.jobId, name: jobGraph.name, parallelism, taskExecutors: reservation.taskExecutors });
    this.warnOfOperatorsWithoutUid(jobGraph);
    await this.completeSubmission(submission, record);
    return { jobId: jobGraph.jobId, existing: false };
  }

  /** A checkpointing job's stateful operators without uid(…): a warning in the job's log (`floe logs`), not a refusal. */
  private warnOfOperatorsWithoutUid(jobGraph: JobGraph): void {
    if (jobGraph.checkpointing === undefined && this.deps.config.checkpointingIntervalMs === 0) return;
    const missing = statefulOperatorsWithoutUid(jobGraph);
    if (missing.length === 0) return;
    this.log.warn(
      `${missing.length} stateful operator(s) of a checkpointing job have no uid(…): their state is stored under ids made from the job's shape, so a changed job cannot restore it from a savepoint; give each a uid`,
      { jobId: jobGraph.jobId, operators: missing.map((m) => `'${m.name}' (${m.kind}, stored as ${m.stateId})`) },
    );
  }

  /**
   * A checkpointing job's file sinks commit part files with its checkpoints (exactly once across restores)
   * and never replace what the target holds: writeMode 'overwrite' cannot be kept, so it is refused.
   */
  private refuseOverwriteWhenCheckpointing(jobGraph: JobGraph): void {
    if (jobGraph.checkpointing === undefined && this.deps.config.checkpointingIntervalMs === 0) return;
    for (const op of jobGraph.vertices.flatMap((v) => v.operators)) {
      if (op.kind !== 'sink.textFile' || writeModeOf(op) !== WriteMode.OVERWRITE) continue;
      throw new OutputTargetError(
        `sink '${op.name}' writes '${op.path}' with writeMode 'overwrite', but the job takes checkpoints: its file sink commits part files with each checkpoint and never replaces earlier output; write to a new or empty folder (writeMode 'no-overwrite'), or run the job without checkpointing`,
      );
    }
  }

  /** Step 1: every check a submission must pass, before anything is written. */
  private async validateSubmission(body: unknown): Promise<Submission> {
    const { jobGraph, library: rawLibrary } = parseBody(SUBMIT_JOB_BODY, body);
    const library = await this.artifacts.submittedLibrary(jobGraph, rawLibrary);
    validateJobGraph(jobGraph, library.exports);
    await checkSourcePaths(jobGraph, this.deps.config.fileOpenTimeoutMs, this.deps.sourceCheckFor);
    this.refuseOverwriteWhenCheckpointing(jobGraph);
    await checkSinkTargets(jobGraph, this.deps.config.fileOpenTimeoutMs, this.deps.outputStoreFor);
    const reservation = reservationFor(jobGraph, this.deps.config, this.deps.taskExecutorSizes);
    const graphBytes = canonicalJobGraphBytes(jobGraph);
    return { jobGraph, library: library.inline, graphBytes, graphSha256: sha256Hex(graphBytes), reservation };
  }

  /**
   * Steps 3-5; every write here is idempotent, so the owner and a resubmission may both do them. The
   * blobs go up together while the warm pool's places (and, on DynamoDB, the admission ledger) are read;
   * once both blobs are stored, one ledger step puts the job in line and, when nothing waits before it and
   * it fits, admits it naming the JobManager it goes to (a ready one, or the one launched for it).
   * `created` is the record as this request created it (a hint for the store).
   */
  private async completeSubmission(submission: Submission, created?: JobRecord): Promise<void> {
    const { jobId } = submission.jobGraph;
    const storeBlobs = (): Promise<unknown> =>
      Promise.all([
        submission.library === undefined ? undefined : this.artifacts.storeLibrary(submission.library),
        this.deps.blobStore.put(blobKeys.jobGraph(jobId), submission.graphBytes),
      ]);
    await this.runners.admitOnSubmission(jobId, submission.reservation.taskExecutors, storeBlobs, created);
  }

  /**
   * Same id, same JobGraph: the same job (idempotent); a first submission still writing is helped along.
   * Same id, other JobGraph: a conflict, and nothing is written.
   */
  private async resubmission(submission: Submission, record: JobRecord): Promise<{ jobId: JobId; existing: boolean }> {
    const { jobId } = submission.jobGraph;
    if (!(await this.isSameGraph(submission, record))) {
      throw new ConflictError(`job ${jobId} already exists with a different JobGraph; submit under a new job id`);
    }
    if (record.admission?.state === AdmissionState.SUBMITTING) await this.completeSubmission(submission);
    else await this.runners.admitWaiting();
    return { jobId: record.jobId, existing: true };
  }

  private async isSameGraph(submission: Submission, record: JobRecord): Promise<boolean> {
    if (record.jobGraphSha256 !== undefined) return record.jobGraphSha256 === submission.graphSha256;
    // A record from before graphs were hashed: compare with its stored graph, read the same way.
    const stored = await this.deps.blobStore.get(record.jobGraphKey);
    if (stored === undefined) return false;
    try {
      return sha256Hex(canonicalJobGraphBytes(parseJobGraph(JSON.parse(Buffer.from(stored).toString('utf8'))))) === submission.graphSha256;
    } catch {
      return false;
    }
  }

  /**
   * A record still SUBMITTING long after it was written: its submitter died between claiming the id and
   * getting the job in line, and no client sent the request again. When the JobGraph and the library are
   * stored and hash right, the job gets in line as that request would have put it; otherwise it ends
   * FAILED naming what is missing (CANCELED if a cancel came meanwhile). Both steps are conditioned on the
   * record being SUBMITTING, so a submitter that is alive after all loses nothing it finished. A store
   * that fails is logged and the next reconcile tries again.
   */
  async sweepSubmission(record: JobRecord, now: number): Promise<void> {
    const { jobId } = record;
    const ageMs = now - record.submittedAtMs;
    try {
      const missing = await this.missingFromSubmission(record);
      if (missing === undefined) {
        const after = await this.deps.jobStore.enqueue(jobId);
        this.log.warn('completed a submission its submitter left unfinished', { jobId, ageMs, admission: after.admission?.state, status: after.status });
        return;
      }
      const message =
        `the submission of job ${jobId} did not complete within 'dispatcher.submission-timeout' (${this.deps.config.submissionTimeoutMs} ms; ` +
        `it began ${ageMs} ms ago): ${missing}, so its submitter stopped before the job got in line; submit the job again`;
      const { abandoned, record: after } = await this.deps.jobStore.abandonSubmission(jobId, { timestampMs: now, message });
      if (abandoned) this.log.warn('ended a submission its submitter left unfinished', { jobId, ageMs, status: after?.status, missing });
    } catch (error) {
      this.log.error('cannot complete or end a submission its submitter left unfinished; the next reconcile tries again', {
        jobId,
        error: errorMessage(error),
      });
    }
  }

  /** What a SUBMITTING record's job lacks in the blob store, or undefined when its JobGraph and library are there and hash right. */
  private async missingFromSubmission(record: JobRecord): Promise<string | undefined> {
    const graph = await this.deps.blobStore.get(record.jobGraphKey);
    if (graph === undefined) return `its JobGraph was not stored (${record.jobGraphKey})`;
    if (record.jobGraphSha256 !== undefined && sha256Hex(graph) !== record.jobGraphSha256) {
      return `the JobGraph stored under ${record.jobGraphKey} is not the one submitted (sha256 ${sha256Hex(graph)}, expected ${record.jobGraphSha256})`;
    }
    if (!(await this.artifacts.hasValidLibrary(record.librarySha256))) return `its library ${record.librarySha256} was not stored`;
    return undefined;
  }
}

/**
 * The JobGraph as stored and hashed: JSON with every object's keys sorted, so two clients that send the
 * same graph with fields in another order submit the same job.
 */
export function canonicalJobGraphBytes(graph: JobGraph): Uint8Array {
  return Buffer.from(JSON.stringify(sortKeys(graph)));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = sortKeys(v);
  }
  return out;
}
