import { describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../../runtime/core/clock.js';
import { MainThread, MainThreadClosedError } from '../../runtime/rpc/main-thread.js';

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

async function waitUntil(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe('MainThread', () => {
  it('never interleaves queued calls, even when each awaits inside', async () => {
    const thread = new MainThread('test', systemClock);
    const events: string[] = [];
    const handler = (id: number) => async () => {
      events.push(`start ${id}`);
      await nextTurn();
      await new Promise((r) => setTimeout(r, 1));
      events.push(`end ${id}`);
      return id;
    };
    const results = await Promise.all([0, 1, 2, 3, 4].map((i) => thread.run(handler(i))));
    expect(results).toEqual([0, 1, 2, 3, 4]);
    expect(events).toEqual([0, 1, 2, 3, 4].flatMap((i) => [`start ${i}`, `end ${i}`]));
    expect(thread.executed).toBe(5);
    await thread.close();
  });

  it('keeps going after a call fails', async () => {
    const thread = new MainThread('test', systemClock);
    await expect(
      thread.run(() => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    await expect(thread.run(() => 42)).resolves.toBe(42);
    await thread.close();
  });

  it('runs `run` from inside the main thread inline instead of queueing behind itself', async () => {
    const thread = new MainThread('test', systemClock);
    const events: string[] = [];
    const outer = thread.run(async () => {
      events.push('outer start');
      // Queued behind the outer task this would deadlock; inline it completes before the outer ends.
      const inner = await thread.run(() => {
        events.push('inner');
        return thread.isInMainThread();
      });
      events.push('outer end');
      return inner;
    });
    const later = thread.run(() => events.push('later'));
    await expect(outer).resolves.toBe(true);
    await later;
    expect(events).toEqual(['outer start', 'inner', 'outer end', 'later']);
    expect(thread.executed).toBe(2);
    await thread.close();
  });

  it('runs a nested `run` that nobody awaits before the calling task ends', async () => {
    const thread = new MainThread('test', systemClock);
    const events: string[] = [];
    await thread.run(() => {
      void thread.run(() => {
        events.push(`nested on thread: ${thread.isInMainThread()}`);
      });
      events.push('caller done');
    });
    expect(events).toEqual(['nested on thread: true', 'caller done']);
    await thread.close();
  });

  it('knows whether the caller is on it', async () => {
    const thread = new MainThread('jobmaster', systemClock);
    expect(thread.isInMainThread()).toBe(false);
    expect(() => thread.assertInMainThread()).toThrow(/jobmaster: state touched outside its main thread/);
    await thread.run(() => thread.assertInMainThread());
    await thread.close();
  });

  it('does not count async work a task started as on the thread once the task has ended', async () => {
    const thread = new MainThread('test', systemClock);
    let sawThread: boolean | undefined;
    let escaped!: Promise<void>;
    await thread.run(() => {
      escaped = new Promise<void>((r) => setTimeout(r, 5)).then(() => {
        sawThread = thread.isInMainThread();
      });
    });
    await escaped;
    expect(sawThread).toBe(false);
    await thread.close();
  });

  it('queues a timer set from a task behind the task running when it fires', async () => {
    const thread = new MainThread('test', systemClock);
    const events: string[] = [];
    await thread.run(() => {
      thread.schedule(() => {
        events.push('timer');
      }, 1);
    });
    await thread.run(async () => {
      events.push('busy start');
      await new Promise((r) => setTimeout(r, 30));
      events.push('busy end');
    });
    await waitUntil(() => events.includes('timer'), 'the timer');
    expect(events).toEqual(['busy start', 'busy end', 'timer']);
    await thread.close();
  });

  it('runs scheduled and repeating work on the clock', async () => {
    const clock = new ManualClock();
    const thread = new MainThread('test', clock);
    const seen: number[] = [];
    thread.schedule(() => {
      seen.push(-1);
    }, 50);
    const ticker = thread.every(() => {
      seen.push(clock.now());
    }, 100);
    const start = clock.now();
    for (let i = 0; i < 3; i++) {
      clock.advance(100);
      await thread.run(() => {});
    }
    expect(seen).toEqual([-1, start + 100, start + 200, start + 300]);
    ticker.cancel();
    clock.advance(1_000);
    await thread.run(() => {});
    expect(seen).toHaveLength(4);
    await thread.close();
  });

  it('after close() rejects new calls and calls still queued, and cancels timers', async () => {
    const clock = new ManualClock();
    const thread = new MainThread('resourcemanager', clock);
    let release: (() => void) | undefined;
    const running = thread.run(() => new Promise<void>((r) => (release = r)));
    while (release === undefined) await nextTurn();
    const queued = thread.run(() => 'never');
    let fired = false;
    thread.schedule(() => {
      fired = true;
    }, 10);
    const closing = thread.close();
    release();
    await running;
    await expect(queued).rejects.toBeInstanceOf(MainThreadClosedError);
    await closing;
    await expect(thread.run(() => 1)).rejects.toBeInstanceOf(MainThreadClosedError);
    await expect(thread.run(() => 1)).rejects.toThrow('resourcemanager has stopped');
    clock.advance(100);
    await nextTurn();
    expect(fired).toBe(false);
    expect(thread.isClosed).toBe(true);
  });

  it('can be closed from one of its own tasks without waiting for itself', async () => {
    const thread = new MainThread('test', systemClock);
    const done = thread.run(async () => {
      await thread.close();
      return 'closed';
    });
    await expect(done).resolves.toBe('closed');
    await expect(thread.run(() => 1)).rejects.toBeInstanceOf(MainThreadClosedError);
  });
});
