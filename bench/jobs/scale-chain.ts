// The operators of the scale benchmark's jobs: a sequence, an identity map and a collect sink. The
// benchmark (bench/lib/scale-job.ts) wires them into long forward chains of many parallel tasks.
import { defineJob } from 'floe';

export default defineJob('bench-scale-chain', (env) => {
  env
    .fromSequence(1, 10)
    .map((n: number) => n)
    .name('identity')
    .collect()
    .name('collect');
});
