// Runs code outside every main thread's async context, so that what it awaits queues up on a main thread
// like any other call instead of running inline.
import { AsyncResource } from 'node:async_hooks';

// Captured at load time, outside any main thread. A promise callback inherits the async context it was
// registered in, so an answer awaited from inside the main thread would look as if it were still on it
// and `MainThread.run` would run it inline, interleaved with whatever is queued. Remote calls are sent
// from this scope so that their answers queue up like any other call.
const outsideMainThread = new AsyncResource('FloeDetached');

/** Runs `fn` outside every main thread's async context. */
export function detached<T>(fn: () => T): T {
  return outsideMainThread.runInAsyncScope(fn);
}
