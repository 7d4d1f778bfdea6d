// ESLint over the TypeScript and JavaScript of the repository: typescript-eslint's recommended rules
// (without type information: see package.json's lint script for why), tuned to this codebase; each rule
// turned off or changed says why. Layers and import circles are the layer check's (.dependency-cruiser.cjs).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** What Node offers every script without an import. */
const nodeGlobals = Object.fromEntries(
  [
    'process',
    'console',
    'Buffer',
    'URL',
    'URLSearchParams',
    'AbortController',
    'TextEncoder',
    'TextDecoder',
    'structuredClone',
    'fetch',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'setImmediate',
    'clearImmediate',
    'queueMicrotask',
    'globalThis',
  ].map((name) => [name, 'readonly']),
);
const commonJsGlobals = { require: 'readonly', module: 'writable', exports: 'writable', __dirname: 'readonly', __filename: 'readonly' };

export default defineConfig(
  {
    ignores: ['node_modules/', 'dist/', '.floe/', '.dist-build-*/', 'test/.tmp/', 'bench/out/', 'cdk/cdk.out/', '**/*.d.ts', 'test/fixtures/jobs/broken.ts'],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      // `_name` marks a parameter or binding kept for its position or shape; `{ secret: _, ...rest }` drops a field.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // A server's handler reads the server it belongs to, which exists only once created: that binding stays `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // `(...args: any[]) => unknown` is how a function type accepts every function; other `any`s say why where they stand.
      '@typescript-eslint/no-explicit-any': ['error', { ignoreRestArgs: true }],
      // User functions arrive untyped from job libraries and are called only after a typeof check: `Function` says exactly that.
      '@typescript-eslint/no-unsafe-function-type': 'off',
    },
  },
  {
    files: ['runtime/**'],
    rules: {
      // A runtime file does one job; one that needs more than this says why at its top (an eslint-disable of this
      // rule with its reason), so the reason is read where the file is.
      'max-lines': ['error', { max: 500, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: {
      // Tests and benchmarks read JSON answers and reach into what they measure; the assertion is the type check there.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    files: ['**/*.{js,mjs,cjs}'],
    languageOptions: { globals: nodeGlobals },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...nodeGlobals, ...commonJsGlobals } },
    rules: {
      // CommonJS files (the layer check's config, a test preload) load their modules with require.
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
);
