import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process-level tests spawn many children: keep the 2-core machine from thrashing.
    maxWorkers: 2,
    env: { FLOE_LOG_LEVEL: 'warn' },
  },
  resolve: {
    alias: { floe: new URL('../runtime/api/index.ts', import.meta.url).pathname },
  },
});
