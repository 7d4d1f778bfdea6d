// The secret of a local cluster: every REST call and RPC carries it. It belongs to the state dir, not to
// one Dispatcher process, so that JobManagers and TaskExecutors that outlive a Dispatcher (killed, and
// started again) and the new Dispatcher still accept each other's calls. Made once, on the first start,
// and kept in `<stateDir>/secret` (owner read/write only); deleting the file while the cluster is stopped
// makes the next start choose a new one.
import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigurationError } from '../core/errors.js';

export const stateDirSecretPath = (stateDir: string): string => join(stateDir, 'secret');

const SECRET_FORMAT = /^[0-9a-f]{48}$/;

/** The state dir's secret, made and stored when there is none yet; a file that holds anything else is refused, never replaced. */
export function stateDirSecret(stateDir: string): string {
  const path = stateDirSecretPath(stateDir);
  if (!existsSync(path)) {
    // Written whole beside it, then linked into place: a link never replaces a file, and nobody reads a half-written one.
    const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(tmp, `${randomBytes(24).toString('hex')}\n`, { mode: 0o600 });
    try {
      linkSync(tmp, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      rmSync(tmp, { force: true });
    }
  }
  const secret = readFileSync(path, 'utf8').trim();
  if (!SECRET_FORMAT.test(secret)) {
    throw new ConfigurationError(
      `${path} does not hold a cluster secret (48 hex digits); it is left as it is. Move it away, and the next start makes a new one`,
    );
  }
  return secret;
}
