// The docs describe the tree as it is: docs/ARCHITECTURE.md names every folder of runtime/ with what it
// holds, and the README's layout names every folder of runtime/. (That its layer table is layers.json's
// is test/lint/layers.test.ts's to check.)
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');
const runtimeFolders = readdirSync(join(root, 'runtime'), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();

/** The rows of the markdown table whose header line is `header`, each as its cells. */
function tableRows(markdown: string, header: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.indexOf(header);
  expect(start, `a table headed '${header}'`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim()),
    );
  }
  return rows;
}

/** The folder names written as `name` or `name/` in a cell. */
const foldersIn = (cell: string): string[] => [...cell.matchAll(/`([a-z]+)\/?`/g)].map((m) => m[1]!);

describe('docs/ARCHITECTURE.md', () => {
  const doc = read('docs/ARCHITECTURE.md');

  it('names every folder of runtime/ once, with what it holds', () => {
    const rows = tableRows(doc, '| folder | holds |');
    expect(rows.flatMap(([folder]) => foldersIn(folder!)).sort()).toEqual(runtimeFolders);
    for (const [folder, holds] of rows) expect(holds, `what ${folder} holds`).not.toBe('');
  });
});

describe('README.md', () => {
  it('names every folder of runtime/ in its layout', () => {
    const readme = read('README.md');
    const layout = readme.slice(readme.indexOf('## Layout'));
    const named = [...layout.matchAll(/^ {2}([a-z]+)\/ /gm)].map((m) => m[1]!).sort();
    expect(named).toEqual(runtimeFolders);
  });
});
