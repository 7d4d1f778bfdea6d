// ECS "Task State Change" events (EventBridge) for the cluster's tasks. On AWS no process watches a
// JobManager task, so this is how the Dispatcher hears that one stopped: a job whose JobManager task
// stopped before the job ended is recorded FAILED with ECS's reason, as the embedded launcher does.
import type { Context, EventBridgeEvent } from 'aws-lambda';
import { ProcessEnv } from '../runtime/core/process-env.js';
import { createLogger, type Logger } from '../runtime/core/logger.js';
import { jobOfJobManagerWorker, type Dispatcher } from '../runtime/dispatcher/dispatcher.js';

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
  const workerId = environment.find((e) => e.name === ProcessEnv.RESOURCE_ID)?.value;
  if (workerId === undefined || workerId === '') return undefined;
  const exitCode = detail.containers?.[0]?.exitCode;
  const how = exitCode === undefined ? 'stopped' : `exited with code ${exitCode}`;
  return { workerId, reason: `${how} (ECS: ${detail.stoppedReason ?? detail.containers?.[0]?.reason ?? 'no reason given'})` };
}

export function createTaskStateChangeHandler(options: { dispatcher: () => Promise<Dispatcher>; logger?: Logger }): (event: TaskStateChangeEvent, context?: Context) => Promise<void> {
  const log = (options.logger ?? createLogger({ process: 'lambda' })).child({ component: 'ecs-task-events' });
  return async (event) => {
    const stopped = stoppedWorkerOf(event);
    // Only a JobManager's stop concerns the Dispatcher; anything else is answered without a cold start.
    if (stopped === undefined || jobOfJobManagerWorker(stopped.workerId) === undefined) return;
    const dispatcher = await options.dispatcher();
    const jobId = await dispatcher.workerStopped(stopped.workerId, stopped.reason);
    if (jobId !== undefined) log.warn('a JobManager task stopped before its job ended; the job is recorded FAILED', { jobId, ...stopped });
  };
}
