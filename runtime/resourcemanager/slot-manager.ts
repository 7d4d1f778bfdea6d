// The ResourceManager's slot table and its decisions (Flink's declarative SlotManager): which free slot
// goes to the job, how many TaskExecutors to start or stop, when the cluster can never be enough.
// It runs on the ResourceManager's main thread; remote effects go out through SlotManagerActions. What it
// knows of the cluster is kept by the TaskExecutorTracker, the workers on their way by WorkerStarts; this
// file holds the matching, one decision loop (`checkRequirements`) with the slot requests it sends and
// their answers, which is why it stays a little over 500 lines.
import type { Clock, Timer } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import { AllocationId, slotIdString } from '../core/ids.js';
import type { FencingToken, JobId, ResourceId, SlotId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { profileKey, type ResourceProfile } from '../core/resource-profile.js';
import { detached } from '../rpc/detached.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { SlotReport, SlotRequest } from '../protocol/taskexecutor-gateway.js';
import type { ClusterResources, ResourceRequirement } from '../protocol/resourcemanager-gateway.js';
import { WorkerStarts } from './worker-starts.js';
import { TaskExecutorTracker, markFree, type SlotEntry, type SlotView, type TaskExecutorEntry } from './task-executor-tracker.js';

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
  /**
   * Workers' worth of free slots kept beyond the job's requirement of each profile it requires, so a lost
   * worker's slots are found free at once ('slotmanager.redundant-taskmanager-num'). @default 0
   */
  readonly redundantWorkers?: number;
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
  readonly slots: readonly SlotView[];
  /** Per profile key, the slots required. */
  readonly requiredByProfile: Readonly<Record<string, number>>;
  /** Per pending worker, the profile key it was started for. */
  readonly pendingWorkerProfiles: Readonly<Record<string, string>>;
  readonly consecutiveFailedStarts: number;
}

export class SlotManager {
  private readonly tracker = new TaskExecutorTracker();
  private required = 0;
  /** Per profile key, its profile and the slots of it required; their slots add up to `required`. */
  private requiredByProfile = new Map<string, ResourceRequirement>();
  private jobMaster: JobMasterTarget | undefined;
  private readonly starts: WorkerStarts;
  /** The requirement last reported as unreachable, so the JobMaster is told once, not on every check. */
  private notifiedUnreachable: number | undefined;
  private closed = false;
  private recoveryTimer: Timer | undefined;

  constructor(private readonly o: SlotManagerOptions) {
    this.starts = new WorkerStarts({
      tracker: this.tracker,
      mainThread: o.mainThread,
      logger: o.logger,
      ...(o.registrationTimeoutMs !== undefined ? { registrationTimeoutMs: o.registrationTimeoutMs } : {}),
      stopWorker: (id, reason) => o.actions.stopWorker(id, reason),
      gaveUp: (cause) => {
        if (this.jobMaster !== undefined && this.required > 0) {
          o.actions.notifyNotEnoughResources(this.required, { ...this.clusterResources(), workerStartFailure: cause });
        }
      },
      changed: () => this.checkRequirements(),
      isClosed: () => this.closed,
    });
  }

  // ---- TaskExecutors -----------------------------------------------------------------------------

  registerTaskExecutor(resourceId: ResourceId, numberOfSlots: number, profile?: ResourceProfile): void {
    this.o.mainThread.assertInMainThread();
    const key = profileKey(profile);
    const existing = this.tracker.get(resourceId);
    if (existing !== undefined && existing.slots.length === numberOfSlots && existing.profileKey === key) {
      // A reconnect of the same process: keep what we know; its next report corrects the rest.
      return;
    }
    if (existing !== undefined) this.removeTaskExecutor(resourceId);
    const entry = TaskExecutorTracker.newEntry(resourceId, numberOfSlots, profile);
    this.tracker.add(entry);
    this.starts.registered(resourceId);
    this.updateIdle(entry);
    this.checkRequirements();
  }

