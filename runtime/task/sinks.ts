// Sinks at the end of a task's chain: the collect sink (records back to the client through the JobMaster)
// and the text file sink: on bounded input one part file per subtask, staged per attempt and committed by
// the JobMaster; on unbounded input part files rolled into the target as the job runs (rolling-file-sink.ts).
// In a checkpointing job, bounded or not, the file sink rolls part files that commit in two phases with the
// job's checkpoints (exactly once across restores); the JobMaster stages and commits nothing for it.
import { open, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { currentJobDataCredentials, type JobDataCredentials } from '../blob/data-credentials.js';
import { outputStoreFor } from '../blob/file-systems.js';
import type { RollingPartFiles, StagedPart } from '../blob/output-store.js';
import { rollingPartNumber } from '../blob/rolling-parts.js';
import { systemClock } from '../core/clock.js';
import { withOpenDeadline } from '../core/deadline.js';
import { errorMessage, FloeError } from '../core/errors.js';
import { findUnencodable, RecordEncodingError } from '../network/record-check.js';
import { DEFAULT_ROLLING_POLICY, type OperatorSpec } from '../jobgraph/jobgraph.js';
import type { TaskDeploymentDescriptor, TaskResult } from '../protocol/task-deployment.js';
import { clockProcessingTime, defaultLine, RollingFileSink } from './rolling-file-sink.js';
import type { CheckpointedOperator, ProcessingTimeService } from './stream-operator.js';
import { sinkConnectorFactory, sinkFunctionRef } from './sink-connectors.js';
import { functionOf, noteErrors, TaskSetupError, type Emit } from './task-io.js';

export interface Sink {
  readonly emit: Emit;
  close(): Promise<void>;
  abort(): Promise<void>;
  readonly result?: () => Pick<TaskResult, 'collected' | 'collectedTruncated' | 'stagedPart'>;
  /** The sink's checkpoint hooks (a file sink's two-phase commit in a checkpointing job). */
  readonly checkpointed?: CheckpointedOperator | undefined;
}

class CollectSink implements Sink {
  private readonly records: unknown[] = [];
  private truncated = false;
  constructor(
    private readonly maxRecords: number,
    private readonly name: string,
  ) {}
  readonly emit: Emit = (r) => {
    // The result travels as JSON to the JobMaster and the client.
    const bad = findUnencodable(r, 'json');
    if (bad !== undefined)
      throw new RecordEncodingError(
        `collect sink '${this.name}' received a record it cannot return to the client: ${bad}; collected records may hold strings, finite numbers, booleans, null, and arrays / plain objects of them`,
      );
    if (this.records.length < this.maxRecords) this.records.push(r);
    else this.truncated = true;
  };
  async close(): Promise<void> {}
  async abort(): Promise<void> {}
  readonly result = (): Pick<TaskResult, 'collected' | 'collectedTruncated'> => ({ collected: this.records, collectedTruncated: this.truncated });
}

const FLUSH_BYTES = 64 * 1024;

/** One line per record into `<stagingDir>/part-<subtask>`; fsynced before the task may finish. */
class TextFileSink implements Sink {
  private pending: string[] = [];
  private pendingChars = 0;
  private handle: FileHandle | undefined;

  /** Set for a remote staging location (S3): the part is written locally, then uploaded on close. */
  private upload: (() => Promise<StagedPart>) | undefined;
  /** What was staged, once closed: reported to the JobMaster with the task's end. */
  private staged: StagedPart | undefined;

  private constructor(
    readonly path: string,
    private readonly encode: (record: unknown) => string,
  ) {}

  /**
   * Makes the attempt's staging folder and opens its part file, within 'execution.file-open.timeout':
   * a filesystem that never answers (a hung mount, /proc) fails the task naming the path instead of
   * holding it forever. A file opened after the deadline is closed.
   */
  static async open(
    stagingLocation: string,
    subtaskIndex: number,
    sinkName: string,
    target: string,
    timeoutMs: number,
    jobId: string,
    encode: (record: unknown) => string,
    credentials?: JobDataCredentials,
  ): Promise<TextFileSink> {
    const store = await outputStoreFor(stagingLocation, currentJobDataCredentials(jobId, credentials));
    const opening = (async () => {
      let localDir: string;
      try {
        localDir = await store.openAttemptStaging(stagingLocation);
      } catch (error) {
        throw sinkOpenError(sinkName, target, `its staging folder '${stagingLocation}'`, error);
      }
      const path = join(localDir, `part-${subtaskIndex}`);
      try {
        return { localDir, path, handle: await open(path, 'w') };
      } catch (error) {
        throw sinkOpenError(sinkName, target, `its part file '${path}'`, error);
      }
    })();
    const opened = await withOpenDeadline(opening, {
      timeoutMs,
      what: `text sink '${sinkName}' opening its part file in '${stagingLocation}' (for '${target}')`,
      onLate: (late) => void late.handle.close().catch(() => undefined),
    });
    const sink = new TextFileSink(opened.path, encode);
    sink.handle = opened.handle;
    if (store.remote) {
      sink.upload = async () => {
        try {
          // With the job's latest credentials: its JobMaster renews them while a long task runs.
          const uploading = await outputStoreFor(stagingLocation, currentJobDataCredentials(jobId, credentials));
          return await uploading.uploadPart(stagingLocation, subtaskIndex, sink.path);
        } finally {
          await rm(opened.localDir, { recursive: true, force: true });
        }
      };
    }
    return sink;
  }

  readonly emit: Emit = (r) => {
    const line = this.encode(r);
    if (typeof line !== 'string')
      throw new TypeError(`the file sink's encoder must return the record's line as a string, returned ${line === null ? 'null' : typeof line}`);
    this.pending.push(line);
    this.pendingChars += line.length + 1;
    if (this.pendingChars >= FLUSH_BYTES) return this.flush();
  };

  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const text = this.pending.join('\n') + '\n';
    this.pending = [];
    this.pendingChars = 0;
    await this.handle!.write(text);
  }

  async close(): Promise<void> {
    await this.flush();
    await this.handle!.sync();
    await this.handle!.close();
    this.handle = undefined;
    this.staged = this.upload !== undefined ? await this.upload() : { size: (await stat(this.path)).size };
  }

  readonly result = (): Pick<TaskResult, 'stagedPart'> => (this.staged !== undefined ? { stagedPart: this.staged } : {});

  async abort(): Promise<void> {
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
    if (this.upload !== undefined) await rm(dirname(this.path), { recursive: true, force: true }).catch(() => undefined);
  }
}

