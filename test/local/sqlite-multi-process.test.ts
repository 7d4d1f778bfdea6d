// Several processes open one fresh SQLite file at the same instant and race for one lease and one job
// record: every epoch must go to exactly one holder, and epoch-conditioned writes must never interleave.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import { MAX_STORED_EXCEPTIONS } from '../../runtime/ha/job-store.js';
import { SqliteJobStore } from '../../runtime/local/sqlite-job-store.js';
import { SqliteLeaseStore } from '../../runtime/local/sqlite-lease-store.js';
import { bundleForNode } from '../support/bundle.js';
import { killAll } from '../support/process-liveness.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-sqlite-mp-'));
const pids: number[] = [];
afterAll(() => {
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

interface HammerResult {
  holder: string;
  epochs: number[];
  created: boolean;
  stale: number;
  refused: number;
  errors: string[];
}

it('processes racing on one fresh database hand out every epoch once and never interleave fenced writes', async () => {
  const entry = await bundleForNode(fileURLToPath(new URL('../fixtures/sqlite-hammer.ts', import.meta.url)));
  const db = join(dir, 'floe.db');
  const processes = 4;
  const iterations = 150;
  const startAt = Date.now() + 1_000;
  const exits = await Promise.all(
    Array.from({ length: processes }, (_, i) => {
      const child = spawn(process.execPath, [entry], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          ...process.env,
          FLOE_TEST_DB: db,
          FLOE_TEST_HOLDER: `p${i}`,
          FLOE_TEST_ITERATIONS: String(iterations),
          FLOE_TEST_START_AT: String(startAt),
          FLOE_TEST_OUT: join(dir, `p${i}.json`),
        },
      });
      pids.push(child.pid!);
      return new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    }),
  );
  expect(exits).toEqual(Array(processes).fill(0));
  const results = Array.from({ length: processes }, (_, i) => JSON.parse(readFileSync(join(dir, `p${i}.json`), 'utf8')) as HammerResult);

  expect(results.flatMap((r) => r.errors)).toEqual([]);
  expect(results.filter((r) => r.created)).toHaveLength(1);
  expect(results.reduce((n, r) => n + r.stale, 0)).toBe(0);
  // The processes really did contend: some found the lease taken.
  expect(results.reduce((n, r) => n + r.refused, 0)).toBeGreaterThan(0);

  const all = results.flatMap((r) => r.epochs).sort((a, b) => a - b);
  expect(all.length).toBeGreaterThan(0);
  // Distinct and gap-free: each acquisition took exactly the next epoch.
  expect(all).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
  for (const r of results) expect(r.epochs).toEqual([...r.epochs].sort((a, b) => a - b));

  const leases = new SqliteLeaseStore(db);
  const jobs = new SqliteJobStore(db);
  try {
    const lease = await leases.get('hammer');
    expect(lease?.epoch).toBe(all.length);
    const record = await jobs.get(JobId.of('shared-job'));
    expect(record?.epoch).toBe(all.length);
    expect(record?.exceptions.map((e) => e.timestampMs)).toEqual(all.slice(-MAX_STORED_EXCEPTIONS));
  } finally {
    await leases.close();
    await jobs.close();
  }
}, 30_000);
