// The DashboardSessions contract on the sessions a local cluster uses: signed with its secret.
import { SignedDashboardSessions } from '../../runtime/dispatcher/dashboard.js';
import { describeDashboardSessionsContract } from '../contracts/dashboard-sessions.contract.js';

describeDashboardSessionsContract(
  'SignedDashboardSessions',
  // A Dispatcher started again (same secret) is the other handle: it accepts the sessions the first made.
  async () => ({ one: new SignedDashboardSessions('contract-secret'), other: new SignedDashboardSessions('contract-secret') }),
  { codesAcrossHandles: false },
);
