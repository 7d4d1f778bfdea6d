import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_OPTIONS } from '../../runtime/core/config.js';
import { configurationMarkdown } from '../../runtime/core/config-docs.js';

describe('docs/CONFIGURATION.md', () => {
  const file = readFileSync(fileURLToPath(new URL('../../docs/CONFIGURATION.md', import.meta.url)), 'utf8');

  it('is what CONFIG_OPTIONS and the FLOE_* registry make: run `node docs/generate-configuration.mjs` after changing either', () => {
    expect(file).toBe(configurationMarkdown());
  });

  it('lists every option by its key', () => {
    for (const spec of Object.values(CONFIG_OPTIONS)) expect(file).toContain(`| \`${spec.key}\` |`);
  });
});
