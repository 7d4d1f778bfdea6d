// What SlotWorkerRuntime.recycle compares to decide whether a slot's thread may run the next job, and
// the most jobs one thread runs.
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_JOBS_PER_THREAD, SlotWorkerRuntime, type SlotWorkerPort } from '../../runtime/task/slot-worker-runtime.js';
import { captureThreadState, threadStateChanges } from '../../runtime/task/thread-state.js';
import type { MainToWorker, WorkerToMain } from '../../runtime/task/worker-protocol.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('threadStateChanges', () => {
  it('finds nothing when nothing changed, or when a lazy global was only read', () => {
    const before = captureThreadState();
    void globalThis.fetch;
    expect(threadStateChanges(before, captureThreadState())).toEqual([]);
  });

  it('names a global added, a built-in replaced or added, and an environment variable set', () => {
    const before = captureThreadState();
    (globalThis as Record<string, unknown>)['floeTestGlobal'] = 1;
    const map = Array.prototype.map;
    Array.prototype.map = function patched(this: unknown[], ...args: Parameters<typeof map>) {
      return map.apply(this, args);
    } as typeof map;
    (String.prototype as unknown as Record<string, unknown>)['floeShout'] = () => '!';
    process.env['FLOE_TEST_VARIABLE'] = 'x';
    cleanups.push(() => {
      delete (globalThis as Record<string, unknown>)['floeTestGlobal'];
      Array.prototype.map = map;
      delete (String.prototype as unknown as Record<string, unknown>)['floeShout'];
      delete process.env['FLOE_TEST_VARIABLE'];
    });
    expect(threadStateChanges(before, captureThreadState(), 10)).toEqual([
      'globalThis.floeTestGlobal was added',
      'Array.prototype.map was changed',
      'String.prototype.floeShout was added',
      'process.env was changed',
    ]);
  });

  it("names a function of one of Node's modules replaced", () => {
    const fs = createRequire(import.meta.url)('node:fs') as Record<string, unknown>;
    const before = captureThreadState();
    const original = fs['readFileSync'];
    fs['readFileSync'] = () => 'patched';
    cleanups.push(() => (fs['readFileSync'] = original));
    expect(threadStateChanges(before, captureThreadState())).toEqual(['node:fs.readFileSync was changed']);
  });

  it('names a timer left running and a process listener added, but not fewer of either', () => {
    const before = captureThreadState();
    const timer = setInterval(() => undefined, 60_000);
    const listener = (): void => undefined;
    process.on('beforeExit', listener);
    cleanups.push(() => {
      clearInterval(timer);
      process.off('beforeExit', listener);
    });
    const changes = threadStateChanges(before, captureThreadState(), 10);
    expect(changes).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^process listeners added \(beforeExit: \d+ -> \d+\)$/),
        expect.stringMatching(/^timers or handles left active \(Timeout: \d+ -> \d+\)$/),
      ]),
    );
    // Gone again: what the first state had more of is no change.
    clearInterval(timer);
    process.off('beforeExit', listener);
    expect(threadStateChanges(captureThreadState(), before)).toEqual([]);
  });
});

describe('SlotWorkerRuntime.recycle', () => {
  it(`keeps a thread for at most ${MAX_JOBS_PER_THREAD} jobs: each leaves a module instance behind`, async () => {
    const answers: string[][] = [];
    let listener: ((m: MainToWorker) => void) | undefined;
    let answered: (() => void) | undefined;
    const port: SlotWorkerPort = {
      on: (_event, l) => (listener = l),
      postMessage: (m: WorkerToMain) => {
        if (m.type !== 'recycled') return;
        answers.push([...m.changes]);
        answered?.();
      },
    };
    new SlotWorkerRuntime(port, { ownThread: true });
    for (let i = 0; i < MAX_JOBS_PER_THREAD; i++) {
      const next = new Promise<void>((resolve) => (answered = resolve));
      listener!({ type: 'recycle' });
      await next;
    }
    const cap = `it ran ${MAX_JOBS_PER_THREAD} jobs, the most a thread runs`;
    expect(answers.slice(0, -1).some((a) => a.includes(cap))).toBe(false);
    expect(answers.at(-1)).toEqual([cap]);
  });
});
