// The README's streaming example (examples/streaming.ts) type-checks with `floe check` and, run with
// `floe run` on a local cluster, prints what plain code computes from the same clicks: per user and
// 10-second event-time window the clicks and the running total, each user's final total (an event-time
// timer), and the side output's users whose total passed 100.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { distEntry } from '../../runtime/core/paths.js';
import { CliHarness } from '../cli/cli-harness.js';
import { click } from '../../examples/streaming.js';

const harness = new CliHarness('floe-streaming-example-');
afterAll(async () => {
  await cli('cluster', 'stop');
  harness.cleanup();
});

const repo = join(import.meta.dirname, '../..');
const cli = (...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const env = { FLOE_HOME: harness.stateDir, PATH: process.env['PATH'] };
    execFile(process.execPath, [distEntry('cli'), ...argv], { cwd: repo, env, timeout: 120_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr }),
    );
  });

/** What the job computes, from the clicks directly. */
function expected(count: number): unknown[] {
  const perWindow = new Map<string, Map<number, number>>();
  for (let i = 0; i < count; i++) {
    const c = click(i);
    const end = Math.floor(c.ts / 10_000) * 10_000 + 10_000;
    const windows = perWindow.get(c.user) ?? new Map<number, number>();
    windows.set(end, (windows.get(end) ?? 0) + 1);
    perWindow.set(c.user, windows);
  }
  const out: unknown[] = [];
  for (const [user, windows] of perWindow) {
    let total = 0;
    for (const [windowEnd, clicks] of [...windows].sort((a, b) => a[0] - b[0])) {
      const before = total;
      total += clicks;
      out.push({ user, windowEnd, clicks, total });
      if (total > 100 && before <= 100) out.push({ busy: user, windowEnd });
    }
    out.push({ user, final: total });
  }
  return out;
}

const order = (records: unknown[]): string[] => records.map((r) => JSON.stringify(r)).sort();

describe('the streaming example', () => {
  it('type-checks with floe check', async () => {
    const check = await cli('check', 'examples/streaming.ts');
    expect(check.code, check.stdout + check.stderr).toBe(0);
    expect(check.stderr).toContain('examples/streaming.ts type-checks');
  }, 120_000);

  it('prints per-window counts, running totals, final totals and the side output, as plain code computes them', async () => {
    const run = await cli('run', 'examples/streaming.ts', '-p', '2', '--', '5000', '5000');
    expect(run.code, run.stderr).toBe(0);
    const records = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as unknown);
    const want = expected(5000);
    expect(want.filter((r) => 'busy' in (r as object)).length).toBe(7);
    expect(order(records)).toEqual(order(want));
    expect(run.stderr).toMatch(/\nFINISHED · /);
  }, 180_000);
});
