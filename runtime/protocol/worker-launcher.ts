// Port: starting and stopping worker processes (Flink's ResourceManagerDriver). Locally these are
// child processes; on AWS, ECS tasks. Exits are reported back as events.
import type { ResourceProfile } from '../core/resource-profile.js';

export const WorkerKind = { JOB_MANAGER: 'jobmanager', TASK_EXECUTOR: 'taskexecutor' } as const;
export type WorkerKind = (typeof WorkerKind)[keyof typeof WorkerKind];

export interface WorkerSpec {
  /** Unique id of the worker; becomes its ResourceId. */
  readonly id: string;
  readonly kind: WorkerKind;
  /** Environment for the worker, on top of what the launcher sets. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * A TaskExecutor for slots of this profile: the launcher sizes it `slots` × the profile (vCPUs and MiB),
   * rounding up to what the platform offers. Absent: the launcher's default size.
   */
  readonly resources?: { readonly profile: ResourceProfile; readonly slots: number };
}

export interface WorkerExit {
  readonly id: string;
  readonly kind: WorkerKind;
  /** null when ended by a signal. */
  readonly exitCode: number | null;
  /** Why it stopped, in words: "exited with code 1", "stopped: idle", … */
  readonly reason: string;
  /** true when `stop` asked for it. */
  readonly requested: boolean;
  /**
   * Set when it could not start for a reason every start would meet again (an image built for another
   * CPU architecture): starting another in its place cannot help.
   */
  readonly fatal?: true;
}

export interface WorkerLauncher {
  /** Starts a worker; resolves once it has been started (not once it is ready). */
  start(spec: WorkerSpec): Promise<void>;
  /** Stops a worker (graceful first, forced after a grace period); resolves once it is gone. */
  stop(id: string, reason: string): Promise<void>;
  /** Subscribes to exits; returns the unsubscribe function. */
  onExit(listener: (exit: WorkerExit) => void): () => void;
  /** Ids of the workers this launcher started that have not exited. */
  running(): string[];
  /** Stops every running worker. */
  close(): Promise<void>;
}
