// The JobMaster's slot pool: the slots TaskExecutors offered it, how many it needs, and what it tells the
// ResourceManager. It accepts offers whenever it holds fewer slots than it needs (also after a failover),
// gives back slots that stay unused past 'slot.idle.timeout', declares a lower requirement before it
// frees a slot (so the ResourceManager does not hand the slot straight back), and frees everything when
// the job ends: no slot leaks. Runs on the JobMaster's main thread.
import type { Clock, Timer } from '../core/clock.js';
import type { AllocationId, ResourceId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import { profileKey, type ResourceProfile } from '../core/resource-profile.js';
import type { MainThread } from '../rpc/main-thread.js';
import type { SlotOffer } from '../protocol/jobmaster-gateway.js';
import type { ResourceRequirement, ResourceRequirements } from '../protocol/resourcemanager-gateway.js';

export interface PooledSlot {
  readonly allocationId: AllocationId;
  readonly resourceId: ResourceId;
  readonly slotIndex: number;
  /** The profile of its TaskExecutor's slots; absent: the default. */
  readonly profile?: ResourceProfile;
}

export interface SlotPoolActions {
  /** Tells the ResourceManager how many slots (of each profile) the job needs; settles once it answered (or could not). */
  declareRequirements(requirements: ResourceRequirements): Promise<void>;
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
  /** Slots held per profile key, kept with `slots`: offers of thousands of slots stay linear. */
  private readonly held = new Map<string, number>();
  /** Per profile key, the slots of that profile needed. */
  private required = new Map<string, ResourceRequirement>();
  /** What was last declared, as `signature` writes it. */
  private declared: string | undefined;
  private requestTimer: Timer | undefined;
  private closed = false;

  constructor(private readonly o: SlotPoolOptions) {}

  get size(): number {
    return this.slots.size;
  }

  /** Slots needed, of every profile together. */
  get requiredSlots(): number {
    let n = 0;
    for (const r of this.required.values()) n += r.slots;
    return n;
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
  setRequired(requirements: number | readonly ResourceRequirement[]): void {
    this.o.main.assertInMainThread();
    if (this.closed) return;
    const list = typeof requirements === 'number' ? [{ slots: requirements }] : requirements;
    const next = new Map<string, ResourceRequirement>();
    for (const r of list) {
      const key = profileKey(r.profile);
      const slots = (next.get(key)?.slots ?? 0) + Math.max(0, r.slots);
      next.set(key, r.profile === undefined ? { slots } : { profile: r.profile, slots });
    }
    this.required = next;
    this.armRequestTimer();
    this.declareIfChanged();
  }

  /** Re-sends the requirement (a new ResourceManager connection). */
  redeclare(): void {
    if (this.closed) return;
    this.declared = undefined;
    this.declareIfChanged();
  }

  /** The requirement as the ResourceManager takes it; per profile only when some slot is not of the default. */
  requirements(): ResourceRequirements {
    const byProfile = [...this.required.values()].filter((r) => r.slots > 0);
    const slots = this.requiredSlots;
    return byProfile.some((r) => r.profile !== undefined) ? { slots, byProfile } : { slots };
  }

  private declareIfChanged(): Promise<void> {
    const requirements = this.requirements();
    const signature = JSON.stringify(requirements);
    if (signature === this.declared) return Promise.resolve();
    this.declared = signature;
    return this.o.actions.declareRequirements(requirements);
  }

  private heldOf(key: string): number {
    return this.held.get(key) ?? 0;
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
      } else {
        // A slot serves only its profile's requirement: a default slot never stands in for a profiled one.
        const key = profileKey(offer.profile);
        if (this.heldOf(key) < (this.required.get(key)?.slots ?? 0)) {
          const profile = offer.profile === undefined ? {} : { profile: offer.profile };
          this.slots.set(offer.allocationId, {
            allocationId: offer.allocationId,
            resourceId,
            slotIndex: offer.slotIndex,
            ...profile,
            inUse: false,
            idleTimer: undefined,
          });
          this.held.set(key, this.heldOf(key) + 1);
          accepted.push(offer.allocationId);
        }
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
    const key = profileKey(slot.profile);
    const of = this.required.get(key);
    if (!this.closed && of !== undefined) {
      this.required.set(key, { ...of, slots: Math.min(of.slots, this.heldOf(key)) });
      await this.declareIfChanged().catch(() => undefined);
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
    const key = profileKey(slot.profile);
    this.held.set(key, this.heldOf(key) - 1);
    return slot;
  }

  /** Some profile has fewer slots held than needed. */
  private short(): boolean {
    for (const [key, r] of this.required) if (this.heldOf(key) < r.slots) return true;
    return false;
  }

  private armRequestTimer(): void {
    if (this.closed || !this.short()) {
      this.requestTimer?.cancel();
      this.requestTimer = undefined;
      return;
    }
    if (this.requestTimer !== undefined) return;
    this.requestTimer = this.o.main.schedule(() => {
      this.requestTimer = undefined;
      if (!this.closed && this.short()) this.o.actions.slotRequestTimedOut(this.requiredSlots, this.slots.size);
    }, this.o.requestTimeoutMs);
  }
}
