// The lmdb keyed state backend against the KeyedStateBackend contract, with a write cache small enough
// that most reads come from the environment.
import { mkdtempSync, rmSync } from 'node:fs';
import { afterAll } from 'vitest';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeKeyedStateBackendContract } from '../../contracts/keyed-state-backend.contract.js';
import { LmdbKeyedStateBackend } from '../../../runtime/task/state/lmdb-keyed-state-backend.js';

const root = mkdtempSync(join(tmpdir(), 'floe-lmdb-'));
let n = 0;

describeKeyedStateBackendContract('lmdb', (options) => new LmdbKeyedStateBackend({ ...options, dir: join(root, `b${n++}`), writeCacheEntries: 64 }));

afterAll(() => rmSync(root, { recursive: true, force: true }));
