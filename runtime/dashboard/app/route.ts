// Hash routes: `#/`, `#/jobs`, `#/jobs/<id>` (`?vertex=<vertex id>`: with that vertex's subtasks shown), `#/taskmanagers`, `#/login`. The hash keeps the page a
// single file the Dispatcher serves at `/`, whatever the view.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { readonly page: 'overview' }
  | { readonly page: 'jobs' }
  | { readonly page: 'job'; readonly jobId: string; readonly vertex?: string }
  | { readonly page: 'taskmanagers' }
  | { readonly page: 'login'; readonly expired: boolean; readonly next: string }
  | { readonly page: 'unknown' };

export const href = {
  overview: '#/',
  jobs: '#/jobs',
  job: (jobId: string): string => `#/jobs/${encodeURIComponent(jobId)}`,
  /** A job's page scrolled to one vertex's subtasks. */
  subtasks: (jobId: string, vertexId: string): string => `#/jobs/${encodeURIComponent(jobId)}?vertex=${encodeURIComponent(vertexId)}`,
  taskManagers: '#/taskmanagers',
  /** The login form, returning to `next` (a route hash) once signed in. */
  login: (next?: string): string => (next && isReturnTarget(next) && next !== '#/' ? `#/login?next=${encodeURIComponent(next)}` : '#/login'),
};

export function parseRoute(hash: string): Route {
  const raw = hash.startsWith('#') ? hash.slice(1) : hash;
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  const parts = path.split('/').filter((p) => p !== '');
  const [first, second, ...rest] = parts;
  if (first === undefined) return { page: 'overview' };
  if (rest.length > 0) return { page: 'unknown' };
  switch (first) {
    case 'jobs':
      if (second === undefined) return { page: 'jobs' };
      try {
        const vertex = query.get('vertex');
        return { page: 'job', jobId: decodeURIComponent(second), ...(vertex !== null && vertex !== '' ? { vertex } : {}) };
      } catch {
        return { page: 'unknown' };
      }
    case 'taskmanagers':
      return second === undefined ? { page: 'taskmanagers' } : { page: 'unknown' };
    case 'login': {
      const next = query.get('next');
      return { page: 'login', expired: query.has('expired'), next: next !== null && isReturnTarget(next) ? next : href.overview };
    }
    default:
      return { page: 'unknown' };
  }
}

/** Only the dashboard's own routes, so a crafted link cannot send a fresh login anywhere else. */
function isReturnTarget(hash: string): boolean {
  return hash.startsWith('#/') && !hash.startsWith('#/login');
}

export function isLoginHash(hash: string): boolean {
  return parseRoute(hash).page === 'login';
}

export function useRoute(): Route {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return parseRoute(hash);
}
