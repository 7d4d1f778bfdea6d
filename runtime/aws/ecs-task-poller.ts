// Watches ECS tasks by polling DescribeTasks: every interval, the tasks watched then are described, up to
// 100 a call, each call under the launcher's rate limit; what ECS says of each goes back to the launcher,
// which decides what a status means. A failed call is tried again at the next poll.
import { DescribeTasksCommand, type ECSClient, type Task } from '@aws-sdk/client-ecs';
import type { Clock, Timer } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { TokenBucket } from './rate-limit.js';

export interface EcsTaskPollerOptions<T> {
  readonly ecs: ECSClient;
  readonly cluster: string;
  readonly clock: Clock;
  /** How often the watched tasks are described (ms). */
  readonly intervalMs: number;
  /** The rate limit every ECS call of the launcher shares. */
  readonly rateLimit: TokenBucket;
  readonly log: Logger;
  /** The tasks to describe now, by task ARN. */
  readonly watched: () => ReadonlyMap<string, T>;
  /** Whether to poll again after a poll: while any task is tracked. */
  readonly keepPolling: () => boolean;
  /** ECS described the task it knows as `arn`. */
  readonly onDescribed: (task: T, described: Task) => void;
  /** ECS no longer knows the task (failure reason MISSING). */
  readonly onMissing: (task: T, arn: string) => void;
}

export class EcsTaskPoller<T> {
  private timer: Timer | undefined;
  private polling = false;
  private stopped = false;

  constructor(private readonly options: EcsTaskPollerOptions<T>) {}

  /** Polls after the interval, unless a poll is scheduled already or the poller stopped. */
  schedule(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.timer = this.options.clock.setTimeout(() => {
      this.timer = undefined;
      void this.poll().finally(() => {
        if (this.options.keepPolling()) this.schedule();
      });
    }, this.options.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const byArn = this.options.watched();
      const arns = [...byArn.keys()];
      for (let i = 0; i < arns.length; i += 100) {
        await this.options.rateLimit.take();
        let out;
        try {
          out = await this.options.ecs.send(new DescribeTasksCommand({ cluster: this.options.cluster, tasks: arns.slice(i, i + 100) }));
        } catch (error) {
          this.options.log.warn('DescribeTasks failed; trying again at the next poll', { error: errorMessage(error) });
          return;
        }
        for (const described of out.tasks ?? []) {
          const task = described.taskArn !== undefined ? byArn.get(described.taskArn) : undefined;
          if (task !== undefined) this.options.onDescribed(task, described);
        }
        for (const f of out.failures ?? []) {
          const task = f.arn !== undefined ? byArn.get(f.arn) : undefined;
          if (task !== undefined && f.reason === 'MISSING') this.options.onMissing(task, f.arn!);
        }
      }
    } finally {
      this.polling = false;
    }
  }
}
