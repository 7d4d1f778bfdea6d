// A small job for the admission benchmark: squares of 1..count, collected.
import { defineJob } from 'floe';

export default defineJob('bench-squares', (env, args) => {
  const count = Number(args[0] ?? '100');
  env
    .fromSequence(1, count)
    .map((n: number) => n * n)
    .collect();
});
