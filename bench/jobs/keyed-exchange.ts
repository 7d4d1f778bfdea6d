// The job of bench/exchange.ts: `count` records [`key-<i mod keys>`, i] from a bounded generator in slot
// sharing group 'producers', keyed by their first field into a counting aggregate in group 'consumers'.
// The aggregate has no merge function, so nothing is pre-aggregated: every record crosses the keyed
// exchange. Args: <count> <keys> <parallelism>.
import { defineJob } from 'floe';

export default defineJob('keyed-exchange', (env, args) => {
  const count = Number(args[0] ?? 1_000_000);
  const keys = Number(args[1] ?? 4096);
  const parallelism = Number(args[2] ?? 2);
  env
    .generate((i): [string, number] => [`key-${i % keys}`, i], { count })
    .name('records')
    .setParallelism(parallelism)
    .slotSharingGroup('producers')
    .keyBy(([key]) => key)
    .aggregate({ createAccumulator: () => 0, add: (_record: [string, number], n: number) => n + 1, getResult: (n: number) => n })
    .name('count')
    .setParallelism(parallelism)
    .slotSharingGroup('consumers')
    .collect();
});
