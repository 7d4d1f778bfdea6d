// The slots a JobGraph needs under slot sharing: per group its largest parallelism, summed; per resource
// profile for admission. One formula, shared by the Dispatcher's admission and the JobMaster's scheduler.
import { describe, expect, it } from 'vitest';
import { profileKey } from '../../runtime/core/resource-profile.js';
import type { JobGraph, JobVertex } from '../../runtime/jobgraph/jobgraph.js';
import { requiredSlots, requiredSlotsByProfile, slotSharingGroupSizes } from '../../runtime/jobgraph/slot-sharing.js';

const v = (id: string, parallelism: number, slotSharingGroup: string): JobVertex => ({
  id,
  name: id,
  parallelism,
  maxParallelism: 128,
  slotSharingGroup,
  operators: [{ kind: 'map', id, name: id, fn: { export: 'default', operatorId: id } }],
});
const graph = (vertices: JobVertex[], resourceProfiles?: JobGraph['resourceProfiles']): Pick<JobGraph, 'vertices' | 'resourceProfiles'> => ({
  vertices,
  ...(resourceProfiles !== undefined ? { resourceProfiles } : {}),
});

describe('slot sharing', () => {
  it('needs per group its largest parallelism, in the order the groups first appear, summed over the groups', () => {
    const g = graph([v('a', 2, 'default'), v('b', 4, 'heavy'), v('c', 3, 'default'), v('d', 1, 'heavy')]);
    expect([...slotSharingGroupSizes(g)]).toEqual([
      ['default', 3],
      ['heavy', 4],
    ]);
    expect(requiredSlots(g)).toBe(7);
  });

  it('counts per resource profile: groups of one profile add up, a group without one takes default slots', () => {
    const heavy = { cpu: 2, memoryMiB: 4096 };
    const g = graph([v('a', 2, 'default'), v('b', 4, 'heavy'), v('c', 3, 'other'), v('d', 1, 'alsoHeavy')], { heavy, alsoHeavy: heavy });
    expect(requiredSlotsByProfile(g)).toEqual(
      new Map([
        [profileKey(undefined), 5],
        [profileKey(heavy), 5],
      ]),
    );
    expect(requiredSlots(g)).toBe(10);
  });
});
