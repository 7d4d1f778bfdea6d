import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    include: ['test/**/*.test.ts'],
    // test/.tmp holds bundles and scratch files of running tests, never suites.
    exclude: ['test/.tmp/**', 'node_modules/**'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process-level tests spawn many children: keep the 2-core machine from thrashing.
    maxWorkers: 2,
    env: { FLOE_LOG_LEVEL: 'warn' },
    // The JSON report lets CI print one plain 'N passed, N failed' line.
    reporters: ['default', ['json', { outputFile: 'test/.tmp/vitest-report.json' }]],
  },
  resolve: {
    alias: { floe: new URL('../runtime/api/index.ts', import.meta.url).pathname },
  },
});
