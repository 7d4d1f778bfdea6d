import { describe, expect, it } from 'vitest';
import { profileFlags } from '../../runtime/local/child-process-launcher.js';

describe('FLOE_PROFILE_DIR', () => {
  const te = { id: 'te-1', kind: 'taskexecutor', env: {} } as const;
  const jm = { id: 'jobmanager-1', kind: 'jobmanager', env: {} } as const;

  it('starts TaskExecutors with --cpu-prof into the folder it names', () => {
    expect(profileFlags(te, { FLOE_PROFILE_DIR: '/tmp/profiles' })).toEqual(['--cpu-prof', '--cpu-prof-dir=/tmp/profiles']);
  });

  it('adds nothing when unset or empty, nor to JobManagers', () => {
    expect(profileFlags(te, {})).toEqual([]);
    expect(profileFlags(te, { FLOE_PROFILE_DIR: '' })).toEqual([]);
    expect(profileFlags(jm, { FLOE_PROFILE_DIR: '/tmp/profiles' })).toEqual([]);
  });
});
