import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    include: ['test/**/*.test.ts'],
    // test/.tmp holds bundles and scratch files of running tests, never suites.
    exclude: ['test/.tmp/**', 'node_modules/**'],
    globalSetup: ['test/global-setup.ts'],
    // The file systems the runtime's entry points register, registered for in-process clusters too.
    setupFiles: ['test/support/file-systems.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process-level tests spawn many children: keep the 2-core machine from thrashing.
    maxWorkers: 2,
    env: { FLOE_LOG_LEVEL: 'warn' },
    // The JSON report lets CI print one plain 'N passed, N failed' line.
    reporters: ['default', ['json', { outputFile: 'test/.tmp/vitest-report.json' }]],
    // Job libraries (<sha256>.mjs in a library cache) are imported by Node as they are, as on a client
    // and in every task: a rewritten copy would change their functions' source text, and with it the
    // plan fingerprint each task checks.
    server: { deps: { external: [/\/[0-9a-f]{64}\.mjs(\?.*)?$/] } },
  },
  resolve: {
    alias: { floe: new URL('../runtime/api/index.ts', import.meta.url).pathname },
  },
});
