// Keeps a view's data current: GET every second while the tab is visible, at once when it becomes visible
// again. A 304 hands back the same body object, so an unchanged answer renders nothing.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, errorMessage, getJson } from './api';

export const POLL_INTERVAL_MS = 1_000;

export type Polled<T> =
  | { readonly state: 'loading' }
  /** `stale` when the latest refresh failed and `data` is what the last good one brought. */
  | { readonly state: 'ok'; readonly data: T; readonly stale: boolean }
  | { readonly state: 'not-found' }
  | { readonly state: 'error'; readonly message: string };

/** Polls `path` (none while null); the second value asks for a refresh now. */
export function usePolled<T>(path: string | null, intervalMs = POLL_INTERVAL_MS): readonly [Polled<T>, () => void] {
  const [held, setHeld] = useState<{ readonly path: string | null; readonly value: Polled<T> }>({ path, value: { state: 'loading' } });
  const refreshNow = useRef<() => void>(() => {});

  useEffect(() => {
    if (path === null) return;
    let stopped = false;
    let inFlight = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const controller = new AbortController();
    const update = (next: (prev: Polled<T>) => Polled<T>) =>
      setHeld((prev) => {
        const before: Polled<T> = prev.path === path ? prev.value : { state: 'loading' };
        const after = next(before);
        return after === before && prev.path === path ? prev : { path, value: after };
      });

    const tick = async () => {
      timer = undefined;
      if (stopped || inFlight || document.visibilityState !== 'visible') return;
      inFlight = true;
      try {
        const data = await getJson<T>(path, controller.signal);
        if (stopped) return;
        update((prev) => (prev.state === 'ok' && prev.data === data && !prev.stale ? prev : { state: 'ok', data, stale: false }));
      } catch (e) {
        if (stopped) return;
        // The login form takes over; this view is about to unmount.
        if (e instanceof ApiError && e.status === 401) return;
        if (e instanceof ApiError && e.status === 404) update(() => ({ state: 'not-found' }));
        else update((prev) => (prev.state === 'ok' ? (prev.stale ? prev : { ...prev, stale: true }) : { state: 'error', message: errorMessage(e) }));
      } finally {
        inFlight = false;
      }
      if (!stopped && timer === undefined) timer = setTimeout(tick, intervalMs);
    };
    const onVisibility = () => {
      if (document.visibilityState === 'visible' && timer === undefined) void tick();
    };
    refreshNow.current = () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      void tick();
    };
    document.addEventListener('visibilitychange', onVisibility);
    void tick();
    return () => {
      stopped = true;
      controller.abort();
      if (timer !== undefined) clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
      refreshNow.current = () => {};
    };
  }, [path, intervalMs]);

  const refresh = useCallback(() => refreshNow.current(), []);
  return [held.path === path ? held.value : { state: 'loading' }, refresh];
}
