// The lmdb keyed state backend against the KeyedStateBackend contract, with a write cache small enough
// that most reads come from the environment; the environments state.backend.type lmdb makes.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { ValueStateDescriptor } from '../../../runtime/api/state.js';
import { ManualClock } from '../../../runtime/core/clock.js';
import { HeapKeyedStateBackend } from '../../../runtime/task/state/heap-keyed-state-backend.js';
import { createKeyedStateBackend } from '../../../runtime/task/state/state-backends.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeKeyedStateBackendContract } from '../../contracts/keyed-state-backend.contract.js';
import { LmdbKeyedStateBackend } from '../../../runtime/task/state/lmdb-keyed-state-backend.js';

const root = mkdtempSync(join(tmpdir(), 'floe-lmdb-'));
let n = 0;

describeKeyedStateBackendContract('lmdb', (options) => new LmdbKeyedStateBackend({ ...options, dir: join(root, `b${n++}`), writeCacheEntries: 64 }));

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('lmdb environments', () => {
  it('state.backend.type lmdb gives each keyed operator an environment of its own, removed on dispose', () => {
    const settings = { type: 'lmdb', dir: join(root, 'slot-state'), fullEvery: 1 } as const;
    const spec = { maxParallelism: 128, keyGroupRange: { start: 0, end: 127 }, clock: new ManualClock() };
    const a = createKeyedStateBackend(settings, { ...spec, name: 'attempt-1-op-3' });
    const b = createKeyedStateBackend(settings, { ...spec, name: 'attempt-1-op/4' });
    expect(a).toBeInstanceOf(LmdbKeyedStateBackend);
    expect(createKeyedStateBackend(undefined, { ...spec, name: 'x' })).toBeInstanceOf(HeapKeyedStateBackend);
    for (const backend of [a, b]) {
      const v = backend.getPartitionedState(new ValueStateDescriptor<number>('v'));
      backend.setCurrentKey('k');
      v.update(1);
      (backend as LmdbKeyedStateBackend).flush();
    }
    expect(readdirSync(settings.dir).sort()).toEqual(['attempt-1-op-3', 'attempt-1-op_4']);
    a.dispose();
    expect(readdirSync(settings.dir)).toEqual(['attempt-1-op_4']);
    b.setCurrentKey('k');
    expect(b.getPartitionedState(new ValueStateDescriptor<number>('v')).value()).toBe(1);
    b.dispose();
    expect(existsSync(join(settings.dir, 'attempt-1-op_4'))).toBe(false);
  });
});