function sinkOpenError(sinkName: string, target: string, what: string, error: unknown): FloeError {
  if (error instanceof FloeError && error.code !== 'IO') return error;
  return new FloeError('SINK_OPEN', `text sink '${sinkName}' (writing '${target}') cannot open ${what}: ${errorMessage(error)}`, { cause: error });
}

/**
 * The sink that ends the task's chain, if its last operator is one. `userFunctions` hold a file sink's
 * encoder; `processingTime` is what a streaming file sink rolls by (the task's, once its chain has one).
 */
export async function openSink(
  tdd: TaskDeploymentDescriptor,
  last: OperatorSpec,
  openTimeoutMs: number,
  userFunctions: ReadonlyMap<string, Function> = new Map(),
  processingTime: ProcessingTimeService = clockProcessingTime(systemClock),
): Promise<Sink | undefined> {
  if (last.kind === 'sink.collect') return new CollectSink(last.maxRecords, last.name);
  if (last.kind === 'sink.connector') {
    const factory = sinkConnectorFactory(last.connector);
    if (factory === undefined) {
      throw new TaskSetupError(
        `task ${tdd.taskName}: sink '${last.name}' writes to connector '${last.connector}', but this TaskExecutor has no sink registered for it; run the job on a cluster whose TaskExecutors offer '${last.connector}'`,
      );
    }
    const connectorSink = await factory({
      tdd,
      operator: last,
      userFunction: (role) => {
        const ref = sinkFunctionRef(last, role);
        return ref === undefined
          ? undefined
          : noteErrors(functionOf(userFunctions, `sink '${last.name}' (${last.connector})`, ref) as (...a: unknown[]) => unknown, last.name);
      },
    });
    const flush = connectorSink.flush?.bind(connectorSink);
    if (tdd.checkpointing === undefined || flush === undefined) return connectorSink;
    // At each barrier the sink delivers what it holds before the task acknowledges: at-least-once across restores.
    return {
      emit: connectorSink.emit,
      close: () => connectorSink.close(),
      abort: () => connectorSink.abort(),
      checkpointed: {
        snapshotState: async () => {
          await flush();
          return { keyed: [], operator: [] };
        },
      },
    };
  }
  if (last.kind !== 'sink.textFile') return undefined;
  const encode =
    last.encoder === undefined
      ? defaultLine
      : (noteErrors(functionOf(userFunctions, `the encoder of file sink '${last.name}'`, last.encoder) as (r: unknown) => unknown, last.name) as (
          r: unknown,
        ) => string);
  // A checkpointing job's file sink rolls and commits with checkpoints, on bounded input too.
  const rolling = last.rolling ?? (tdd.checkpointing !== undefined ? DEFAULT_ROLLING_POLICY : undefined);
  if (rolling !== undefined) {
    const policy = rolling;
    // The number after the last part this attempt opened: its pending parts are uploads an S3 listing
    // may not show (an emulator without ListMultipartUploads), and a name is never opened twice.
    let nextNumber = 0;
    const partsNow = async (): Promise<RollingPartFiles> => {
      try {
        // With the job's latest credentials: its JobMaster renews them while a streaming job runs.
        const store = await outputStoreFor(last.path, currentJobDataCredentials(tdd.jobId, tdd.dataCredentials));
        return await store.openRollingParts(last.path, tdd.subtaskIndex, tdd.attemptId, nextNumber);
      } catch (error) {
        throw sinkOpenError(last.name, last.path, `its target folder for rolling part files`, error);
      }
    };
    const first = await withOpenDeadline(partsNow(), { timeoutMs: openTimeoutMs, what: `file sink '${last.name}' opening its target '${last.path}'` });
    let used = false;
    let latest = first;
    // Each part after the first goes through the store of the credentials current when it opens; commits
    // through the latest.
    const parts: RollingPartFiles = {
      openPart: async () => {
        const from = used ? await partsNow() : first;
        used = true;
        latest = from;
        const part = await from.openPart();
        nextNumber = Math.max(nextNumber, (rollingPartNumber(part.name, tdd.subtaskIndex) ?? -1) + 1);
        return part;
      },
      commitPending: (part) => latest.commitPending(part),
      removeLeftovers: (owns, keep) => latest.removeLeftovers(owns, keep),
    };
    const exactlyOnce = tdd.checkpointing !== undefined ? { operatorName: last.name, subtaskIndex: tdd.subtaskIndex, parallelism: tdd.parallelism } : undefined;
    return new RollingFileSink(parts, policy, processingTime, encode, exactlyOnce);
  }
  if (tdd.sinkStagingDir === undefined)
    throw new TaskSetupError(`task ${tdd.taskName}: text file sink '${last.name}' got no staging folder from the JobMaster`);
  return TextFileSink.open(tdd.sinkStagingDir, tdd.subtaskIndex, last.name, last.path, openTimeoutMs, tdd.jobId, encode, tdd.dataCredentials);
}
