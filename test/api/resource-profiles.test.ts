import { describe, expect, it } from 'vitest';
import { defineJob } from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { JOB_GRAPH_LIMITS } from '../../runtime/jobgraph/limits.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import { buildOptions, problemsOf } from '../support/job-graphs.js';

const options = buildOptions;

const twoProfiles = defineJob('two-profiles', (env) => {
  env
    .fromSequence(1, 10)
    .map((n) => n * 2)
    .slotSharingGroup('heavy', { cpu: 2, memoryMiB: 4096 })
    .rebalance()
    .map((n) => n + 1)
    .slotSharingGroup('light', { cpu: 0.25, memoryMiB: 512 })
    .collect();
});

describe('resource profiles in the job API and the JobGraph', () => {
  it('puts the declared profile of each group used into the JobGraph', () => {
    const g = buildJobGraph(twoProfiles, options());
    expect(g.resourceProfiles).toEqual({ heavy: { cpu: 2, memoryMiB: 4096 }, light: { cpu: 0.25, memoryMiB: 512 } });
    const groups = new Set(g.vertices.map((v) => v.slotSharingGroup));
    expect(groups).toEqual(new Set(['default', 'heavy', 'light']));
    // A graph without profiles carries no field at all.
    const plain = buildJobGraph(
      defineJob('plain', (env) => env.fromSequence(1, 3).collect()),
      options(),
    );
    expect(plain).not.toHaveProperty('resourceProfiles');
  });

  it('refuses a group declared twice with different profiles, naming the group', () => {
    const twice = defineJob('twice', (env) => {
      env
        .fromSequence(1, 3)
        .map((n) => n)
        .slotSharingGroup('heavy', { cpu: 2, memoryMiB: 4096 })
        .map((n) => n)
        .slotSharingGroup('heavy', { cpu: 4, memoryMiB: 4096 })
        .collect();
    });
    expect(() => buildJobGraph(twice, options())).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(twice, options())).toThrow(/slot sharing group 'heavy' is declared with .*"cpu":2.* and with .*"cpu":4/);
    // The same profile twice, or the group named again without one, is fine.
    const same = defineJob('same', (env) => {
      env
        .fromSequence(1, 3)
        .map((n) => n)
        .slotSharingGroup('heavy', { cpu: 2, memoryMiB: 4096 })
        .map((n) => n)
        .slotSharingGroup('heavy')
        .collect()
        .slotSharingGroup('heavy', { cpu: 2, memoryMiB: 4096 });
    });
    expect(buildJobGraph(same, options()).resourceProfiles).toEqual({ heavy: { cpu: 2, memoryMiB: 4096 } });
  });

  it('refuses a malformed profile in the API', () => {
    const bad = defineJob('bad', (env) => {
      env
        .fromSequence(1, 3)
        .map((n) => n)
        .slotSharingGroup('heavy', { cpu: 0, memoryMiB: 4096 })
        .collect();
    });
    expect(() => buildJobGraph(bad, options())).toThrow(/slotSharingGroup\('heavy', profile\) needs \{ cpu/);
  });

  it('parses and validates the profiles of a submitted graph', () => {
    const g = buildJobGraph(twoProfiles, options());
    const parsed = parseJobGraph(JSON.parse(JSON.stringify(g)));
    expect(parsed.resourceProfiles).toEqual(g.resourceProfiles);
    expect(() => validateJobGraph(parsed)).not.toThrow();

    const raw = (profiles: unknown): unknown => ({ ...JSON.parse(JSON.stringify(g)), resourceProfiles: profiles });
    expect(problemsOf(() => parseJobGraph(raw({ heavy: { cpu: '2', memoryMiB: 4096 } })))).toEqual([
      `resourceProfiles["heavy"].cpu must be a finite number > 0, found "2"`,
    ]);
    expect(problemsOf(() => parseJobGraph(raw({ heavy: { cpu: 2, memoryMiB: 4096, gpu: 1 } }))).join()).toMatch(/unknown field\(s\) gpu/);
    expect(problemsOf(() => parseJobGraph(raw([])))).toEqual(['resourceProfiles must be an object, found an array']);
    const many = Object.fromEntries(Array.from({ length: JOB_GRAPH_LIMITS.maxResourceProfiles + 1 }, (_, i) => [`g${i}`, { cpu: 1, memoryMiB: 1024 }]));
    expect(problemsOf(() => parseJobGraph(raw(many)))).toEqual([
      `resourceProfiles has ${JOB_GRAPH_LIMITS.maxResourceProfiles + 1} entries, the limit is ${JOB_GRAPH_LIMITS.maxResourceProfiles}`,
    ]);

    const withProfiles = (resourceProfiles: JobGraph['resourceProfiles']): JobGraph => ({ ...g, resourceProfiles });
    expect(problemsOf(() => validateJobGraph(withProfiles({ ...g.resourceProfiles, ghost: { cpu: 1, memoryMiB: 1024 } })))).toEqual([
      `resourceProfiles["ghost"]: no vertex is in slot sharing group 'ghost' (groups: 'default', 'heavy', 'light')`,
    ]);
    expect(problemsOf(() => validateJobGraph(withProfiles({ heavy: { cpu: 65, memoryMiB: 64 } })))).toEqual([
      `resourceProfiles["heavy"].cpu must be > 0 and <= 64 vCPUs per slot, found 65`,
      `resourceProfiles["heavy"].memoryMiB must be an integer from 128 to 1048576 MiB per slot, found 64`,
    ]);
  });
});
