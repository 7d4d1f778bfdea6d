// The job of bench/failover.ts: an unbounded keyed stream that runs until cancelled — records from a
// rate-limited generator, keyed into a running sum, into a collect sink. Args: <parallelism> <records/s>.
import { defineJob } from 'floe';

export default defineJob('unbounded-keyed', (env, args) => {
  const parallelism = Number(args[0] ?? 4);
  const rate = Number(args[1] ?? 2000);
  env
    .generate((i): [string, number] => [`key-${i % 64}`, 1], { ratePerSecond: rate })
    .setParallelism(parallelism)
    .keyBy(([key]) => key)
    .sum(1)
    .setParallelism(parallelism)
    .collect({ maxRecords: 0 });
});
