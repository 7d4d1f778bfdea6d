// A task's cancellation follows AbortSignal's rules, so the task runtime can take either.
import { describe, expect, it } from 'vitest';
import { TaskCancellation } from '../../runtime/core/cancellation.js';

describe('TaskCancellation', () => {
  it('runs each listener once, in the order added, with the reason set', () => {
    const c = new TaskCancellation();
    const heard: string[] = [];
    c.addEventListener('abort', () => heard.push(`first ${String(c.reason)}`));
    c.addEventListener('abort', () => heard.push(`second ${c.aborted}`));
    c.abort('stop');
    c.abort('again');
    expect(heard).toEqual(['first stop', 'second true']);
    expect(c.reason).toBe('stop');
  });

  it('never runs a listener removed before, or added after, the abort', () => {
    const c = new TaskCancellation();
    let calls = 0;
    const listener = (): void => void calls++;
    c.addEventListener('abort', listener);
    c.removeEventListener('abort', listener);
    c.abort(new Error('x'));
    c.addEventListener('abort', listener);
    expect(calls).toBe(0);
  });

  it('adds a listener once however often it is added, as an EventTarget does', () => {
    const c = new TaskCancellation();
    let calls = 0;
    const listener = (): void => void calls++;
    c.addEventListener('abort', listener);
    c.addEventListener('abort', listener);
    c.abort('stop');
    expect(calls).toBe(1);
  });

  it('runs the other listeners when one throws, and throws its error on a later turn', async () => {
    const c = new TaskCancellation();
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown): void => void uncaught.push(e);
    const listeners = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', onUncaught);
    try {
      let second = false;
      c.addEventListener('abort', () => {
        throw new Error('listener failed');
      });
      c.addEventListener('abort', () => (second = true));
      c.abort('stop');
      expect(second).toBe(true);
      await new Promise((r) => setImmediate(r));
      expect(uncaught.map((e) => (e as Error).message)).toEqual(['listener failed']);
    } finally {
      process.off('uncaughtException', onUncaught);
      for (const l of listeners) process.on('uncaughtException', l);
    }
  });
});
