// Writes docs/CONFIGURATION.md from runtime/core/config-docs.ts (CONFIG_OPTIONS and the FLOE_* variables):
// `node docs/generate-configuration.mjs`. test/core/config-docs.test.ts fails when the file is stale.
import { build } from 'esbuild';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const bundle = await build({ entryPoints: [`${root}runtime/core/config-docs.ts`], bundle: true, format: 'esm', platform: 'node', write: false });
const { configurationMarkdown } = await import(`data:text/javascript;base64,${Buffer.from(bundle.outputFiles[0].text).toString('base64')}`);
writeFileSync(`${root}docs/CONFIGURATION.md`, configurationMarkdown());
console.log('wrote docs/CONFIGURATION.md');
