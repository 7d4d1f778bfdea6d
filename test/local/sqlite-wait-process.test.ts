// A process that has nothing to do but wait for a locked SQLite file: the wait between tries must keep it
// alive until the lock is gone and its write is done.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, expect, it } from 'vitest';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { bundleForNode } from '../support/bundle.js';
import { killAll } from '../support/process-liveness.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-sqlite-wait-'));
const pids: number[] = [];
afterAll(() => {
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

it('a process whose one write meets a lock waits it out and writes, instead of ending mid-wait', async () => {
  const entry = await bundleForNode(fileURLToPath(new URL('../fixtures/sqlite-wait-write.ts', import.meta.url)));
  const db = join(dir, 'floe.db');
  await new SqliteJobStore(db).close();
  const locker = new Database(db);
  locker.exec('BEGIN EXCLUSIVE');
  const out = join(dir, 'out.json');
  const child = spawn(process.execPath, [entry], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, FLOE_TEST_DB: db, FLOE_TEST_OUT: out } });
  pids.push(child.pid!);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // Held well past the child's start and its first tries.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  locker.exec('COMMIT');
  locker.close();
  expect(await exited).toBe(0);
  expect(existsSync(out) && JSON.parse(readFileSync(out, 'utf8'))).toEqual({ created: true });
});
