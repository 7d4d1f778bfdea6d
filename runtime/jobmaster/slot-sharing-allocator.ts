// Slot sharing (Flink's SlotSharingExecutionSlotAllocator over its ExecutionSlotSharingGroups): subtask
// i of every vertex of a slot sharing group runs in the group's slot i. The allocator knows which of
// those shared slots are still needed, declares to the slot pool what it must hold per resource
// profile, gives back the slots that fell idle, and places free pool slots in the vacant ones.
import type { AllocationId } from '../core/ids.js';
import { profileKey, type ResourceProfile } from '../core/resource-profile.js';
import { ExecutionState, isExecutionTerminal } from '../jobgraph/job-status.js';
import { profileOfGroup, type JobGraph } from '../jobgraph/jobgraph.js';
import { slotSharingGroupSizes } from '../jobgraph/slot-sharing.js';
import type { ResourceRequirement } from '../protocol/resourcemanager-gateway.js';
import type { Execution, ExecutionGraph, ExecutionVertex } from './execution-graph.js';
import type { PooledSlot, SlotPool } from './slot-pool.js';

/** One shared slot of a slot sharing group: position `index` holds subtask `index` of every vertex in the group. */
export interface ExecutionSlotSharingGroup {
  readonly group: string;
  /** The subtasks placed here: subtask `index` of every vertex of the group that has one. */
  readonly subtasks: ExecutionVertex[];
  /** The group's resource profile (undefined: default) and its key: only a slot of that profile fits. */
  readonly profile: ResourceProfile | undefined;
  readonly profileKey: string;
  readonly index: number;
  slot: AllocationId | undefined;
}

export class SlotSharingExecutionSlotAllocator {
  private readonly shared: ExecutionSlotSharingGroup[] = [];
  private readonly bySlot = new Map<AllocationId, ExecutionSlotSharingGroup>();
  private readonly byGroup = new Map<string, ExecutionSlotSharingGroup[]>();
  /** What the last pass of update declared, per profile key, and the shared slots it counted. */
  private required = new Map<string, ResourceRequirement>();
  private readonly countedNeeded = new Set<ExecutionSlotSharingGroup>();
  /** Needed shared slots without a pool slot after the last pass (or possibly, after a vacate since). */
  private vacantNeeded = 0;
  private placedOnce = false;

  constructor(
    jobGraph: JobGraph,
    private readonly graph: ExecutionGraph,
    private readonly slotPool: SlotPool,
  ) {
    for (const [group, size] of slotSharingGroupSizes(jobGraph)) {
      const list: ExecutionSlotSharingGroup[] = [];
      const profile = profileOfGroup(jobGraph, group);
      for (let index = 0; index < size; index++) {
        const p: ExecutionSlotSharingGroup = { group, subtasks: [], profile, profileKey: profileKey(profile), index, slot: undefined };
        list.push(p);
        this.shared.push(p);
      }
      this.byGroup.set(group, list);
    }
    for (const v of jobGraph.vertices) {
      const list = this.byGroup.get(v.slotSharingGroup)!;
      graph.subtaskVertices(v.id).forEach((ev, i) => list[i]!.subtasks.push(ev));
    }
  }

  /** Slots the whole job needs at once: per slot sharing group its largest parallelism, summed. */
  get totalSlots(): number {
    return this.shared.length;
  }

  /** The pool slot each execution's shared slot holds; undefined when one of them has none yet. */
  slotsFor(executions: readonly Execution[]): AllocationId[] | undefined {
    const slots = executions.map((e) => this.byGroup.get(e.vertex.slotSharingGroup)![e.subtaskIndex]!.slot);
    return slots.some((s) => s === undefined) ? undefined : (slots as AllocationId[]);
  }

