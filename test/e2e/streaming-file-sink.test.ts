// The streaming file sink with real processes: an unbounded generate → FileSink job fills its target with
// rolled part files while it runs; a reader listing the folder only ever finds complete parts (whole
// lines, never changing once seen, no line twice); after cancel the parts stay as they were and what was
// in progress stays hidden.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('rolling-sink', { 'taskmanager.numberOfTaskSlots': 2 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

const visibleParts = (target: string): string[] => readdirSync(target).filter((f) => !f.startsWith('.'));

/** Reads every visible part; throws naming a part that is not whole lines of the generator. */
function readParts(target: string): Map<string, string> {
  const parts = new Map<string, string>();
  for (const name of visibleParts(target)) {
    expect(name).toMatch(/^part-[01]-\d+$/);
    const text = readFileSync(join(target, name), 'utf8');
    expect(/^(line-\d+\n)+$/.test(text), `${name} holds whole lines of the generator`).toBe(true);
    parts.set(name, text);
  }
  return parts;
}

const linesOf = (parts: Map<string, string>): string[] => [...parts.values()].flatMap((t) => t.slice(0, -1).split('\n'));

describe('the streaming file sink', () => {
  it('shows complete part files while an unbounded job runs, and leaves them complete after cancel', async () => {
    const target = join(cluster.work, 'rolling-out');
    const jobId = await cluster.submit('rolling-lines.ts', 'default', [target, '50000', '200000'], 2);

    // A reader polls the folder while the job runs: every part it finds is whole lines, and a part
    // never changes once found. Parts appear from both subtasks; each is written in several batches
    // (parts of 200 000 bytes, batches of 64 KiB), so a part shown before it is whole would be seen growing.
    const seen = new Map<string, string>();
    const poll = (): string[] => {
      let parts: Map<string, string>;
      try {
        parts = readParts(target);
      } catch (error) {
        if ((error as { code?: string }).code === 'ENOENT') return [];
        throw error;
      }
      for (const [name, text] of parts) {
        if (seen.has(name)) expect(text, `${name} read again`).toBe(seen.get(name));
        else seen.set(name, text);
      }
      return [...parts.keys()];
    };
    await waitFor(
      () => {
        const names = poll();
        return names.some((n) => n.startsWith('part-0-')) && names.some((n) => n.startsWith('part-1-')) && names.length >= 12;
      },
      'twelve rolled parts from both subtasks',
      60_000,
    );
    expect((await cluster.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');
    const later = readParts(target);

    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');

    const after = readParts(target);
    for (const [name, text] of later) expect(after.get(name), name).toBe(text);
    const lines = linesOf(after);
    expect(new Set(lines).size).toBe(lines.length);
    // What was in progress at cancel stays under hidden names only.
    for (const name of readdirSync(target).filter((f) => f.startsWith('.'))) expect(name).toMatch(/^\.part-[01]-\d+\.inprogress\./);
    await cluster.noProcessLeft();
  });

  it('keeps every part a failed attempt rolled, and its restarted attempt adds parts beside them, replacing none', async () => {
    const target = join(cluster.work, 'rolling-failover');
    const marker = join(cluster.work, 'rolling-failover.marker');
    const jobId = await cluster.submit('rolling-lines.ts', 'failsOnce', [target, marker], 2);
    const seen = new Map<string, string>();
    const poll = (): number => {
      let parts: Map<string, string>;
      try {
        parts = readParts(target);
      } catch (error) {
        if ((error as { code?: string }).code === 'ENOENT') return 0;
        throw error;
      }
      for (const [name, text] of parts) {
        if (seen.has(name)) expect(text, `${name} read again`).toBe(seen.get(name));
        else seen.set(name, text);
      }
      return parts.size;
    };
    await waitFor(() => existsSync(marker) && poll() > 0, 'the failure', 60_000);
    const atFailure = poll();
    // The failed subtask runs again (from the start: no checkpoint) and rolls new parts.
    await waitFor(() => poll() >= atFailure + 6, 'six more parts after the failure', 60_000);
    const job = (await cluster.api('GET', `/jobs/${jobId}`)).body;
    expect(job.status).toBe('RUNNING');
    expect(await cluster.exceptions(jobId)).toContain('failing on purpose, once');

    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    poll();
    // The restarted attempt wrote its first lines again into new parts: both copies are there, whole.
    const lines = [...seen.values()].flatMap((t) => t.slice(0, -1).split('\n'));
    expect(new Set(lines).size).toBeLessThan(lines.length);
    for (const name of readdirSync(target).filter((f) => f.startsWith('.'))) expect(name).toMatch(/^\.part-[01]-\d+\.inprogress\./);
    await cluster.noProcessLeft();
  });
});
