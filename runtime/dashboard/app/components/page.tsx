// What every page shares: its <h1>, the document title, and how loading and failures read.
import type { ComponentChildren } from 'preact';
import { useEffect } from 'preact/hooks';

export function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Floe`;
  }, [title]);
}

export function PageHeader({ title, children, eyebrow }: { title: string; children?: ComponentChildren; eyebrow?: ComponentChildren }) {
  return (
    <div class="page-header">
      <div class="page-heading">
        {eyebrow && <div class="eyebrow">{eyebrow}</div>}
        <h1>{title}</h1>
      </div>
      {children && <div class="page-actions">{children}</div>}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted loading" role="status">
      {`Loading ${what}…`}
    </p>
  );
}

export function LoadFailed({ what, message }: { what: string; message: string }) {
  return (
    <p class="callout callout-error" role="alert">
      {`Could not load ${what}: ${message} Retrying every second.`}
    </p>
  );
}

/** The page for an unknown route or job id; the caller sets the document title. */
export function NotFound({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <section data-testid="not-found" class="not-found">
      <PageHeader title={title} />
      <div class="card empty">{children}</div>
    </section>
  );
}
