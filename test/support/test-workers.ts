// In-process workers that follow the WorkerLauncher contract's test protocol (TEST_WORKER_ENV).
import type { InProcessWorker } from '../../runtime/memory/in-process-worker-launcher.js';
import type { WorkerSpec } from '../../runtime/protocol/worker-launcher.js';
import { TEST_WORKER_ENV } from '../contracts/worker-launcher.contract.js';

export async function createContractTestWorker(spec: WorkerSpec): Promise<InProcessWorker> {
  let exit!: (code: number) => void;
  const exited = new Promise<number>((resolve) => (exit = resolve));
  const env = spec.env;
  let timer: NodeJS.Timeout | undefined;
  switch (env[TEST_WORKER_ENV.MODE] ?? 'serve') {
    case 'exit':
      timer = setTimeout(() => exit(Number(env[TEST_WORKER_ENV.EXIT_CODE] ?? '0')), Number(env[TEST_WORKER_ENV.EXIT_AFTER_MS] ?? '0'));
      break;
    case 'check-env': {
      const ok = env['FLOE_RESOURCE_ID'] === env[TEST_WORKER_ENV.EXPECT_ID] && env[TEST_WORKER_ENV.SPEC_VALUE] === 'from-spec';
      timer = setTimeout(() => exit(ok ? 0 : 42), 0);
      break;
    }
    default:
      break;
  }
  return {
    exited,
    async stop() {
      clearTimeout(timer);
      // Like a process, it exits a moment after being asked to, not synchronously.
      setTimeout(() => exit(0), 5);
    },
  };
}