  /** Forgets a TaskExecutor and its slots; returns whether it was known. */
  removeTaskExecutor(resourceId: ResourceId): boolean {
    this.o.mainThread.assertInMainThread();
    const entry = this.tracker.get(resourceId);
    if (entry === undefined) return false;
    entry.idleTimer?.cancel();
    this.tracker.remove(resourceId);
    this.checkRequirements();
    return true;
  }

  /** Registered TaskExecutors with no slot allocated or requested: those a warm pool may keep. */
  freeTaskExecutors(): ResourceId[] {
    this.o.mainThread.assertInMainThread();
    return this.tracker.freeTaskExecutors();
  }

  /**
   * A TaskExecutor from the warm pool, asked to register here: it counts as a worker started for
   * `profile` until it registers (or fails to), so no other is started for its slots.
   */
  adoptWorker(id: ResourceId, profile: ResourceProfile | undefined): void {
    this.o.mainThread.assertInMainThread();
    this.starts.add({ id, profileKey: profileKey(profile), startedAt: this.o.clock.now(), stopping: false, adopted: true });
  }

  isRegistered(resourceId: ResourceId): boolean {
    return this.tracker.isRegistered(resourceId);
  }

  /** Brings the table in line with what the TaskExecutor says it holds; the TaskExecutor is the truth. */
  reportSlotStatus(report: SlotReport): boolean {
    this.o.mainThread.assertInMainThread();
    const entry = this.tracker.get(report.resourceId);
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
          if (slot.state === 'free')
            this.o.logger.info('slot report: a slot thought free is allocated', { slot: slotIdString(slot.slotId), allocationId: status.allocationId });
          slot.state = 'allocated';
          slot.allocationId = status.allocationId;
          slot.jobId = status.jobId;
        }
        slot.cancelled = false;
        slot.suspect = false;
      } else if (slot.state === 'allocated') {
        this.o.logger.info('slot report: a slot thought allocated is free', { slot: slotIdString(slot.slotId), allocationId: slot.allocationId });
        markFree(slot);
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
    const entry = this.tracker.get(slotId.resourceId);
    const slot = entry?.slots[slotId.slotIndex];
    if (entry === undefined || slot === undefined) return;
    if (slot.allocationId !== allocationId) {
      this.o.logger.debug('ignoring a free notice for an allocation the slot no longer has', {
        slot: slotIdString(slotId),
        allocationId,
        current: slot.allocationId,
      });
      return;
    }
    markFree(slot);
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
    if (this.starts.startFailed(id, cause, fatal)) this.checkRequirements();
  }

  isPendingWorker(id: ResourceId): boolean {
    return this.tracker.getPending(id) !== undefined;
  }

  /** A worker started and then found unneeded before it registered: it is on its way out. */
  isStoppingWorker(id: ResourceId): boolean {
    return this.tracker.getPending(id)?.stopping === true;
  }

  /** Workers started and not yet registered, including ones being stopped. */
  pendingWorkerIds(): ResourceId[] {
    return this.tracker.pendingIds();
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
    for (const entry of this.tracker.entries()) {
      for (const slot of entry.slots) if (slot.jobId === this.o.jobId) markFree(slot);
      this.updateIdle(entry);
    }
    this.checkRequirements();
  }

  clusterResources(): ClusterResources {
    const { totalSlots, freeSlots } = this.tracker.slotTotals();
    return {
      registeredTaskExecutors: this.tracker.registeredCount,
      slotsPerTaskExecutor: this.o.slotsPerWorker,
      totalSlots,
      freeSlots,
      pendingTaskExecutors: this.tracker.livePending().length,
      maxTaskExecutors: this.o.maxWorkers,
    };
  }

  snapshot(): SlotManagerSnapshot {
    return {
      required: this.required,
      registered: this.tracker.registeredIds(),
      pendingWorkers: this.tracker.livePending().map((w) => w.id),
      slots: this.tracker.slotViews(),
      consecutiveFailedStarts: this.starts.consecutiveFailedStarts,
      requiredByProfile: Object.fromEntries([...this.requiredByProfile].map(([k, r]) => [k, r.slots])),
      pendingWorkerProfiles: Object.fromEntries(this.tracker.livePending().map((w) => [w.id, w.profileKey])),
    };
  }

  close(): void {
    this.closed = true;
    this.recoveryTimer?.cancel();
    for (const entry of this.tracker.entries()) entry.idleTimer?.cancel();
    this.starts.close();
  }

  /**
   * The one place where decisions are made: request free slots, start or stop workers, or tell the
   * JobMaster the requirement can never be met. Safe to call after every change. Each profile is
   * matched on its own: a slot serves only requests of its TaskExecutor's profile.
   */
  private checkRequirements(): void {
    if (this.closed) return;
    const jm = this.jobMaster;
    const keys = new Set([...this.requiredByProfile.keys(), ...this.tracker.livePending().map((w) => w.profileKey)]);
    const toStart: { key: string; profile: ResourceProfile | undefined; workers: number; missing: number }[] = [];
    let stillMissing = false;
    for (const key of keys) {
      const requirement = this.requiredByProfile.get(key);
      const required = jm === undefined ? 0 : (requirement?.slots ?? 0);
      let acquired = 0;
      for (const entry of this.tracker.entriesOf(key)) {
        for (const slot of entry.slots) if (this.countsForJob(slot)) acquired++;
      }
      let missing = required - acquired;

      if (missing < 0) this.cancelPendingRequests(key, -missing);

      let usableFree = 0;
      if (jm !== undefined) {
        for (const slot of this.usableFreeSlots(key)) {
          if (missing <= 0) usableFree++;
          else {
            this.allocate(slot, jm);
            missing--;
          }
        }
      }
      if (missing > 0) stillMissing = true;

      // Free slots that cannot be used yet (failed request, no report yet) will be soon: no worker for them.
      let waitingFree = 0;
      for (const entry of this.tracker.stayingEntriesOf(key)) {
        for (const slot of entry.slots) if (slot.state === 'free' && !(entry.reported && !slot.suspect)) waitingFree++;
      }
      const redundant = required > 0 ? this.redundantSlots : 0;
      const neededWorkers = Math.max(0, Math.ceil((missing + redundant - usableFree - waitingFree) / this.o.slotsPerWorker));
      const live = this.tracker.livePending().filter((w) => w.profileKey === key);

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
        this.o.logger.warn('the job needs more slots than this cluster may ever offer', {
          required,
          byProfile: Object.fromEntries([...this.requiredByProfile].map(([k, r]) => [k, r.slots])),
          ...resources,
        });
        this.o.actions.notifyNotEnoughResources(required, resources);
      }
      return;
    }
    if (this.starts.exhausted) return;
    const waitUntil = this.o.startWorkersNotBeforeMs;
    if (waitUntil !== undefined && this.o.clock.now() < waitUntil) {
      if (this.recoveryTimer === undefined) {
        this.o.logger.info("waiting for a former leader's TaskExecutors before starting any", {
          missing: toStart.reduce((n, p) => n + p.missing, 0),
          waitMs: waitUntil - this.o.clock.now(),
        });
        this.recoveryTimer = this.o.mainThread.schedule(() => {
          // Cleared first: a timer that fires a moment early by the wall clock must be able to wait again.
          this.recoveryTimer = undefined;
          this.checkRequirements();
        }, waitUntil - this.o.clock.now());
      }
      return;
    }
    let room = Math.max(0, this.o.maxWorkers - this.tracker.stayingCount() - this.tracker.livePending().length);
    for (const plan of toStart) {
      const n = Math.min(plan.workers, room);
      room -= n;
      for (let i = 0; i < n; i++) {
        const id = this.o.actions.startWorker(plan.profile);
        this.starts.add({ id, profileKey: plan.key, startedAt: this.o.clock.now(), stopping: false });
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
      for (const entry of this.tracker.stayingEntriesOf(key)) {
        for (const slot of entry.slots) if (slot.state === 'free' || slot.jobId === this.o.jobId) slots++;
      }
      workersToStart += Math.ceil(Math.max(0, requirement.slots - slots) / this.o.slotsPerWorker);
    }
    let occupying = 0;
    for (const entry of this.tracker.entries()) {
      const releasable = entry.leaving || (!this.requiredByProfile.has(entry.profileKey) && entry.slots.every((s) => s.state === 'free'));
      if (!releasable) occupying++;
    }
    return workersToStart <= Math.max(0, this.o.maxWorkers - occupying);
  }

  private countsForJob(slot: SlotEntry): boolean {
    if (slot.jobId !== this.o.jobId) return false;
    return slot.state === 'allocated' || (slot.state === 'pending' && !slot.cancelled);
  }

  /** Free, reported, not suspect; TaskExecutors already holding the job's slots first, so idle ones can go. */
  private usableFreeSlots(key: string): SlotEntry[] {
    const entries = this.tracker.stayingEntriesOf(key).filter((e) => e.reported);
    const busy = (e: TaskExecutorEntry): number => e.slots.filter((s) => s.state !== 'free').length;
    entries.sort((a, b) => busy(b) - busy(a));
    return entries.flatMap((e) => e.slots.filter((s) => s.state === 'free' && !s.suspect));
  }

  private cancelPendingRequests(key: string, excess: number): void {
    for (const entry of this.tracker.entriesOf(key)) {
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
    const entry = this.tracker.get(slot.slotId.resourceId);
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
      sent
        .then(
          () => this.o.mainThread.run(() => this.slotRequestAnswered(slot, allocationId, undefined)),
          (error: unknown) => this.o.mainThread.run(() => this.slotRequestAnswered(slot, allocationId, error)),
        )
        .catch(() => {
          // The main thread closed: the answer no longer matters.
        });
    });
  }

  private slotRequestAnswered(slot: SlotEntry, allocationId: AllocationId, error: unknown): void {
    if (this.closed) return;
    const entry = this.tracker.get(slot.slotId.resourceId);
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
      markFree(slot);
      slot.suspect = true;
      this.updateIdle(entry);
    }
    this.checkRequirements();
  }

  private get redundantSlots(): number {
    return (this.o.redundantWorkers ?? 0) * this.o.slotsPerWorker;
  }

  /** Whether releasing the idle `entry` would leave fewer free slots of its profile than the redundancy keeps. */
  private keptRedundant(entry: TaskExecutorEntry): boolean {
    const required = this.jobMaster === undefined ? 0 : (this.requiredByProfile.get(entry.profileKey)?.slots ?? 0);
    if (this.redundantSlots === 0 || required === 0) return false;
    let free = 0;
    for (const e of this.tracker.stayingEntriesOf(entry.profileKey)) for (const slot of e.slots) if (slot.state === 'free') free++;
    return free - entry.slots.length < this.redundantSlots;
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
    entry.idleTimer = this.o.mainThread.schedule(
      () => {
        if (this.closed || this.tracker.get(entry.resourceId) !== entry || entry.idleSince !== since) return;
        entry.idleTimer = undefined;
        if (this.keptRedundant(entry)) {
          // Part of the redundancy while the job requires its profile: idle again from now.
          entry.idleSince = undefined;
          this.updateIdle(entry);
          return;
        }
        this.tracker.remove(entry.resourceId);
        const reason = `idle for ${this.o.clock.now() - since} ms (resourcemanager.taskmanager-timeout is ${this.o.idleTimeoutMs} ms)`;
        this.o.logger.info('releasing an idle TaskExecutor', { resourceId: entry.resourceId, reason });
        this.o.actions.releaseIdleTaskExecutor(entry.resourceId, reason);
        this.checkRequirements();
      },
      this.o.idleTimeoutMs,
      (error) => this.o.logger.error('idle check failed', { error }),
    );
  }
}
