// Signing in with a local cluster's secret; the one-time links `floe dashboard` prints land here when
// used up or expired. A deployed cluster refuses the secret and says to run `floe dashboard`, which the
// form shows as its error.
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage, logIn } from '../api';
import { PageHeader, useTitle } from '../components/page';

export function LoginPage({ expired, next }: { expired: boolean; next: string }) {
  useTitle('Log in');
  const [secret, setSecret] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await logIn(secret);
      location.hash = next;
    } catch (e) {
      setError(errorMessage(e));
      input.current?.select();
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="login">
      <PageHeader title="Log in" />
      <form class="card login-form" onSubmit={(e) => void submit(e)}>
        {expired && (
          <p class="callout" role="status">
            That login link was already used or has expired. Get a new one with <code>floe dashboard</code>, or log in with a local cluster's secret.
          </p>
        )}
        <label for="secret">Cluster secret</label>
        <input
          ref={input}
          id="secret"
          name="secret"
          type="password"
          autocomplete="current-password"
          required
          value={secret}
          onInput={(e) => setSecret(e.currentTarget.value)}
          aria-invalid={error !== null}
          aria-describedby={error !== null ? 'login-error' : undefined}
        />
        {error !== null && (
          <p id="login-error" class="field-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" class="button primary" disabled={busy}>
          Log in
        </button>
      </form>
    </div>
  );
}
