// The ResourceManager's slot table and its decisions (Flink's declarative SlotManager): which free slot
// goes to the job, how many TaskExecutors to start or stop, when the cluster can never be enough.
// It runs on the ResourceManager's main thread; remote effects go out through SlotManagerActions.
import { AsyncResource } from 'node:async_hooks';
import type { Clock, Timer } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import { AllocationId, slotIdString } from '../core/ids.js';
import type { FencingToken, JobId, ResourceId, SlotId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { profileKey, type ResourceProfile } from '../core/resource-profile.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { SlotReport, SlotRequest } from '../protocol/taskexecutor-gateway.js';
import type { ClusterResources, ResourceRequirement } from '../protocol/resourcemanager-gateway.js';

// Captured at load time, outside any main thread. A promise callback inherits the async context it was
// registered in, so an answer awaited from inside the main thread would look as if it were still on it
// and `MainThread.run` would run it inline, interleaved with whatever is queued. Remote calls are sent
// from this scope so that their answers queue up like any other call.
const outsideMainThread = new AsyncResource('FloeSlotManagerDetached');

/** Runs `fn` outside every main thread's async context. */
export function detached<T>(fn: () => T): T {
  return outsideMainThread.runInAsyncScope(fn);
}

/** After this many worker starts in a row fail (exit before registering, or launcher error), stop trying. */
export const MAX_CONSECUTIVE_FAILED_WORKER_STARTS = 3;

export type SlotState = 'free' | 'pending' | 'allocated';

interface SlotEntry {
  readonly slotId: SlotId;
  state: SlotState;
  allocationId: AllocationId | undefined;
  jobId: JobId | undefined;
  /** A request on this slot failed: it waits for the TaskExecutor's next report before it is used again. */
  suspect: boolean;
  /** A pending request the job no longer needs; it no longer counts towards the requirement. */
  cancelled: boolean;
}

interface TaskExecutorEntry {
  readonly resourceId: ResourceId;
  /** Its slots serve requests of this profile only (profileKey; 'default' for the default profile). */
  readonly profileKey: string;
  readonly profile: ResourceProfile | undefined;
  slots: SlotEntry[];
  /** Until its first slot report the RM does not know which slots are really free. */
  reported: boolean;
  heldPartitions: number;
  /** It said it is leaving (asked to stop): its slots take no new allocation and it ends on its own. */
  leaving: boolean;
  idleSince: number | undefined;
  idleTimer: Timer | undefined;
}

interface PendingWorker {
  readonly id: ResourceId;
  readonly profileKey: string;
  readonly startedAt: number;
  /** `stop` was asked for it: its exit is no failure. */
  stopping: boolean;
  /** From the warm pool: kept until the job's JobMaster said what it needs, even with no requirement yet. */
  readonly adopted?: boolean;
  /** Fires when it has not registered within the registration timeout. */
  registrationTimer?: Timer;
}

/** The job's side of a slot request: where the TaskExecutor offers the slot and with which tokens. */
export interface JobMasterTarget {
  readonly jobMasterAddress: string;
  readonly jobMasterToken: FencingToken;
}

export interface SlotManagerActions {
  /** Sends `requestSlot` to the TaskExecutor; the promise settles with its answer. */
  requestSlot(resourceId: ResourceId, request: SlotRequest): Promise<void>;
  /**
   * Starts one TaskExecutor whose slots have `profile` (undefined: the default) and returns its id at
   * once; a failed start comes back as `workerStartFailed`.
   */
  startWorker(profile: ResourceProfile | undefined): ResourceId;
  /** Stops a TaskExecutor that is pending or registered. */
  stopWorker(id: ResourceId, reason: string): void;
  /** A registered TaskExecutor idle past the timeout: the caller forgets it and stops it. */
  releaseIdleTaskExecutor(id: ResourceId, reason: string): void;
  notifyNotEnoughResources(required: number, resources: ClusterResources): void;
}

export interface SlotManagerOptions {
  readonly jobId: JobId;
  readonly resourceManagerToken: FencingToken;
  readonly slotsPerWorker: number;
  readonly maxWorkers: number;
  readonly idleTimeoutMs: number;
  readonly mainThread: MainThread;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly actions: SlotManagerActions;
  /**
   * Until this clock time no worker is started: the workers of a former ResourceManager leader are
   * registering and reporting their slots (a successor takes them over instead of starting more).
   */
  readonly startWorkersNotBeforeMs?: number;
  /**
   * A worker started (or adopted) that has not registered this long after is stopped and counts as a
   * failed start, so another is started in its place ('resourcemanager.taskmanager-registration.timeout').
   * @default - none: a worker may take as long as it takes
   */
  readonly registrationTimeoutMs?: number;
}

export interface SlotManagerSnapshot {
  readonly required: number;
  readonly registered: readonly ResourceId[];
  readonly pendingWorkers: readonly ResourceId[];
  readonly slots: readonly { readonly slotId: string; readonly profile: string; readonly state: SlotState; readonly allocationId?: AllocationId; readonly jobId?: JobId }[];
  /** Per profile key, the slots required. */
  readonly requiredByProfile: Readonly<Record<string, number>>;
  /** Per pending worker, the profile key it was started for. */
  readonly pendingWorkerProfiles: Readonly<Record<string, string>>;
  readonly consecutiveFailedStarts: number;
}

export class SlotManager {
  private readonly taskExecutors = new Map<ResourceId, TaskExecutorEntry>();
  private readonly pendingWorkers = new Map<ResourceId, PendingWorker>();
  private required = 0;
  /** Per profile key, its profile and the slots of it required; their slots add up to `required`. */
  private requiredByProfile = new Map<string, ResourceRequirement>();
  private jobMaster: JobMasterTarget | undefined;
  private consecutiveFailedStarts = 0;
  /** The requirement last reported as unreachable, so the JobMaster is told once, not on every check. */
  private notifiedUnreachable: number | undefined;
  private closed = false;
  private recoveryTimer: Timer | undefined;

  constructor(private readonly o: SlotManagerOptions) {}

  // ---- TaskExecutors -----------------------------------------------------------------------------

  registerTaskExecutor(resourceId: ResourceId, numberOfSlots: number, profile?: ResourceProfile): void {
    this.o.mainThread.assertInMainThread();
    const key = profileKey(profile);
    const existing = this.taskExecutors.get(resourceId);
    if (existing !== undefined && existing.slots.length === numberOfSlots && existing.profileKey === key) {
      // A reconnect of the same process: keep what we know; its next report corrects the rest.
      return;
    }
    if (existing !== undefined) this.removeTaskExecutor(resourceId);
    const entry: TaskExecutorEntry = {
      resourceId,
      profileKey: key,
      profile,
      slots: Array.from({ length: numberOfSlots }, (_, slotIndex) => ({
        slotId: { resourceId, slotIndex },
        state: 'free' as SlotState,
        allocationId: undefined,
        jobId: undefined,
        suspect: false,
        cancelled: false,
      })),
      reported: false,
      heldPartitions: 0,
      leaving: false,
      idleSince: undefined,
      idleTimer: undefined,
    };
    this.taskExecutors.set(resourceId, entry);
    const pending = this.pendingWorkers.get(resourceId);
    if (pending !== undefined) {
      pending.registrationTimer?.cancel();
      this.pendingWorkers.delete(resourceId);
      this.consecutiveFailedStarts = 0;
    }
    this.updateIdle(entry);
    this.checkRequirements();
  }

  /** Forgets a TaskExecutor and its slots; returns whether it was known. */
  removeTaskExecutor(resourceId: ResourceId): boolean {
    this.o.mainThread.assertInMainThread();
    const entry = this.taskExecutors.get(resourceId);
    if (entry === undefined) return false;
    entry.idleTimer?.cancel();
    this.taskExecutors.delete(resourceId);
    this.checkRequirements();
    return true;
  }

  /** Registered TaskExecutors with no slot allocated or requested: those a warm pool may keep. */
  freeTaskExecutors(): ResourceId[] {
    this.o.mainThread.assertInMainThread();
    return [...this.taskExecutors.values()].filter((e) => e.slots.every((slot) => slot.state === 'free')).map((e) => e.resourceId);
  }

  /**
   * A TaskExecutor from the warm pool, asked to register here: it counts as a worker started for
   * `profile` until it registers (or fails to), so no other is started for its slots.
   */
  adoptWorker(id: ResourceId, profile: ResourceProfile | undefined): void {
    this.o.mainThread.assertInMainThread();
    this.addPendingWorker({ id, profileKey: profileKey(profile), startedAt: this.o.clock.now(), stopping: false, adopted: true });
  }

  /** Records a worker on its way to registering, with its registration deadline. */
  private addPendingWorker(worker: PendingWorker): void {
    this.pendingWorkers.set(worker.id, worker);
    const timeoutMs = this.o.registrationTimeoutMs;
    if (timeoutMs === undefined) return;
    worker.registrationTimer = this.o.mainThread.schedule(
      () => this.registrationTimedOut(worker, timeoutMs),
      timeoutMs,
      (error) => this.o.logger.error('registration deadline check failed', { resourceId: worker.id, error }),
    );
  }

  /**
   * A worker that has not registered in time is stopped and counts as a failed start: one that hangs at
   * start (or whose process is frozen) would otherwise hold its place until the job's slot request
   * timeout. It stays pending as `stopping` until its process is gone, so it cannot register meanwhile.
   */
  private registrationTimedOut(worker: PendingWorker, timeoutMs: number): void {
    worker.registrationTimer = undefined;
    if (this.closed || this.pendingWorkers.get(worker.id) !== worker || worker.stopping) return;
    worker.stopping = true;
    const reason = `it did not register within ${timeoutMs} ms of its start ('resourcemanager.taskmanager-registration.timeout')`;
    this.countFailedStart(worker.id, reason);
    this.o.actions.stopWorker(worker.id, reason);
    this.checkRequirements();
  }

  isRegistered(resourceId: ResourceId): boolean {
    return this.taskExecutors.has(resourceId);
  }

  /** Brings the table in line with what the TaskExecutor says it holds; the TaskExecutor is the truth. */
  reportSlotStatus(report: SlotReport): boolean {
    this.o.mainThread.assertInMainThread();
    const entry = this.taskExecutors.get(report.resourceId);
    if (entry === undefined) return false;
    entry.reported = true;
    entry.heldPartitions = report.heldPartitions;
    if (report.leaving === true && !entry.leaving) {
      entry.leaving = true;
      this.o.logger.info('TaskExecutor leaving: its slots take no new allocation, and its place may be taken by another', { resourceId: report.resourceId });
    }
    for (const status of report.slots) {
      const slot = entry.slots[status.slotId.slotIndex];
      if (slot === undefined) {
        this.o.logger.warn('slot report names a slot the TaskExecutor did not register', { resourceId: report.resourceId, slotIndex: status.slotId.slotIndex });
        continue;
      }
      if (status.allocationId !== undefined) {
        if (slot.state !== 'allocated' || slot.allocationId !== status.allocationId) {
          if (slot.state === 'free') this.o.logger.info('slot report: a slot thought free is allocated', { slot: slotIdString(slot.slotId), allocationId: status.allocationId });
          slot.state = 'allocated';
          slot.allocationId = status.allocationId;
          slot.jobId = status.jobId;
        }
        slot.cancelled = false;
        slot.suspect = false;
      } else if (slot.state === 'allocated') {
        this.o.logger.info('slot report: a slot thought allocated is free', { slot: slotIdString(slot.slotId), allocationId: slot.allocationId });
        this.markFree(slot);
      } else if (slot.state === 'free') {
        slot.suspect = false;
      }
      // A pending slot reported free: the report may have been taken before the request arrived; the
      // request's answer settles it.
    }
    this.updateIdle(entry);
    this.checkRequirements();
    return true;
  }

  /** The TaskExecutor freed a slot (the JobMaster gave it back or refused the offer). */
  freeSlot(slotId: SlotId, allocationId: AllocationId): void {
    this.o.mainThread.assertInMainThread();
    const entry = this.taskExecutors.get(slotId.resourceId);
    const slot = entry?.slots[slotId.slotIndex];
    if (entry === undefined || slot === undefined) return;
    if (slot.allocationId !== allocationId) {
      this.o.logger.debug('ignoring a free notice for an allocation the slot no longer has', { slot: slotIdString(slotId), allocationId, current: slot.allocationId });
      return;
    }
    this.markFree(slot);
    this.updateIdle(entry);
    this.checkRequirements();
  }

  // ---- workers -----------------------------------------------------------------------------------

  /**
   * A worker this RM started exited or failed to start before it registered. `fatal`: every start would
   * fail the same way (an image of another CPU architecture), so none is tried again and the JobMaster
   * hears why at once.
   */
  workerStartFailed(id: ResourceId, cause: string, fatal = false): void {
    this.o.mainThread.assertInMainThread();
    const pending = this.pendingWorkers.get(id);
    if (pending === undefined) return;
    pending.registrationTimer?.cancel();
    this.pendingWorkers.delete(id);
    if (pending.stopping) return;
    this.countFailedStart(id, cause, fatal);
    this.checkRequirements();
  }

  /** One more start in a row failed; past MAX_CONSECUTIVE_FAILED_WORKER_STARTS the JobMaster hears why. */
  private countFailedStart(id: ResourceId, cause: string, fatal = false): void {
    this.consecutiveFailedStarts = fatal ? Math.max(this.consecutiveFailedStarts + 1, MAX_CONSECUTIVE_FAILED_WORKER_STARTS) : this.consecutiveFailedStarts + 1;
    const giveUp = this.consecutiveFailedStarts >= MAX_CONSECUTIVE_FAILED_WORKER_STARTS;
    const fields = { resourceId: id, cause, failedStarts: this.consecutiveFailedStarts };
    if (fatal) {
      this.o.logger.error(`TaskExecutor ${id} cannot start, and no other would: no more are attempted`, fields);
    } else if (giveUp) {
      this.o.logger.error(`TaskExecutor ${id} failed to start; ${this.consecutiveFailedStarts} starts in a row failed, so no more are attempted: check the TaskExecutor logs`, fields);
    }
    if (giveUp) {
      // The job cannot get its slots this way: say why now rather than at the slot request timeout.
      if (this.jobMaster !== undefined && this.required > 0) {
        this.o.actions.notifyNotEnoughResources(this.required, { ...this.clusterResources(), workerStartFailure: cause });
      }
    } else {
      this.o.logger.warn(`TaskExecutor ${id} failed to start; trying again`, fields);
    }
  }

  isPendingWorker(id: ResourceId): boolean {
    return this.pendingWorkers.has(id);
  }

  /** A worker started and then found unneeded before it registered: it is on its way out. */
  isStoppingWorker(id: ResourceId): boolean {
    return this.pendingWorkers.get(id)?.stopping === true;
  }

  /** Workers started and not yet registered, including ones being stopped. */
  pendingWorkerIds(): ResourceId[] {
    return [...this.pendingWorkers.keys()];
  }

  // ---- requirements ------------------------------------------------------------------------------

  /** What the job needs, per resource profile (one entry per profile; absent profile: the default). */
  setRequirements(requirements: readonly ResourceRequirement[], jobMaster: JobMasterTarget): void {
    this.o.mainThread.assertInMainThread();
    const byProfile = new Map<string, ResourceRequirement>();
    for (const r of requirements) {
      const key = profileKey(r.profile);
      const slots = (byProfile.get(key)?.slots ?? 0) + Math.max(0, r.slots);
      byProfile.set(key, r.profile === undefined ? { slots } : { profile: r.profile, slots });
    }
    let required = 0;
    for (const r of byProfile.values()) required += r.slots;
    if (required !== this.required) this.notifiedUnreachable = undefined;
    this.required = required;
    this.requiredByProfile = byProfile;
    this.jobMaster = jobMaster;
    this.checkRequirements();
  }

  /** The job is gone (or its JobMaster lost): nothing is required any more. */
  clearRequirements(): void {
    this.o.mainThread.assertInMainThread();
    this.required = 0;
    this.requiredByProfile = new Map();
    this.jobMaster = undefined;
    this.notifiedUnreachable = undefined;
    this.checkRequirements();
  }

  /** The job is done: every slot it held counts as free (the TaskExecutors' reports agree soon after). */
  freeAllOfJob(): void {
    this.o.mainThread.assertInMainThread();
    for (const entry of this.taskExecutors.values()) {
      for (const slot of entry.slots) if (slot.jobId === this.o.jobId) this.markFree(slot);
      this.updateIdle(entry);
    }
    this.checkRequirements();
  }

  clusterResources(): ClusterResources {
    let totalSlots = 0;
    let freeSlots = 0;
    for (const entry of this.taskExecutors.values()) {
      totalSlots += entry.slots.length;
      for (const slot of entry.slots) if (slot.state === 'free') freeSlots++;
    }
    return {
      registeredTaskExecutors: this.taskExecutors.size,
      slotsPerTaskExecutor: this.o.slotsPerWorker,
      totalSlots,
      freeSlots,
      pendingTaskExecutors: this.livePendingWorkers().length,
      maxTaskExecutors: this.o.maxWorkers,
    };
  }

  snapshot(): SlotManagerSnapshot {
    const slots: SlotManagerSnapshot['slots'][number][] = [];
    for (const entry of this.taskExecutors.values()) {
      for (const s of entry.slots) {
        slots.push({
          slotId: slotIdString(s.slotId),
          profile: entry.profileKey,
          state: s.state,
          ...(s.allocationId !== undefined ? { allocationId: s.allocationId } : {}),
          ...(s.jobId !== undefined ? { jobId: s.jobId } : {}),
        });
      }
    }
    return {
      required: this.required,
      registered: [...this.taskExecutors.keys()],
      pendingWorkers: this.livePendingWorkers().map((w) => w.id),
      slots,
      consecutiveFailedStarts: this.consecutiveFailedStarts,
      requiredByProfile: Object.fromEntries([...this.requiredByProfile].map(([k, r]) => [k, r.slots])),
      pendingWorkerProfiles: Object.fromEntries(this.livePendingWorkers().map((w) => [w.id, w.profileKey])),
    };
  }

  close(): void {
    this.closed = true;
    this.recoveryTimer?.cancel();
    for (const entry of this.taskExecutors.values()) entry.idleTimer?.cancel();
    for (const worker of this.pendingWorkers.values()) worker.registrationTimer?.cancel();
  }

  /**
   * The one place where decisions are made: request free slots, start or stop workers, or tell the
   * JobMaster the requirement can never be met. Safe to call after every change. Each profile is
   * matched on its own: a slot serves only requests of its TaskExecutor's profile.
   */
  private checkRequirements(): void {
    if (this.closed) return;
    const jm = this.jobMaster;
    const keys = new Set([...this.requiredByProfile.keys(), ...this.livePendingWorkers().map((w) => w.profileKey)]);
    const toStart: { key: string; profile: ResourceProfile | undefined; workers: number; missing: number }[] = [];
    let stillMissing = false;
    for (const key of keys) {
      const requirement = this.requiredByProfile.get(key);
      const required = jm === undefined ? 0 : (requirement?.slots ?? 0);
      let acquired = 0;
      for (const entry of this.entriesOf(key)) {
        for (const slot of entry.slots) if (this.countsForJob(slot)) acquired++;
      }
      let missing = required - acquired;

      if (missing < 0) this.cancelPendingRequests(key, -missing);

      if (missing > 0 && jm !== undefined) {
        for (const slot of this.usableFreeSlots(key)) {
          if (missing <= 0) break;
          this.allocate(slot, jm);
          missing--;
        }
      }
      if (missing > 0) stillMissing = true;

      // Free slots that cannot be used yet (failed request, no report yet) will be soon: no worker for them.
      let waitingFree = 0;
      for (const entry of this.stayingEntriesOf(key)) {
        for (const slot of entry.slots) if (slot.state === 'free' && !(entry.reported && !slot.suspect)) waitingFree++;
      }
      const neededWorkers = Math.max(0, Math.ceil((missing - waitingFree) / this.o.slotsPerWorker));
      const live = this.livePendingWorkers().filter((w) => w.profileKey === key);

      if (neededWorkers < live.length) {
        // The newest are the furthest from registering. Warm ones wait for the JobMaster's requirements.
        for (const worker of live.slice(neededWorkers).reverse()) {
          if (worker.adopted === true && jm === undefined) continue;
          worker.stopping = true;
          this.o.logger.info('stopping a TaskExecutor that is no longer needed before it registered', { resourceId: worker.id, profile: key });
          this.o.actions.stopWorker(worker.id, 'no longer needed: the job requires fewer slots');
        }
      } else if (neededWorkers > live.length) {
        toStart.push({ key, profile: requirement?.profile, workers: neededWorkers - live.length, missing });
      }
    }
    if (toStart.length === 0) {
      if (!stillMissing) this.notifiedUnreachable = undefined;
      return;
    }

    const required = this.required;
    if (jm !== undefined && !this.reachable()) {
      if (this.notifiedUnreachable !== required) {
        this.notifiedUnreachable = required;
        const resources = this.clusterResources();
        this.o.logger.warn('the job needs more slots than this cluster may ever offer', { required, byProfile: Object.fromEntries([...this.requiredByProfile].map(([k, r]) => [k, r.slots])), ...resources });
        this.o.actions.notifyNotEnoughResources(required, resources);
      }
      return;
    }
    if (this.consecutiveFailedStarts >= MAX_CONSECUTIVE_FAILED_WORKER_STARTS) return;
    const waitUntil = this.o.startWorkersNotBeforeMs;
    if (waitUntil !== undefined && this.o.clock.now() < waitUntil) {
      if (this.recoveryTimer === undefined) {
        this.o.logger.info("waiting for a former leader's TaskExecutors before starting any", { missing: toStart.reduce((n, p) => n + p.missing, 0), waitMs: waitUntil - this.o.clock.now() });
        this.recoveryTimer = this.o.mainThread.schedule(() => {
          // Cleared first: a timer that fires a moment early by the wall clock must be able to wait again.
          this.recoveryTimer = undefined;
          this.checkRequirements();
        }, waitUntil - this.o.clock.now());
      }
      return;
    }
    let room = Math.max(0, this.o.maxWorkers - this.stayingTaskExecutors() - this.livePendingWorkers().length);
    for (const plan of toStart) {
      const n = Math.min(plan.workers, room);
      room -= n;
      for (let i = 0; i < n; i++) {
        const id = this.o.actions.startWorker(plan.profile);
        this.addPendingWorker({ id, profileKey: plan.key, startedAt: this.o.clock.now(), stopping: false });
      }
      if (n > 0) this.o.logger.info('starting TaskExecutors for missing slots', { profile: plan.key, missing: plan.missing, started: n });
    }
  }

  /**
   * Whether the job could ever hold every slot it requires here: per profile, what exists of it (minus
   * other jobs' slots) plus TaskExecutors still to start, which together may not exceed the maximum.
   * An idle TaskExecutor of a profile nobody requires does not count against the maximum: it goes at its
   * idle timeout, making room.
   */
  private reachable(): boolean {
    let workersToStart = 0;
    for (const [key, requirement] of this.requiredByProfile) {
      let slots = 0;
      for (const entry of this.stayingEntriesOf(key)) {
        for (const slot of entry.slots) if (slot.state === 'free' || slot.jobId === this.o.jobId) slots++;
      }
      workersToStart += Math.ceil(Math.max(0, requirement.slots - slots) / this.o.slotsPerWorker);
    }
    let occupying = 0;
    for (const entry of this.taskExecutors.values()) {
      const releasable = entry.leaving || (!this.requiredByProfile.has(entry.profileKey) && entry.slots.every((s) => s.state === 'free'));
      if (!releasable) occupying++;
    }
    return workersToStart <= Math.max(0, this.o.maxWorkers - occupying);
  }

  private entriesOf(key: string): TaskExecutorEntry[] {
    return [...this.taskExecutors.values()].filter((e) => e.profileKey === key);
  }

  /** Those of a profile that may take new allocations: not leaving. */
  private stayingEntriesOf(key: string): TaskExecutorEntry[] {
    return this.entriesOf(key).filter((e) => !e.leaving);
  }

  /** Registered TaskExecutors that count against 'resourcemanager.max-taskmanagers': one leaving is on its way out. */
  private stayingTaskExecutors(): number {
    let n = 0;
    for (const e of this.taskExecutors.values()) if (!e.leaving) n++;
    return n;
  }

  private countsForJob(slot: SlotEntry): boolean {
    if (slot.jobId !== this.o.jobId) return false;
    return slot.state === 'allocated' || (slot.state === 'pending' && !slot.cancelled);
  }

  /** Free, reported, not suspect; TaskExecutors already holding the job's slots first, so idle ones can go. */
  private usableFreeSlots(key: string): SlotEntry[] {
    const entries = this.stayingEntriesOf(key).filter((e) => e.reported);
    const busy = (e: TaskExecutorEntry): number => e.slots.filter((s) => s.state !== 'free').length;
    entries.sort((a, b) => busy(b) - busy(a));
    return entries.flatMap((e) => e.slots.filter((s) => s.state === 'free' && !s.suspect));
  }

  private cancelPendingRequests(key: string, excess: number): void {
    for (const entry of this.entriesOf(key)) {
      for (const slot of entry.slots) {
        if (excess <= 0) return;
        if (slot.state === 'pending' && !slot.cancelled && slot.jobId === this.o.jobId) {
          slot.cancelled = true;
          excess--;
          this.o.logger.info('cancelled a pending slot request the job no longer needs', { slot: slotIdString(slot.slotId), allocationId: slot.allocationId });
        }
      }
    }
  }

  private allocate(slot: SlotEntry, jm: JobMasterTarget): void {
    const allocationId = AllocationId.random();
    slot.state = 'pending';
    slot.allocationId = allocationId;
    slot.jobId = this.o.jobId;
    slot.cancelled = false;
    const entry = this.taskExecutors.get(slot.slotId.resourceId);
    if (entry !== undefined) this.updateIdle(entry);
    const request: SlotRequest = {
      slotId: slot.slotId,
      jobId: this.o.jobId,
      allocationId,
      jobMasterAddress: jm.jobMasterAddress,
      jobMasterToken: jm.jobMasterToken,
      resourceManagerToken: this.o.resourceManagerToken,
    };
    this.o.logger.debug('requesting slot', { slot: slotIdString(slot.slotId), allocationId });
    detached(() => {
      let sent: Promise<void>;
      try {
        sent = this.o.actions.requestSlot(slot.slotId.resourceId, request);
      } catch (error) {
        sent = Promise.reject(error);
      }
      sent.then(
        () => this.o.mainThread.run(() => this.slotRequestAnswered(slot, allocationId, undefined)),
        (error: unknown) => this.o.mainThread.run(() => this.slotRequestAnswered(slot, allocationId, error)),
      ).catch(() => {
        // The main thread closed: the answer no longer matters.
      });
    });
  }

  private slotRequestAnswered(slot: SlotEntry, allocationId: AllocationId, error: unknown): void {
    if (this.closed) return;
    const entry = this.taskExecutors.get(slot.slotId.resourceId);
    // The TaskExecutor went away, or a report already settled the slot otherwise.
    if (entry === undefined || entry.slots[slot.slotId.slotIndex] !== slot || slot.allocationId !== allocationId || slot.state !== 'pending') return;
    if (error === undefined) {
      // A pending request that was not cancelled counted for the job already: the requirement check
      // would find nothing changed (and costs a pass over every slot, per answer).
      const countedAlready = this.countsForJob(slot);
      slot.state = 'allocated';
      slot.cancelled = false;
      this.o.logger.debug('slot allocated', { slot: slotIdString(slot.slotId), allocationId });
      if (countedAlready) return;
    } else {
      this.o.logger.warn('slot request failed; trying another slot', { slot: slotIdString(slot.slotId), allocationId, error: errorMessage(error) });
      this.markFree(slot);
      slot.suspect = true;
      this.updateIdle(entry);
    }
    this.checkRequirements();
  }

  private markFree(slot: SlotEntry): void {
    slot.state = 'free';
    slot.allocationId = undefined;
    slot.jobId = undefined;
    slot.cancelled = false;
  }

  private livePendingWorkers(): PendingWorker[] {
    return [...this.pendingWorkers.values()].filter((w) => !w.stopping);
  }

  /** A TaskExecutor with no slot in use and no partition held starts its idle clock. */
  private updateIdle(entry: TaskExecutorEntry): void {
    // One leaving ends on its own once its partitions are read: stopping it would cut that short.
    const idle = !entry.leaving && entry.reported && entry.heldPartitions === 0 && entry.slots.every((s) => s.state === 'free');
    if (!idle) {
      entry.idleSince = undefined;
      entry.idleTimer?.cancel();
      entry.idleTimer = undefined;
      return;
    }
    if (entry.idleSince !== undefined) return;
    const since = this.o.clock.now();
    entry.idleSince = since;
    entry.idleTimer = this.o.mainThread.schedule(() => {
      if (this.closed || this.taskExecutors.get(entry.resourceId) !== entry || entry.idleSince !== since) return;
      entry.idleTimer = undefined;
      this.taskExecutors.delete(entry.resourceId);
      const reason = `idle for ${this.o.clock.now() - since} ms (resourcemanager.taskmanager-timeout is ${this.o.idleTimeoutMs} ms)`;
      this.o.logger.info('releasing an idle TaskExecutor', { resourceId: entry.resourceId, reason });
      this.o.actions.releaseIdleTaskExecutor(entry.resourceId, reason);
      this.checkRequirements();
    }, this.o.idleTimeoutMs, (error) => this.o.logger.error('idle check failed', { error }));
  }
}