  /**
   * What one FINISHED execution changes to its shared slot, dealt with alone when that is what update()
   * would do: nothing while another subtask there has yet to finish; otherwise its slot goes back to the
   * pool's unused slots and the requirement drops by one. False when the whole pass is needed (a vacant
   * shared slot might take the slot, the slot is still busy, or it was not counted as needed by the last pass).
   */
  executionFinished(e: Execution): boolean {
    const p = this.byGroup.get(e.vertex.slotSharingGroup)?.[e.subtaskIndex];
    if (p === undefined) return false;
    if (needed(p)) return true;
    if (this.vacantNeeded > 0 || !this.countedNeeded.has(p)) return false;
    const slot = p.slot;
    if (slot !== undefined) {
      if (p.subtasks.some((ev) => ev.current.location?.allocationId === slot && !isExecutionTerminal(ev.current.state))) return false;
      this.slotPool.setInUse(slot, false);
      this.bySlot.delete(slot);
      p.slot = undefined;
    }
    this.countedNeeded.delete(p);
    const r = this.required.get(p.profileKey)!;
    this.required.set(p.profileKey, { ...r, slots: r.slots - 1 });
    this.slotPool.setRequired([...this.required.values()]);
    return true;
  }

  /**
   * Which shared slots are needed (some subtask there has yet to finish), what the pool must hold, which
   * slots fell idle, and (with `place`) placement of free pool slots in vacant shared slots. The first
   * placement waits for every slot, so each group's slots sit on as few TaskExecutors as possible.
   */
  update(place: boolean): void {
    // One pass over the shared slots and one over the executions, whatever the job's size.
    const neededNow = new Map<ExecutionSlotSharingGroup, boolean>();
    const isNeeded = (p: ExecutionSlotSharingGroup): boolean => {
      let need = neededNow.get(p);
      if (need === undefined) neededNow.set(p, (need = needed(p)));
      return need;
    };
    const busySlots = new Set<AllocationId>();
    for (const ev of this.graph.executionVertices) {
      const e = ev.current;
      if (e.location !== undefined && !isExecutionTerminal(e.state)) busySlots.add(e.location.allocationId);
    }
    const required = new Map<string, ResourceRequirement>();
    this.countedNeeded.clear();
    for (const p of this.shared) {
      const need = isNeeded(p);
      if (need) {
        this.countedNeeded.add(p);
        const slots = (required.get(p.profileKey)?.slots ?? 0) + 1;
        required.set(p.profileKey, p.profile === undefined ? { slots } : { profile: p.profile, slots });
      }
      if (p.slot !== undefined && !need && !busySlots.has(p.slot)) {
        this.slotPool.setInUse(p.slot, false);
        this.bySlot.delete(p.slot);
        p.slot = undefined;
      }
    }
    this.required = required;
    this.slotPool.setRequired([...required.values()]);
    if (!place) return;
    const vacant = this.shared.filter((p) => p.slot === undefined && isNeeded(p));
    this.vacantNeeded = vacant.length;
    if (vacant.length === 0) return;
    const free = this.slotPool
      .all()
      .filter((s) => !this.bySlot.has(s.allocationId))
      .sort((a, b) => (a.resourceId < b.resourceId ? -1 : a.resourceId > b.resourceId ? 1 : a.slotIndex - b.slotIndex));
    if (!this.placedOnce && free.length < vacant.length) return;
    // Free slots per profile, in order: each vacant shared slot takes the first of its profile.
    const freeByProfile = new Map<string, PooledSlot[]>();
    for (const slot of free) {
      const key = profileKey(slot.profile);
      let list = freeByProfile.get(key);
      if (list === undefined) freeByProfile.set(key, (list = []));
      list.push(slot);
    }
    const taken = new Map<string, number>();
    for (const p of vacant) {
      const list = freeByProfile.get(p.profileKey);
      const at = taken.get(p.profileKey) ?? 0;
      if (list === undefined || at >= list.length) continue;
      taken.set(p.profileKey, at + 1);
      const slot = list[at]!;
      p.slot = slot.allocationId;
      this.vacantNeeded--;
      this.bySlot.set(slot.allocationId, p);
      this.slotPool.setInUse(slot.allocationId, true);
    }
    this.placedOnce = true;
  }

  /** The pool no longer has this slot (it failed, was released or its TaskExecutor went): its shared slot is vacant. */
  vacate(allocationId: AllocationId): void {
    const p = this.bySlot.get(allocationId);
    if (p === undefined) return;
    this.bySlot.delete(allocationId);
    p.slot = undefined;
    // It may be needed: until the next whole pass says otherwise, finished executions take the whole pass.
    this.vacantNeeded++;
  }
}

/** Some subtask placed in this shared slot has yet to finish. */
function needed(p: ExecutionSlotSharingGroup): boolean {
  return p.subtasks.some((ev) => ev.current.state !== ExecutionState.FINISHED);
}
