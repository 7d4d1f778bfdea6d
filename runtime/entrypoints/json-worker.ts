// The Dispatcher's JSON worker thread: parses request bodies too large to parse on the event loop
// without delaying other requests (see runtime/dispatcher/json-body.ts).
import { parentPort } from 'node:worker_threads';
import { answerJsonWorkerRequest, type JsonWorkerRequest } from '../dispatcher/json-body.js';

if (parentPort === null) {
  process.stderr.write('json-worker must run as a worker thread of a Dispatcher\n');
  process.exit(1);
}
const port = parentPort;
port.on('message', (request: JsonWorkerRequest) => port.postMessage(answerJsonWorkerRequest(request)));
