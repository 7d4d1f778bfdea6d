// The TaskExecutor's side of each job's connection to its JobMaster leader (Flink's TaskExecutor with its
// JobLeaderListenerImpl and offerSlotsToJobManager): when the JobLeaderService registered at a leader the
// job's slots are offered to it; when the leader is lost its tasks stop and its slots wait a bounded
// while for the next one; a leaving TaskExecutor tells each leader it is going.
import type { AllocationId, JobId, ResourceId } from '../core/ids.js';
import { errorMessage } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import { isExecutionTerminal } from '../jobgraph/job-status.js';
import type { SlotOffer } from '../protocol/jobmaster-gateway.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { RegisteredJobLeader } from './job-leader-service.js';
import { JobMasterConnection, type JobTable } from './job-table.js';
import type { SlotWorker } from './slot-worker-handle.js';
import type { SlotTask, TaskSlotTable } from './task-slot-table.js';

type Task = SlotTask<JobMasterConnection, SlotWorker>;

/** One slot offered to a JobMaster: its allocation and where it is. */
export interface SlotToOffer {
  readonly allocationId: AllocationId;
  readonly slotIndex: number;
}

export interface JobLeaderListenerOptions {
  readonly resourceId: ResourceId;
  /** Every offer names it: the JobMaster counts a slot towards its profile only. */
  readonly profile: ResourceProfile | undefined;
  readonly mainThread: MainThread;
  readonly logger: Logger;
  readonly jobTable: JobTable;
  readonly slotTable: TaskSlotTable<JobMasterConnection, SlotWorker>;
  /** How long a job's slots wait for its next leader once one was lost (ms). */
  readonly reconnectTimeoutMs: number;
  /** Why the TaskExecutor is leaving, while it is. */
  leavingReason(): string | undefined;
  /** A JobMaster was heard from: the TaskExecutor is not orphaned. */
  heardFromCluster(): void;
  cancel(task: Task): void;
  releaseSlot(slotIndex: number, cause: string): void;
  releaseJob(jobId: JobId, cause: string): void;
}

export class JobLeaderListener {
  constructor(private readonly o: JobLeaderListenerOptions) {}

  /** The JobLeaderService registered at the job's leader: the job's slots are offered to it. */
  jobManagerGainedLeadership(jobId: JobId, leader: RegisteredJobLeader): void {
    const o = this.o;
    const connection = new JobMasterConnection(jobId, leader.address, leader.token, leader.gateway, leader.jobMasterResourceId, o.logger);
    o.jobTable.connect(jobId, connection);
    o.heardFromCluster();
    const leaving = o.leavingReason();
    if (leaving !== undefined) {
      // A new leader learns at once that this TaskExecutor is going: it gets no slot of it.
      this.tellLeaving(connection, leaving);
      return;
    }
    const offers = o.slotTable.slotsOfJob(jobId).map((s) => ({ allocationId: s.allocationId!, slotIndex: s.index }));
    if (offers.length > 0) this.offerSlots(connection, offers);
  }

  jobManagerLostLeadership(jobId: JobId, cause: string): void {
    const o = this.o;
    o.jobTable.disconnect(jobId);
    this.applyLeaderChangePolicy(jobId, cause);
    // The slots wait for the next leader, a bounded while: then the ResourceManager gets them back.
    const job = o.jobTable.get(jobId);
    if (job === undefined) return;
    job.reconnectDeadline?.cancel();
    job.reconnectDeadline = o.mainThread.schedule(() => {
      if (o.jobTable.connection(jobId) !== undefined) return;
      o.releaseJob(jobId, `no JobMaster leader of job ${jobId} registered within ${o.reconnectTimeoutMs} ms after the last one was lost (${cause})`);
    }, o.reconnectTimeoutMs);
  }

  /**
   * THE decision on a change of a job's JobMaster leader: what becomes of the tasks the former leader
   * deployed here. Policy for now: restart — they are cancelled (a new leader does not know them and
   * redeploys what it needs); the slots they ran in stay held and are offered to the next leader.
   * Adopting running tasks instead would be decided here.
   */
  private applyLeaderChangePolicy(jobId: JobId, cause: string): void {
    for (const task of this.o.slotTable.tasksOfJob(jobId)) {
      if (!isExecutionTerminal(task.state))
        this.o.logger.info('cancelling a task of the former JobMaster leader', { task: task.tdd.taskName, attemptId: task.tdd.attemptId, cause });
      this.o.cancel(task);
    }
  }

  offerSlots(connection: JobMasterConnection, slots: SlotToOffer[]): void {
    // Every offer names this TaskExecutor's profile: the JobMaster counts a slot towards its profile only.
    const profile = this.o.profile;
    const offers: SlotOffer[] = profile === undefined ? slots : slots.map((s) => ({ ...s, profile }));
    connection.gateway
      .offerSlots(this.o.resourceId, offers)
      .then(
        (accepted) => this.o.mainThread.run(() => this.onOfferAnswer(connection, offers, accepted)),
        (error: unknown) =>
          this.o.mainThread.run(() => {
            if (this.o.jobTable.connection(connection.jobId) !== connection) return;
            this.o.logger.warn('offering slots to the JobMaster failed; freeing them', { address: connection.address, error: errorMessage(error) });
            this.onOfferAnswer(connection, offers, []);
          }),
      )
      .catch((e: unknown) => {
        if (!this.o.mainThread.isClosed) this.o.logger.error('slot offer handling failed', { error: e });
      });
  }

  private onOfferAnswer(connection: JobMasterConnection, offers: readonly SlotToOffer[], accepted: readonly AllocationId[]): void {
    // An answer from a leader that is gone meanwhile decides nothing: the next leader gets the offers.
    if (this.o.jobTable.connection(connection.jobId) !== connection) return;
    for (const offer of offers) {
      if (accepted.includes(offer.allocationId)) continue;
      const slot = this.o.slotTable.slot(offer.slotIndex);
      if (slot.allocationId !== offer.allocationId || slot.jobId !== connection.jobId) continue;
      this.o.logger.info('JobMaster did not accept slot; freeing it', { slotIndex: slot.index, allocationId: offer.allocationId });
      this.o.releaseSlot(slot.index, 'the JobMaster did not accept the slot');
    }
  }

  /** Tells the job's leader this TaskExecutor is leaving; one that cannot be told gets the job released here. */
  tellLeaving(connection: JobMasterConnection, reason: string): void {
    connection.gateway.notifyTaskManagerLeaving(this.o.resourceId, reason).catch((error: unknown) =>
      this.o.mainThread
        .run(() => {
          if (this.o.jobTable.connection(connection.jobId) !== connection) return;
          // The JobMaster cannot be told: its tasks here stop, and it restarts them when it hears they did.
          this.o.logger.warn('could not tell the JobMaster this TaskExecutor is leaving; releasing the job here', {
            jobId: connection.jobId,
            error: errorMessage(error),
          });
          this.o.releaseJob(connection.jobId, `the TaskExecutor is leaving (${reason}) and its JobMaster could not be told`);
        })
        .catch(() => undefined),
    );
  }
}
