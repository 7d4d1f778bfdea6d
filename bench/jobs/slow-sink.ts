// The slow-sink job of the checkpoint benchmark's backpressure section: the e2e fixture's job, bundled from here.
export { slowSink } from '../../test/fixtures/jobs/slow-sink.js';
