// Several processes campaign for one SQLite lease with the real LeaderElection while leaders step down or
// are SIGKILLed: the periods in which each leader's lease was valid must never overlap, and every
// takeover must come with a higher epoch.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { bundleForNode } from '../support/bundle.js';
import { isProcessAlive, killAll, waitUntil } from '../support/process-liveness.js';

const LEASE_MS = 300;
const RENEW_MS = 100;
const ACTIONS = ['kill', 'step-down', 'pause', 'kill', 'step-down', 'pause', 'kill'] as const;

const dir = mkdtempSync(join(tmpdir(), 'floe-election-'));
const pids: number[] = [];
afterAll(() => {
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

interface Event {
  ev: 'started' | 'lease' | 'grant' | 'revoke' | 'act' | 'stepped-down' | 'exit';
  holder: string;
  pid: number;
  t?: number;
  epoch?: number;
  expiresAtMs?: number;
  reason?: string;
}

interface Contender {
  readonly holder: string;
  readonly file: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  killed: boolean;
}

/** The process state letter from /proc (R running, S sleeping, T stopped, …). */
function processState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

function events(file: string): Event[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Event);
}

/** The contender whose last leadership event is a grant, with that grant's epoch. */
function leaders(contenders: readonly Contender[]): { c: Contender; epoch: number }[] {
  const out: { c: Contender; epoch: number }[] = [];
  for (const c of contenders) {
    if (c.killed) continue;
    const last = events(c.file)
      .filter((e) => e.ev === 'grant' || e.ev === 'revoke')
      .at(-1);
    if (last?.ev === 'grant') out.push({ c, epoch: last.epoch! });
  }
  return out;
}

it('three contender processes: never two valid leaders, epochs rise across step-downs and kills', async () => {
  const entry = await bundleForNode(fileURLToPath(new URL('../fixtures/election-contender.ts', import.meta.url)));
  const db = join(dir, 'floe.db');
  const contenders: Contender[] = [];
  let n = 0;
  const launch = (): Contender => {
    const holder = `c${n++}`;
    const file = join(dir, `${holder}.jsonl`);
    const child = spawn(process.execPath, [entry], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: {
        ...process.env,
        FLOE_TEST_DB: db,
        FLOE_TEST_HOLDER: holder,
        FLOE_TEST_OUT: file,
        FLOE_TEST_LEASE_MS: String(LEASE_MS),
        FLOE_TEST_RENEW_MS: String(RENEW_MS),
      },
    });
    child.channel?.unref();
    pids.push(child.pid!);
    const c: Contender = { holder, file, child, killed: false, exited: new Promise((r) => child.once('exit', () => r())) };
    contenders.push(c);
    return c;
  };

  try {
    for (let i = 0; i < 3; i++) launch();
    await waitUntil('a first leader', () => leaders(contenders).length === 1, 10_000);
    await waitUntil('all contenders to campaign', () => contenders.every((c) => events(c.file).some((e) => e.ev === 'started')), 10_000);

    let lastEpoch = leaders(contenders)[0]!.epoch;
    for (const action of ACTIONS) {
      const [leader] = leaders(contenders);
      expect(leader, 'a leader before each round').toBeDefined();
      if (action === 'kill') {
        leader!.c.killed = true;
        leader!.c.child.kill('SIGKILL');
        await leader!.c.exited;
        launch();
      } else if (action === 'pause') {
        // The old leader comes back: frozen (as by a long GC pause or a suspended VM) until its lease
        // lapsed and another took over, then resumed. It must notice and step down, not act.
        leader!.c.child.kill('SIGSTOP');
        // Counted while it is stopped and cannot write: counted after SIGCONT, a resumed leader that
        // steps down before this process reads its file would already be in the count.
        await waitUntil('the leader to be stopped', () => processState(leader!.c.child.pid!) === 'T', 10_000);
        const revokes = (): number => events(leader!.c.file).filter((e) => e.ev === 'revoke').length;
        const before = revokes();
        await waitUntil('a takeover from the paused leader', () => leaders(contenders).some((l) => l.c !== leader!.c && l.epoch > lastEpoch), 10_000);
        leader!.c.child.kill('SIGCONT');
        await waitUntil('the resumed leader to step down', () => revokes() > before, 10_000);
      } else {
        leader!.c.child.kill('SIGUSR2');
      }
      await waitUntil(`a new leader after ${action} of ${leader!.c.holder}`, () => leaders(contenders).some((l) => l.epoch > lastEpoch), 10_000);
      const now = leaders(contenders);
      expect(now).toHaveLength(1);
      lastEpoch = now[0]!.epoch;
    }

    // A contender launched after the last kill may still be loading: until it has installed its SIGTERM
    // handler (it says 'started' after that), SIGTERM would end it by the default action, not by a stop.
    const live = contenders.filter((c) => !c.killed);
    await waitUntil('every live contender to have started', () => live.every((c) => events(c.file).some((e) => e.ev === 'started')), 20_000);
    for (const c of live) c.child.kill('SIGTERM');
    await Promise.all(contenders.map((c) => c.exited));
    expect(
      pids.filter((pid) => isProcessAlive(pid)),
      'contender processes left running',
    ).toEqual([]);
    // Stopped contenders exit cleanly (code 0) after releasing; only the SIGKILLed ones did not.
    expect(live.map((c) => `${c.holder}: ${c.child.exitCode ?? c.child.signalCode}`)).toEqual(live.map((c) => `${c.holder}: 0`));
  } finally {
    killAll(pids);
  }

  // Rebuild every leadership period: [grant, revoke], and how long the lease behind it was valid.
  interface Period {
    holder: string;
    epoch: number;
    start: number;
    end: number;
    validEnd: number;
  }
  const periods: Period[] = [];
  let acts = 0;
  for (const c of contenders) {
    const expiry = new Map<number, number>();
    let open: Omit<Period, 'end' | 'validEnd'> | undefined;
    const close = (end: number): void => {
      if (open === undefined) return;
      periods.push({ ...open, end, validEnd: Math.min(end, expiry.get(open.epoch) ?? -Infinity) });
      open = undefined;
    };
    for (const e of events(c.file)) {
      if (e.ev === 'lease') expiry.set(e.epoch!, Math.max(expiry.get(e.epoch!) ?? -Infinity, e.expiresAtMs!));
      // The property leases exist for: a leader acts only while the lease it last won or renewed is valid.
      if (e.ev === 'act') {
        acts++;
        expect(e.t!, `${c.holder} acted at epoch ${e.epoch} after its lease lapsed`).toBeLessThan(expiry.get(e.epoch!) ?? -Infinity);
        expect(open?.epoch, `${c.holder} acted outside a leadership period`).toBe(e.epoch);
      }
      if (e.ev === 'grant') open = { holder: c.holder, epoch: e.epoch!, start: e.t! };
      if (e.ev === 'revoke') close(e.t!);
    }
    // A SIGKILLed leader never revoked: its period lasted as long as its lease.
    close(Infinity);
  }
  periods.sort((a, b) => a.start - b.start);
  expect(acts).toBeGreaterThan(0);

  expect(periods.length).toBeGreaterThanOrEqual(ACTIONS.length + 1);
  for (let i = 0; i < periods.length; i++) {
    const p = periods[i]!;
    expect(Number.isFinite(p.validEnd) && p.validEnd >= p.start, `period ${JSON.stringify(p)} has a lease behind it`).toBe(true);
    for (let j = i + 1; j < periods.length; j++) {
      const q = periods[j]!;
      expect(q.start, `${q.holder}@${q.epoch} took over while ${p.holder}@${p.epoch}'s lease was valid (until ${p.validEnd})`).toBeGreaterThanOrEqual(
        p.validEnd,
      );
    }
    if (i > 0) {
      const prev = periods[i - 1]!;
      if (p.holder !== prev.holder) expect(p.epoch, `takeover by ${p.holder} after ${prev.holder}`).toBeGreaterThan(prev.epoch);
      else expect(p.epoch).toBeGreaterThanOrEqual(prev.epoch);
    }
  }
  // Stepping down revokes before the lease is released, so the next leader starts after the old one stopped acting.
  const stepDowns = contenders.flatMap((c) => events(c.file)).filter((e) => e.reason === 'leader election stopped');
  expect(stepDowns.length).toBeGreaterThanOrEqual(3);
}, 60_000);
