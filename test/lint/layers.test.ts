// The layer check's own test: the rules of layer-rules.cjs, run by dependency-cruiser over small trees
// written here, pass a tree that keeps the layers and report an upward import, an import between peers,
// a runtime file importing a test, and an import circle (also one closed by a type-only import). And the
// layer table docs/ARCHITECTURE.md shows is the one layers.json holds.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cruise } from 'dependency-cruiser';
import { afterEach, describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const { rulesFor } = require('../../layer-rules.cjs') as { rulesFor: (table: { layers: string[][]; above: string[] }) => unknown[] };

const table = { layers: [['core'], ['blob', 'ha'], ['local']], above: ['test'] };

const trees: string[] = [];
afterEach(() => {
  for (const t of trees.splice(0)) rmSync(t, { recursive: true, force: true });
});

/** Writes `files` (path → source) into a new folder. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'floe-layers-'));
  trees.push(root);
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), source);
  }
  return root;
}

/** The violations the layer check reports on `root`'s runtime/: rule name and the import. */
async function violations(root: string): Promise<string[]> {
  const result = await cruise(
    ['runtime'],
    { baseDir: root, validate: true, ruleSet: { forbidden: rulesFor(table) } as never, tsPreCompilationDeps: true, doNotFollow: { path: ['node_modules'] } },
    { extensions: ['.ts', '.js'] },
  );
  if (typeof result.output === 'string') throw new Error(`expected a cruise result, got: ${result.output}`);
  return result.output.summary.violations
    .map((v) => `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle ? ` (circle ${v.cycle.map((c) => c.name).join(' -> ')})` : ''}`)
    .sort();
}

const clean = {
  'runtime/core/clock.ts': 'export const now = (): number => Date.now();\n',
  'runtime/blob/store.ts':
    "import { now } from '../core/clock.js';\nexport interface Store { put(at: number): void }\nexport const stamp = (): number => now();\n",
  'runtime/ha/lease.ts': "import { now } from '../core/clock.js';\nexport const expires = (ms: number): number => now() + ms;\n",
  'runtime/local/fs-store.ts':
    "import type { Store } from '../blob/store.js';\nimport { expires } from '../ha/lease.js';\nexport const fsStore: Store = { put: (at) => void expires(at) };\n",
  'test/helper.ts': "import { fsStore } from '../runtime/local/fs-store.js';\nexport const store = fsStore;\n",
};

describe('the layer check', () => {
  it('passes a tree whose imports run down the layers only', async () => {
    expect(await violations(tree(clean))).toEqual([]);
  });

  it('reports an upward import, and the circle it closes with a type-only import back', async () => {
    const root = tree({
      ...clean,
      'runtime/blob/store.ts':
        "import { now } from '../core/clock.js';\nimport { fsStore } from '../local/fs-store.js';\nexport interface Store { put(at: number): void }\nexport const stamp = (): number => now();\nexport const fallback = () => fsStore;\n",
    });
    expect(await violations(root)).toEqual([
      'layer-up:blob: runtime/blob/store.ts -> runtime/local/fs-store.ts',
      'no-circular: runtime/blob/store.ts -> runtime/local/fs-store.ts (circle runtime/local/fs-store.ts -> runtime/blob/store.ts)',
    ]);
  });

  it('reports a circle within a folder that one type-only import closes', async () => {
    const root = tree({
      ...clean,
      'runtime/blob/stores.ts':
        "import { defaultPolicy } from './policy.js';\nexport interface Policy { readonly copies: number }\nexport const copies = (): number => defaultPolicy.copies;\n",
      'runtime/blob/policy.ts': "import type { Policy } from './stores.js';\nexport const defaultPolicy: Policy = { copies: 1 };\n",
    });
    expect(await violations(root)).toEqual([
      'no-circular: runtime/blob/policy.ts -> runtime/blob/stores.ts (circle runtime/blob/stores.ts -> runtime/blob/policy.ts)',
    ]);
  });

  it('reports an upward dynamic import', async () => {
    const root = tree({ ...clean, 'runtime/core/late.ts': "export const load = () => import('../ha/lease.js');\n" });
    expect(await violations(root)).toEqual(['layer-up:core: runtime/core/late.ts -> runtime/ha/lease.ts']);
  });

  it('reports an import between peers of a layer, a runtime file importing a test, and a folder no layer places', async () => {
    const root = tree({
      ...clean,
      'runtime/ha/peer.ts': "import { stamp } from '../blob/store.js';\nexport const s = stamp;\n",
      'runtime/core/from-test.ts': "import { store } from '../../test/helper.js';\nexport const s = store;\n",
      'runtime/misc/thing.ts': "import { now } from '../core/clock.js';\nexport const t = now;\n",
    });
    const found = await violations(root);
    expect(found).toContain('layer-peer:ha: runtime/ha/peer.ts -> runtime/blob/store.ts');
    expect(found).toContain('runtime-imports-above: runtime/core/from-test.ts -> test/helper.ts');
    expect(found).toContain('layer-unknown-folder: runtime/misc/thing.ts -> runtime/core/clock.ts');
  });
});

describe('the layer table', () => {
  it('docs/ARCHITECTURE.md shows the layers of layers.json, in order', () => {
    const root = new URL('../../', import.meta.url);
    const { layers } = JSON.parse(readFileSync(new URL('layers.json', root), 'utf8')) as { layers: string[][] };
    const doc = readFileSync(new URL('docs/ARCHITECTURE.md', root), 'utf8');
    const start = doc.indexOf('## Layers and folders');
    const end = doc.indexOf('\n## ', start + 1);
    const section = doc.slice(start, end === -1 ? undefined : end);
    const rows = [...section.matchAll(/^\| (\d+) \| (.*) \|$/gm)].map((m) => ({
      layer: Number(m[1]),
      folders: [...m[2]!.matchAll(/`([a-z]+)`/g)].map((f) => f[1]),
    }));
    expect(rows).toEqual(layers.map((folders, layer) => ({ layer, folders })));
  });
});
