// ECS "Task State Change" events (EventBridge) for the cluster's tasks, and the scheduled reconcile. On
// AWS no process watches a JobManager task, so this is how the Dispatcher hears that one stopped: a job
// whose JobManager task stopped before the job ended gets a successor JobManager that recovers it (as
// the embedded launcher's exit event does), and the scheduled sweep catches what an event missed. A
// JobManager task that stays ready in the warm pool after its job does not stop: it puts a
// capacity-freed event on the cluster's bus when jobs wait, and admission runs on it.
// Errors are thrown, never dropped: Lambda retries the event, then sends it to the dead-letter queue.
import type { Context, EventBridgeEvent } from 'aws-lambda';
import { CAPACITY_FREED_EVENT, type CapacityFreedDetail } from '../runtime/aws/capacity-events.js';
import { isJobEndFigures, JOB_ENDED_EVENT, jobMetricsLine } from '../runtime/aws/job-metrics.js';
import type { JobEndFigures } from '../runtime/protocol/job-end-notices.js';
import { createLogger, type Logger } from '../runtime/core/logger.js';
import type { Dispatcher } from '../runtime/dispatcher/dispatcher.js';
import { jobOfJobManagerWorker } from '../runtime/dispatcher/jobmanager-runners.js';
import { FloeEnv } from '../runtime/core/floe-env.js';

interface TaskStateDetail {
  readonly lastStatus?: string;
  readonly stoppedReason?: string;
  readonly containers?: readonly { readonly exitCode?: number; readonly reason?: string }[];
  readonly overrides?: { readonly containerOverrides?: readonly { readonly environment?: readonly { readonly name?: string; readonly value?: string }[] }[] };
}

export type TaskStateChangeEvent = EventBridgeEvent<'ECS Task State Change', TaskStateDetail>;

export function isTaskStateChange(event: unknown): event is TaskStateChangeEvent {
  return event !== null && typeof event === 'object' && (event as { 'detail-type'?: unknown })['detail-type'] === 'ECS Task State Change';
}

/** The worker a STOPPED event is about (its FLOE_RESOURCE_ID override) and why it stopped; undefined otherwise. */
export function stoppedWorkerOf(event: TaskStateChangeEvent): { workerId: string; reason: string } | undefined {
  const detail = event.detail;
  if (detail?.lastStatus !== 'STOPPED') return undefined;
  const environment = (detail.overrides?.containerOverrides ?? []).flatMap((o) => o.environment ?? []);
  const workerId = environment.find((e) => e.name === FloeEnv.RESOURCE_ID)?.value;
  if (workerId === undefined || workerId === '') return undefined;
  const exitCode = detail.containers?.[0]?.exitCode;
  const how = exitCode === undefined ? 'stopped' : `exited with code ${exitCode}`;
  return { workerId, reason: `${how} (ECS: ${detail.stoppedReason ?? detail.containers?.[0]?.reason ?? 'no reason given'})` };
}

export function createTaskStateChangeHandler(options: {
  dispatcher: () => Promise<Dispatcher>;
  logger?: Logger;
}): (event: TaskStateChangeEvent, context?: Context) => Promise<void> {
  const log = (options.logger ?? createLogger({ process: 'lambda' })).child({ component: 'ecs-task-events' });
  return async (event) => {
    const stopped = stoppedWorkerOf(event);
    // Only a JobManager's stop concerns the Dispatcher; anything else is answered without a cold start.
    if (stopped === undefined || jobOfJobManagerWorker(stopped.workerId) === undefined) return;
    const dispatcher = await options.dispatcher();
    const outcome = await dispatcher.workerStopped(stopped.workerId, stopped.reason);
    if (outcome !== undefined) log.info('a JobManager task stopped', { ...outcome, ...stopped });
  };
}

/** The scheduled event of the reconcile rule (its input is this object). */
export interface ReconcileEvent {
  readonly floe: 'reconcile';
}

export function isReconcileEvent(event: unknown): event is ReconcileEvent {
  return event !== null && typeof event === 'object' && (event as { floe?: unknown }).floe === 'reconcile';
}

/** The sweep: jobs whose JobManager lease lapsed get a successor; free capacity is handed out. */
export function createReconcileHandler(options: { dispatcher: () => Promise<Dispatcher> }): (event: ReconcileEvent, context?: Context) => Promise<void> {
  return async () => {
    await (await options.dispatcher()).reconcile();
  };
}

/** A ready JobManager task gave a job's capacity back while jobs wait (runtime/aws/capacity-events.ts). */
export type CapacityFreedEvent = EventBridgeEvent<typeof CAPACITY_FREED_EVENT.detailType, CapacityFreedDetail>;

export function isCapacityFreed(event: unknown): event is CapacityFreedEvent {
  if (event === null || typeof event !== 'object') return false;
  const e = event as { 'detail-type'?: unknown; source?: unknown };
  return e['detail-type'] === CAPACITY_FREED_EVENT.detailType && e.source === CAPACITY_FREED_EVENT.source;
}

/** Capacity was given back: admit what waits, as a submission or the sweep would. */
export function createCapacityFreedHandler(options: {
  dispatcher: () => Promise<Dispatcher>;
  logger?: Logger;
}): (event: CapacityFreedEvent, context?: Context) => Promise<void> {
  const log = (options.logger ?? createLogger({ process: 'lambda' })).child({ component: 'capacity-events' });
  return async (event) => {
    await (await options.dispatcher()).admitWaiting();
    log.info('admission ran: a ready JobManager gave capacity back', { jobId: event.detail?.jobId });
  };
}

/** A JobManager task says a job it ran ended, with the job's figures (runtime/aws/eventbridge-job-end-notices.ts). */
export type JobEndedEvent = EventBridgeEvent<typeof JOB_ENDED_EVENT.detailType, JobEndFigures>;

export function isJobEnded(event: unknown): event is JobEndedEvent {
  if (event === null || typeof event !== 'object') return false;
  const e = event as { 'detail-type'?: unknown; source?: unknown };
  return e['detail-type'] === JOB_ENDED_EVENT.detailType && e.source === JOB_ENDED_EVENT.source;
}

/**
 * Writes the job's metrics as one EMF line on stdout, which CloudWatch Logs turns into metrics of the
 * function's log group (runtime/aws/job-metrics.ts). No Dispatcher is needed, so no cold start of one.
 * A detail that is not a job's figures is thrown: Lambda retries, then keeps it in the dead-letter queue.
 */
export function createJobEndedHandler(options: {
  cluster: () => string | undefined;
  write?: (line: string) => void;
}): (event: JobEndedEvent, context?: Context) => Promise<void> {
  const write = options.write ?? ((line: string) => process.stdout.write(line + '\n'));
  return async (event) => {
    if (!isJobEndFigures(event.detail)) {
      throw new Error(
        `a '${JOB_ENDED_EVENT.detailType}' event needs a detail of { jobId, jobName, status, durationMs, recordsIn, recordsOut, restarts } with whole numbers >= 0, found ${JSON.stringify(event.detail)}`,
      );
    }
    const cluster = options.cluster();
    if (cluster === undefined || cluster === '')
      throw new Error(
        `the job-ended event of job ${event.detail.jobId} needs the cluster's name for its metrics, found none; set ${FloeEnv.ECS_CLUSTER} on the function (the stack does)`,
      );
    const at = Date.parse(event.time ?? '');
    write(jobMetricsLine(event.detail, cluster, Number.isFinite(at) ? at : Date.now()));
  };
}
