// What a JobGraph needs in slots under slot sharing (Flink's SlotSharingGroup): subtask i of every vertex
// of a group runs in one slot, so a group needs as many slots as its largest parallelism. The
// Dispatcher's admission and the JobMaster's scheduler both count with these functions.
import { profileKey } from '../core/resource-profile.js';
import { profileOfGroup, type JobGraph } from './jobgraph.js';

/** Slot sharing group → its largest parallelism (the slots it needs), in the order the groups first appear. */
export function slotSharingGroupSizes(graph: Pick<JobGraph, 'vertices'>): Map<string, number> {
  const perGroup = new Map<string, number>();
  for (const v of graph.vertices) perGroup.set(v.slotSharingGroup, Math.max(perGroup.get(v.slotSharingGroup) ?? 0, v.parallelism));
  return perGroup;
}

/** Slots a job needs: per slot sharing group, the largest parallelism in it; summed over groups. */
export function requiredSlots(graph: Pick<JobGraph, 'vertices'>): number {
  let total = 0;
  for (const n of slotSharingGroupSizes(graph).values()) total += n;
  return total;
}

/** Slots a job needs per resource profile key: of each group's largest parallelism, summed over the groups of that profile. */
export function requiredSlotsByProfile(graph: Pick<JobGraph, 'vertices' | 'resourceProfiles'>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [group, n] of slotSharingGroupSizes(graph)) {
    const key = profileKey(profileOfGroup(graph, group));
    out.set(key, (out.get(key) ?? 0) + n);
  }
  return out;
}
