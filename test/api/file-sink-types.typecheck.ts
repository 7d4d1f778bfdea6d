// Type tests of sinkTo: a FileSink of another element type than the stream's fails tsc.
import { defineJob, FileSink } from '../../runtime/api/index.js';

export const wrongType = defineJob('t', (env) => {
  const sink = FileSink.forRowFormat<number>('out', { encode: (n: number) => n.toFixed(2) }).build();
  env.generate((i: number) => i).sinkTo(sink);
  // @ts-expect-error a stream of strings cannot go to a FileSink of numbers
  env.generate((i: number) => `s${i}`).sinkTo(sink);
});
