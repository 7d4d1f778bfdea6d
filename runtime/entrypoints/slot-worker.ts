// The worker thread of one TaskExecutor slot: user code runs here, never on the TaskExecutor's main thread.
import { parentPort } from 'node:worker_threads';
import { SlotWorkerRuntime } from '../task/slot-worker-runtime.js';

if (parentPort === null) {
  process.stderr.write('slot-worker must run as a worker thread of a TaskExecutor\n');
  process.exit(1);
}
// User code comes in libraries with inline source maps: its stack frames then name the user's files.
process.setSourceMapsEnabled(true);
new SlotWorkerRuntime(parentPort, { ownThread: true });
