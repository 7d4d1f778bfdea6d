// The shell: skip link, header with navigation, live indicator and log-out, and the page for the route.
import { useEffect, useRef } from 'preact/hooks';
import { connection, errorMessage, logOut, session } from './api';
import { NotFound, useTitle } from './components/page';
import { formatFullTimestamp } from './format';
import { JobPage } from './pages/job';
import { JobsPage } from './pages/jobs';
import { LoginPage } from './pages/login';
import { OverviewPage } from './pages/overview';
import { TaskManagersPage } from './pages/task-managers';
import { href, useRoute, type Route } from './route';
import { useStore } from './store';

export function App() {
  const route = useRoute();
  const main = useRef<HTMLElement>(null);
  const routeKey = route.page === 'job' ? `job:${route.jobId}` : route.page;
  const firstRoute = useRef(true);

  // After a navigation, keyboard and screen-reader users start at the new page, not at the old link.
  useEffect(() => {
    if (firstRoute.current) {
      firstRoute.current = false;
      return;
    }
    main.current?.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  }, [routeKey]);

  return (
    <>
      <a
        class="skip-link"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          main.current?.focus();
        }}
      >
        Skip to content
      </a>
      <Header route={route} />
      <main id="main" ref={main} tabIndex={-1}>
        <Page key={routeKey} route={route} />
      </main>
    </>
  );
}

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case 'overview':
      return <OverviewPage />;
    case 'jobs':
      return <JobsPage />;
    case 'job':
      return <JobPage jobId={route.jobId} {...(route.vertex !== undefined ? { vertex: route.vertex } : {})} />;
    case 'taskmanagers':
      return <TaskManagersPage />;
    case 'login':
      return <LoginPage expired={route.expired} next={route.next} />;
    case 'unknown':
      return <UnknownPage />;
    default:
      return route satisfies never;
  }
}

function UnknownPage() {
  useTitle('Page not found');
  return (
    <NotFound title="Page not found">
      <p>
        There is no such page. <a href={href.overview}>Go to the overview</a>.
      </p>
    </NotFound>
  );
}

const NAV = [
  { label: 'Overview', href: href.overview, pages: ['overview'] },
  { label: 'Jobs', href: href.jobs, pages: ['jobs', 'job'] },
  { label: 'TaskExecutors', href: href.taskManagers, pages: ['taskmanagers'] },
] as const;

function Header({ route }: { route: Route }) {
  const signedIn = useStore(session) === 'signed-in';
  const onLogOut = async () => {
    try {
      await logOut();
      location.hash = href.login();
    } catch (e) {
      window.alert(`Could not log out: ${errorMessage(e)}`);
    }
  };
  return (
    <header class="topbar">
      <div class="topbar-inner">
        <a class="brand" href={href.overview} aria-label="Floe overview">
          <svg class="brand-mark" viewBox="0 0 24 24" aria-hidden="true">
            <path d="M3 7c3-3 6 3 9 0s6-3 9 0M3 12c3-3 6 3 9 0s6-3 9 0M3 17c3-3 6 3 9 0s6-3 9 0" />
          </svg>
          <span>Floe</span>
        </a>
        <nav class="nav" aria-label="Main">
          {NAV.map((item) => (
            <a key={item.href} href={item.href} class="nav-link" aria-current={(item.pages as readonly string[]).includes(route.page) ? 'page' : undefined}>
              {item.label}
            </a>
          ))}
        </nav>
        <div class="topbar-end">
          {route.page !== 'login' && <LiveIndicator />}
          {signedIn && (
            <button type="button" class="button subtle" onClick={() => void onLogOut()}>
              Log out
            </button>
          )}
        </div>
      </div>
    </header>
  );
}

function LiveIndicator() {
  const { state, lastAnswerAtMs } = useStore(connection);
  const label = state === 'live' ? 'Live' : state === 'offline' ? 'Offline' : 'Connecting';
  const title =
    state === 'offline'
      ? `The server does not answer${lastAnswerAtMs !== undefined ? `; last answer at ${formatFullTimestamp(lastAnswerAtMs)}` : ''}. Retrying every second.`
      : state === 'live'
        ? 'Updated every second'
        : 'Waiting for the first answer';
  return (
    <span class={`live live-${state}`} role="status" title={title} data-testid="connection">
      <span class="live-dot" aria-hidden="true" />
      {label}
    </span>
  );
}
