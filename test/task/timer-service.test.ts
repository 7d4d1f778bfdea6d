import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { Mailbox } from '../../runtime/task/mailbox.js';
import { HeapKeyedStateBackend } from '../../runtime/task/state/heap-keyed-state-backend.js';
import { HeapInternalTimerService, mailboxProcessingTimeService, type InternalTimer } from '../../runtime/task/timer-service.js';

function setup() {
  const clock = new ManualClock(1_000);
  const mailbox = new Mailbox();
  const backend = new HeapKeyedStateBackend({ maxParallelism: 128, keyGroupRange: { start: 0, end: 127 }, clock });
  const fired: { domain: string; key: unknown; ts: number; current: unknown }[] = [];
  const timers: HeapInternalTimerService<undefined> = new HeapInternalTimerService<undefined>(backend, mailboxProcessingTimeService(clock, mailbox), {
    onEventTime: (t: InternalTimer<undefined>) => {
      fired.push({ domain: 'event', key: t.key, ts: t.timestamp, current: backend.getCurrentKey() });
    },
    onProcessingTime: (t: InternalTimer<undefined>) => {
      fired.push({ domain: 'processing', key: t.key, ts: t.timestamp, current: backend.getCurrentKey() });
    },
  });
  return { clock, mailbox, backend, fired, timers };
}

describe('HeapInternalTimerService', () => {
  it('fires event-time timers in time order as the watermark passes them, each once, with its key current', async () => {
    const { backend, fired, timers } = setup();
    backend.setCurrentKey('a');
    timers.registerEventTimeTimer(undefined, 30);
    timers.registerEventTimeTimer(undefined, 10);
    timers.registerEventTimeTimer(undefined, 10);
    backend.setCurrentKey('b');
    timers.registerEventTimeTimer(undefined, 20);
    timers.registerEventTimeTimer(undefined, 40);
    timers.deleteEventTimeTimer(undefined, 40);
    await timers.advanceWatermark(9);
    expect(fired).toEqual([]);
    await timers.advanceWatermark(30);
    expect(fired.map((f) => [f.key, f.ts, f.current])).toEqual([
      ['a', 10, 'a'],
      ['b', 20, 'b'],
      ['a', 30, 'a'],
    ]);
    await timers.advanceWatermark(Infinity);
    expect(fired).toHaveLength(3);
    expect(timers.currentWatermark()).toBe(Infinity);
  });

  it('keeps timers of one key and time apart by namespace, fires those registered while firing, and skips those deleted meanwhile', async () => {
    const clock = new ManualClock(0);
    const backend = new HeapKeyedStateBackend({ maxParallelism: 128, keyGroupRange: { start: 0, end: 127 }, clock });
    const fired: [unknown, string, number][] = [];
    const timers: HeapInternalTimerService<string> = new HeapInternalTimerService<string>(
      backend,
      mailboxProcessingTimeService(clock, new Mailbox()),
      {
        onEventTime: (t: InternalTimer<string>) => {
          fired.push([t.key, t.namespace, t.timestamp]);
          if (t.namespace === 'x') {
            // Firing x at 10 adds a timer at 10 of another key, and deletes one of its own key at 10.
            backend.setCurrentKey(2);
            timers.registerEventTimeTimer('late', 10);
            backend.setCurrentKey(1);
            timers.deleteEventTimeTimer('z', 10);
          }
        },
        onProcessingTime: () => undefined,
      },
      (n) => n,
    );
    backend.setCurrentKey(1);
    for (const n of ['x', 'y', 'z', 'y']) timers.registerEventTimeTimer(n, 10);
    backend.setCurrentKey(3);
    timers.registerEventTimeTimer('w', 10);
    timers.registerEventTimeTimer('w', 5);
    expect(timers.numEventTimeTimers).toBe(5);
    await timers.advanceWatermark(10);
    expect(fired).toEqual([
      [3, 'w', 5],
      [1, 'x', 10],
      [1, 'y', 10],
      [3, 'w', 10],
      [2, 'late', 10],
    ]);
    expect(timers.numEventTimeTimers).toBe(0);
  });

  it('fires processing-time timers through the mailbox when the clock reaches them', async () => {
    const { clock, mailbox, backend, fired, timers } = setup();
    backend.setCurrentKey('k');
    timers.registerProcessingTimeTimer(undefined, 1_500);
    timers.registerProcessingTimeTimer(undefined, 1_200);
    clock.advance(199);
    await mailbox.drain();
    expect(fired).toEqual([]);
    clock.advance(1);
    expect(fired).toEqual([]);
    await mailbox.drain();
    expect(fired.map((f) => f.ts)).toEqual([1_200]);
    clock.advance(300);
    await mailbox.drain();
    expect(fired.map((f) => [f.domain, f.ts, f.current])).toEqual([
      ['processing', 1_200, 'k'],
      ['processing', 1_500, 'k'],
    ]);
  });
});

describe('Mailbox', () => {
  it('holds posted actions until drained between records, and runs them at once while the task waits for input', async () => {
    const mailbox = new Mailbox();
    const ran: string[] = [];
    mailbox.post(() => {
      ran.push('a');
    });
    expect(ran).toEqual([]);
    await mailbox.drain();
    expect(ran).toEqual(['a']);
    mailbox.enterIdle();
    mailbox.post(async () => {
      await new Promise((r) => setTimeout(r, 5));
      ran.push('b');
    });
    mailbox.post(() => {
      ran.push('c');
    });
    await mailbox.leaveIdle();
    // The action running finished; the next one waits for the task's next pause between records.
    expect(ran).toEqual(['a', 'b']);
    await mailbox.drain();
    expect(ran).toEqual(['a', 'b', 'c']);
    mailbox.post(() => {
      ran.push('d');
    });
    expect(ran).toHaveLength(3);
  });

  it('fails the task with the error of an action that ran while it waited', async () => {
    const mailbox = new Mailbox();
    const seen: unknown[] = [];
    mailbox.onFailure((e) => seen.push(e));
    mailbox.enterIdle();
    mailbox.post(() => {
      throw new Error('timer failed');
    });
    await new Promise((r) => setImmediate(r));
    expect(seen).toHaveLength(1);
    expect(() => mailbox.leaveIdle()).toThrow('timer failed');
  });
});
