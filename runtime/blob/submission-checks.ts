// What the Dispatcher checks at submission about the paths a job names: each text source exists and has
// files, each text sink's target may be written in its write mode. Each check asks the store of the
// path's file system (runtime/blob/file-systems.ts) and answers within 'execution.file-open.timeout'.
import { CONFIG_OPTIONS } from '../core/config.js';
import { withOpenDeadline } from '../core/deadline.js';
import { InputSourceError, IoTimeoutError, OutputTargetError } from '../core/errors.js';
import { writeModeOf, type JobGraph } from '../jobgraph/jobgraph.js';
import { isS3Uri } from '../jobgraph/paths.js';
import { inputStoreFor, outputStoreFor } from './file-systems.js';
import type { InputStore } from './input-store.js';
import type { OutputStore } from './output-store.js';
import { FloeEnv } from '../core/floe-env.js';

/**
 * What the Dispatcher checks a source path with at submission: the store that lists it, or undefined to
 * leave the path to the JobMaster (a local path on AWS names the TaskExecutors' disks, which the Dispatcher
 * does not see). Throws an InputSourceError to refuse the path outright.
 */
export type SourceCheckStoreFor = (path: string) => Promise<InputStore | undefined>;

/**
 * The embedded backend's check: local paths are listed here, since the Dispatcher sees the disk its
 * TaskExecutors read; `s3://` paths are refused, since only the AWS backend's processes are configured for S3.
 */
export const embeddedSourceCheck: SourceCheckStoreFor = (path) => {
  if (!isS3Uri(path)) return inputStoreFor(path);
  return Promise.reject(
    new InputSourceError(
      `text source '${path}': S3 sources need the AWS backend (a cluster deployed with the CDK app, ${FloeEnv.BACKEND}=aws); ` +
        'this embedded cluster reads its own filesystem only: copy the objects to a local folder and read that',
    ),
  );
};

/**
 * Submission: refuses (InputSourceError, 400) a job any of whose text sources names a path that does not
 * exist, cannot be listed or read, or holds no file (a monitored one may hold none yet), naming each path and why. A listing that does not
 * answer within 'execution.file-open.timeout' refuses the job too, saying so.
 */
export async function checkSourcePaths(
  jobGraph: JobGraph,
  timeoutMs: number = CONFIG_OPTIONS.fileOpenTimeoutMs.default,
  storeFor: SourceCheckStoreFor = embeddedSourceCheck,
): Promise<void> {
  const problems: string[] = [];
  for (const vertex of jobGraph.vertices) {
    for (const op of vertex.operators) {
      if (op.kind !== 'source.textFile') continue;
      try {
        const store = await storeFor(op.path);
        if (store === undefined) continue;
        // A monitored folder or prefix may be empty at first: files arrive while the job runs.
        const listing = store.listFiles(op.path, op.monitorIntervalMs !== undefined ? { allowEmpty: true } : undefined);
        await withOpenDeadline(listing, { timeoutMs, what: `listing the files of text source '${op.path}' of '${op.name}'` });
      } catch (error) {
        if (error instanceof InputSourceError || error instanceof IoTimeoutError) problems.push(error.message);
        else throw error;
      }
    }
  }
  if (problems.length > 0) throw new InputSourceError(problems.join('; '));
}

/**
 * Submission: refuses (OutputTargetError, 409) a job any of whose text sinks may not write its target in
 * its write mode, naming each target and what is in the way. A check that does not answer within
 * 'execution.file-open.timeout' refuses the job too, saying so.
 */
export async function checkSinkTargets(
  jobGraph: JobGraph,
  timeoutMs: number = CONFIG_OPTIONS.fileOpenTimeoutMs.default,
  storeFor: (target: string) => Promise<OutputStore> = outputStoreFor,
): Promise<void> {
  const problems: string[] = [];
  for (const vertex of jobGraph.vertices) {
    for (const op of vertex.operators) {
      if (op.kind !== 'sink.textFile') continue;
      try {
        const store = await storeFor(op.path);
        // A job resumed from a savepoint writes on the rolling parts of the job it resumes.
        const continuesRollingParts = jobGraph.savepointRestore !== undefined && (op.rolling !== undefined || jobGraph.checkpointing !== undefined);
        await withOpenDeadline(store.checkTarget(op.path, writeModeOf(op), jobGraph.jobId, { continuesRollingParts }), {
          timeoutMs,
          what: `checking the target '${op.path}' of sink '${op.name}'`,
        });
      } catch (error) {
        if (error instanceof OutputTargetError || error instanceof IoTimeoutError) problems.push(error.message);
        else throw error;
      }
    }
  }
  if (problems.length > 0) throw new OutputTargetError(problems.join('; '));
}
