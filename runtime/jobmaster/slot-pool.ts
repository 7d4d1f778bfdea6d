// The JobMaster's slot pool: the slots TaskExecutors offered it, how many it needs, and what it tells the
// ResourceManager. It accepts offers whenever it holds fewer slots than it needs (also after a failover),
// gives back slots that stay unused past 'slot.idle.timeout', declares a lower requirement before it
// frees a slot (so the ResourceManager does not hand the slot straight back), and frees everything when
// the job ends: no slot leaks. Runs on the JobMaster's main thread.
import type { Clock, Timer } from '../core/clock.js';
import type { AllocationId, ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { SlotOffer } from '../protocol/jobmaster-gateway.js';

export interface PooledSlot {
  readonly allocationId: AllocationId;
  readonly resourceId: ResourceId;
  readonly slotIndex: number;
}

export interface SlotPoolActions {
  /** Tells the ResourceManager how many slots the job needs; settles once it answered (or could not). */
  declareRequirements(slots: number): Promise<void>;
  /** Hands a slot back to its TaskExecutor (which tells the ResourceManager it is free). */
  freeSlot(slot: PooledSlot, cause: string): void;
  /** Slots the pool needs have not all arrived within 'slot.request.timeout'. */
  slotRequestTimedOut(required: number, held: number): void;
}

export interface SlotPoolOptions {
  readonly idleTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly clock: Clock;
  readonly main: MainThread;
  readonly logger: Logger;
  readonly actions: SlotPoolActions;
}

interface Entry extends PooledSlot {
  inUse: boolean;
  idleTimer: Timer | undefined;
}

export class SlotPool {
  private readonly slots = new Map<AllocationId, Entry>();
  private required = 0;
  private declared: number | undefined;
  private requestTimer: Timer | undefined;
  private closed = false;

  constructor(private readonly o: SlotPoolOptions) {}

  get size(): number {
    return this.slots.size;
  }

  get requiredSlots(): number {
    return this.required;
  }

  has(allocationId: AllocationId): boolean {
    return this.slots.has(allocationId);
  }

  get(allocationId: AllocationId): PooledSlot | undefined {
    return this.slots.get(allocationId);
  }

  all(): PooledSlot[] {
    return [...this.slots.values()];
  }

  /**
   * Sets how many slots the job needs now and declares it when it changed. While fewer are held, the
   * slot request timer runs; it stops once enough arrived.
   */
  setRequired(slots: number): void {
    this.o.main.assertInMainThread();
    if (this.closed) return;
    this.required = Math.max(0, slots);
    this.armRequestTimer();
    if (this.declared !== this.required) {
      this.declared = this.required;
      void this.o.actions.declareRequirements(this.required);
    }
  }

  /** Re-sends the requirement (a new ResourceManager connection). */
  redeclare(): void {
    if (this.closed) return;
    this.declared = this.required;
    void this.o.actions.declareRequirements(this.required);
  }

  /** Accepts offers while it holds fewer slots than needed; offers it holds already are accepted again. */
  offerSlots(resourceId: ResourceId, offers: readonly SlotOffer[]): AllocationId[] {
    this.o.main.assertInMainThread();
    const accepted: AllocationId[] = [];
    if (this.closed) return accepted;
    for (const offer of offers) {
      const known = this.slots.get(offer.allocationId);
      if (known !== undefined) {
        if (known.resourceId === resourceId) accepted.push(offer.allocationId);
      } else if (this.slots.size < this.required) {
        this.slots.set(offer.allocationId, { allocationId: offer.allocationId, resourceId, slotIndex: offer.slotIndex, inUse: false, idleTimer: undefined });
        accepted.push(offer.allocationId);
      }
    }
    this.armRequestTimer();
    return accepted;
  }

  /**
   * Marks a slot used (tasks placed in it run or will) or unused. An unused slot goes back after
   * 'slot.idle.timeout' unless it is used again first.
   */
  setInUse(allocationId: AllocationId, inUse: boolean): void {
    const slot = this.slots.get(allocationId);
    if (slot === undefined || this.closed) return;
    slot.inUse = inUse;
    if (inUse) {
      slot.idleTimer?.cancel();
      slot.idleTimer = undefined;
      return;
    }
    if (slot.idleTimer !== undefined) return;
    slot.idleTimer = this.o.main.schedule(() => {
      slot.idleTimer = undefined;
      if (this.slots.get(allocationId) === slot && !slot.inUse) void this.release(allocationId, `idle for ${this.o.idleTimeoutMs} ms ('slot.idle.timeout')`);
    }, this.o.idleTimeoutMs);
  }

  /**
   * Gives a slot back: the lower requirement is declared first, then the slot is freed on its
   * TaskExecutor. Returns once both were sent.
   */
  async release(allocationId: AllocationId, cause: string): Promise<void> {
    const slot = this.remove(allocationId);
    if (slot === undefined) return;
    this.o.logger.info('releasing slot', { allocationId, resourceId: slot.resourceId, cause });
    const lower = Math.min(this.required, this.slots.size);
    if (!this.closed && lower !== this.declared) {
      this.required = lower;
      this.declared = lower;
      await this.o.actions.declareRequirements(lower).catch(() => undefined);
    }
    this.o.actions.freeSlot(slot, cause);
  }

  /** A slot failed on its TaskExecutor: forget it (nothing to free). */
  slotFailed(allocationId: AllocationId): PooledSlot | undefined {
    const slot = this.remove(allocationId);
    this.armRequestTimer();
    return slot;
  }

  /** The TaskExecutor is gone: forget its slots and return them. */
  releaseTaskManager(resourceId: ResourceId): PooledSlot[] {
    const lost: PooledSlot[] = [];
    for (const slot of [...this.slots.values()]) {
      if (slot.resourceId !== resourceId) continue;
      this.remove(slot.allocationId);
      lost.push(slot);
    }
    this.armRequestTimer();
    return lost;
  }

  /** The job ended: frees every slot and requires none. Nothing is declared: the RM is told the job ended. */
  close(cause: string): void {
    if (this.closed) return;
    this.closed = true;
    this.requestTimer?.cancel();
    this.requestTimer = undefined;
    for (const slot of [...this.slots.values()]) {
      this.remove(slot.allocationId);
      this.o.actions.freeSlot(slot, cause);
    }
  }

  private remove(allocationId: AllocationId): Entry | undefined {
    const slot = this.slots.get(allocationId);
    if (slot === undefined) return undefined;
    slot.idleTimer?.cancel();
    this.slots.delete(allocationId);
    return slot;
  }

  private armRequestTimer(): void {
    if (this.closed || this.slots.size >= this.required) {
      this.requestTimer?.cancel();
      this.requestTimer = undefined;
      return;
    }
    if (this.requestTimer !== undefined) return;
    this.requestTimer = this.o.main.schedule(() => {
      this.requestTimer = undefined;
      if (!this.closed && this.slots.size < this.required) this.o.actions.slotRequestTimedOut(this.required, this.slots.size);
    }, this.o.requestTimeoutMs);
  }
}
