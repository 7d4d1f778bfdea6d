// The worker thread of one TaskExecutor slot: user code runs here, never on the TaskExecutor's main thread.
import { parentPort } from 'node:worker_threads';
import { registerKinesisTaskConnector } from '../aws/kinesis-connector.js';
import { s3FileSystem } from '../aws/s3-file-system.js';
import { registerFileSystem } from '../blob/file-systems.js';
import { localFileSystem } from '../local/fs-file-system.js';
import { SlotWorkerRuntime } from '../task/slot-worker-runtime.js';

if (parentPort === null) {
  process.stderr.write('slot-worker must run as a worker thread of a TaskExecutor\n');
  process.exit(1);
}
// User code comes in libraries with inline source maps: its stack frames then name the user's files.
process.setSourceMapsEnabled(true);
// The file systems text sources and sinks reach: local paths, and S3 (whose SDK loads on the first s3:// path).
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);
// The connectors of `fromSource` and `sinkTo` (each loads its SDK on first use).
registerKinesisTaskConnector();
new SlotWorkerRuntime(parentPort, { ownThread: true });
