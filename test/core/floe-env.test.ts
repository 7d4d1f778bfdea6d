import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FloeEnvVariables, FloeEnv } from '../../runtime/core/floe-env.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const REGISTRY = 'runtime/core/floe-env.ts';

function filesUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'cdk.out' ? [] : filesUnder(path);
    return [path];
  });
}

/** The source without its comments (a comment may name a variable; code must take the name from FloeEnv). */
function withoutComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

describe('the FLOE_* environment variables', () => {
  const sources = ['runtime', 'functions', 'cdk'].flatMap(filesUnder).filter((f) => /\.(ts|tsx|mts|js|mjs)$/.test(f) && f !== REGISTRY);

  it('are spelled only in core/floe-env.ts: everything else reads and sets them through FloeEnv', () => {
    const stray = sources.flatMap((file) =>
      [...withoutComments(readFileSync(join(root, file), 'utf8')).matchAll(/FLOE_[A-Z0-9_]*/g)].map((m) => `${relative('.', file)}: ${m[0]}`),
    );
    expect(stray).toEqual([]);
  });

  it('registers every variable the container image sets', () => {
    const dockerfile = readFileSync(join(root, 'cdk/Dockerfile'), 'utf8');
    const names = new Set<string>(Object.values(FloeEnv));
    const unregistered = [...dockerfile.matchAll(/FLOE_[A-Z0-9_]+/g)].map((m) => m[0]).filter((n) => !names.has(n));
    expect(unregistered).toEqual([]);
  });

  it('names each variable FLOE_<key>, with a type, its readers and a one-line meaning', () => {
    for (const [key, variable] of Object.entries(FloeEnvVariables)) {
      expect(FloeEnv[key as keyof typeof FloeEnv]).toBe(`FLOE_${key}`);
      expect(variable.readBy, key).not.toBe('');
      expect(variable.meaning, key).not.toMatch(/\n/);
    }
  });
});
