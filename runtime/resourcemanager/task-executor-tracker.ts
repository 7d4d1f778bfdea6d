// What the SlotManager knows of the cluster (Flink's TaskManagerTracker): the registered TaskExecutors with
// their slots, and the workers started (or adopted from the warm pool) that have not registered yet. It
// decides nothing: the SlotManager matches requirements against it and starts or stops workers.
import type { Timer } from '../core/clock.js';
import { slotIdString } from '../core/ids.js';
import type { AllocationId, JobId, ResourceId, SlotId } from '../core/ids.js';
import { profileKey, type ResourceProfile } from '../core/resource-profile.js';

export type SlotState = 'free' | 'pending' | 'allocated';

export interface SlotEntry {
  readonly slotId: SlotId;
  state: SlotState;
  allocationId: AllocationId | undefined;
  jobId: JobId | undefined;
  /** A request on this slot failed: it waits for the TaskExecutor's next report before it is used again. */
  suspect: boolean;
  /** A pending request the job no longer needs; it no longer counts towards the requirement. */
  cancelled: boolean;
}

export interface TaskExecutorEntry {
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

export interface PendingWorker {
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

/** One slot as the SlotManager's snapshot shows it. */
export interface SlotView {
  readonly slotId: string;
  readonly profile: string;
  readonly state: SlotState;
  readonly allocationId?: AllocationId;
  readonly jobId?: JobId;
}

/** A slot no longer held or requested by anyone. */
export function markFree(slot: SlotEntry): void {
  slot.state = 'free';
  slot.allocationId = undefined;
  slot.jobId = undefined;
  slot.cancelled = false;
}

export class TaskExecutorTracker {
  private readonly registered = new Map<ResourceId, TaskExecutorEntry>();
  private readonly pending = new Map<ResourceId, PendingWorker>();

  // ---- registered TaskExecutors ------------------------------------------------------------------

  /** A new entry for a TaskExecutor that registered now: every slot free, not yet reported. */
  static newEntry(resourceId: ResourceId, numberOfSlots: number, profile: ResourceProfile | undefined): TaskExecutorEntry {
    return {
      resourceId,
      profileKey: profileKey(profile),
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
  }

  get(resourceId: ResourceId): TaskExecutorEntry | undefined {
    return this.registered.get(resourceId);
  }

  isRegistered(resourceId: ResourceId): boolean {
    return this.registered.has(resourceId);
  }

  add(entry: TaskExecutorEntry): void {
    this.registered.set(entry.resourceId, entry);
  }

  /** Forgets a registered TaskExecutor; returns whether it was known. */
  remove(resourceId: ResourceId): boolean {
    return this.registered.delete(resourceId);
  }

  entries(): IterableIterator<TaskExecutorEntry> {
    return this.registered.values();
  }

  registeredIds(): ResourceId[] {
    return [...this.registered.keys()];
  }

  get registeredCount(): number {
    return this.registered.size;
  }

  /** Those whose slots serve the profile `key`. */
  entriesOf(key: string): TaskExecutorEntry[] {
    return [...this.registered.values()].filter((e) => e.profileKey === key);
  }

  /** Those of a profile that may take new allocations: not leaving. */
  stayingEntriesOf(key: string): TaskExecutorEntry[] {
    return this.entriesOf(key).filter((e) => !e.leaving);
  }

  /** Registered TaskExecutors that count against 'resourcemanager.max-taskmanagers': one leaving is on its way out. */
  stayingCount(): number {
    let n = 0;
    for (const e of this.registered.values()) if (!e.leaving) n++;
    return n;
  }

  /** Registered TaskExecutors with no slot allocated or requested: those a warm pool may keep. */
  freeTaskExecutors(): ResourceId[] {
    return [...this.registered.values()].filter((e) => e.slots.every((slot) => slot.state === 'free')).map((e) => e.resourceId);
  }

  /** Every registered slot, and how many of them are free. */
  slotTotals(): { readonly totalSlots: number; readonly freeSlots: number } {
    let totalSlots = 0;
    let freeSlots = 0;
    for (const entry of this.registered.values()) {
      totalSlots += entry.slots.length;
      for (const slot of entry.slots) if (slot.state === 'free') freeSlots++;
    }
    return { totalSlots, freeSlots };
  }

  slotViews(): SlotView[] {
    const slots: SlotView[] = [];
    for (const entry of this.registered.values()) {
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
    return slots;
  }

  // ---- workers started, not yet registered -------------------------------------------------------

  addPending(worker: PendingWorker): void {
    this.pending.set(worker.id, worker);
  }

  getPending(id: ResourceId): PendingWorker | undefined {
    return this.pending.get(id);
  }

  removePending(id: ResourceId): void {
    this.pending.delete(id);
  }

  /** Workers started and not yet registered, including ones being stopped. */
  pendingIds(): ResourceId[] {
    return [...this.pending.keys()];
  }

  allPending(): IterableIterator<PendingWorker> {
    return this.pending.values();
  }

  /** Pending workers not being stopped: those that will register. */
  livePending(): PendingWorker[] {
    return [...this.pending.values()].filter((w) => !w.stopping);
  }
}
