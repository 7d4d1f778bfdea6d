// The DashboardSessions contract: what every adapter (signed with the secret, DynamoDB) promises the
// dashboard's sign-in. `other` is a second handle on the same sessions (another Dispatcher process or
// Lambda container), for what must hold across them. Signed sessions remember used codes in their own
// process only (`codesAcrossHandles: false`): a local cluster has one Dispatcher.
import { describe, expect, it } from 'vitest';
import { LOGIN_CODE_TTL_MS, SESSION_TTL_MS, type DashboardSessions } from '../../runtime/dispatcher/dashboard.js';

export function describeDashboardSessionsContract(
  name: string,
  factory: () => Promise<{ one: DashboardSessions; other: DashboardSessions }>,
  options: { readonly codesAcrossHandles: boolean },
): void {
  describe(`DashboardSessions contract: ${name}`, () => {
    // A time of its own per test: adapters whose state outlives a handle (a shared table) see no other test's sessions expire.
    const start = (): number => Date.now();

    it('makes a session that is valid on every handle until its 12 hours are over', async () => {
      const { one, other } = await factory();
      const now = start();
      const session = await one.createSession(now);
      expect(session.maxAgeSeconds).toBe(SESSION_TTL_MS / 1000);
      expect(await one.verifySession(session.value, now)).toBe(true);
      expect(await other.verifySession(session.value, now + SESSION_TTL_MS - 1)).toBe(true);
      expect(await other.verifySession(session.value, now + SESSION_TTL_MS)).toBe(false);
    });

    it('refuses a session it did not make, or one changed by a character', async () => {
      const { one } = await factory();
      const now = start();
      const session = await one.createSession(now);
      const changed = session.value.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
      for (const value of ['', 'x', changed, `${session.value}x`]) expect(await one.verifySession(value, now), value).toBe(false);
    });

    it(`redeems a login code once${options.codesAcrossHandles ? ', whichever handle redeems it' : ''}`, async () => {
      const { one, other } = await factory();
      const redeemer = options.codesAcrossHandles ? other : one;
      const now = start();
      const { code, expiresAtMs } = await one.issueLoginCode(now);
      expect(expiresAtMs).toBe(now + LOGIN_CODE_TTL_MS);
      expect(await redeemer.redeemLoginCode(code, now + 1)).toBe(true);
      expect(await one.redeemLoginCode(code, now + 2)).toBe(false);
      expect(await redeemer.redeemLoginCode(code, now + 3)).toBe(false);
    });

    it('refuses a code once its ten minutes are over, and a code it did not issue', async () => {
      const { one } = await factory();
      const now = start();
      const { code } = await one.issueLoginCode(now);
      expect(await one.redeemLoginCode(code, now + LOGIN_CODE_TTL_MS)).toBe(false);
      const changed = code.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
      expect(await one.redeemLoginCode(changed, now)).toBe(false);
      expect(await one.redeemLoginCode('', now)).toBe(false);
    });

    it('when it can revoke, ends one session on every handle when it signs out, and leaves the others', async () => {
      const { one, other } = await factory();
      const endSession = one.endSession;
      if (endSession === undefined) {
        expect([one.revokeAll, other.endSession]).toEqual([undefined, undefined]);
        return;
      }
      const now = start();
      const [leaving, staying] = [await one.createSession(now), await other.createSession(now)];
      await endSession(leaving.value);
      expect(await other.verifySession(leaving.value, now)).toBe(false);
      expect(await one.verifySession(staying.value, now)).toBe(true);
      // Again, or a value it never made: nothing to end, no error.
      await endSession(leaving.value);
      await endSession('not a session');
    });

    it('when it can revoke, ends every session on every handle, and takes new ones after', async () => {
      const { one, other } = await factory();
      const revokeAll = other.revokeAll;
      if (one.revokeAll === undefined || revokeAll === undefined) {
        // Sessions that cannot be revoked say so by having no revokeAll: the REST router then answers 404.
        expect([one.revokeAll, other.revokeAll]).toEqual([undefined, undefined]);
        return;
      }
      const now = start();
      const sessions = [await one.createSession(now), await other.createSession(now)];
      await revokeAll();
      for (const s of sessions) {
        expect(await one.verifySession(s.value, now)).toBe(false);
        expect(await other.verifySession(s.value, now)).toBe(false);
      }
      const fresh = await one.createSession(now);
      expect(await other.verifySession(fresh.value, now)).toBe(true);
    });
  });
}
