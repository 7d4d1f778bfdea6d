import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { countRecords, countWarningsAndErrors, ensureExampleLog, generateLogLines, sameCounts } from '../../runtime/cli/example.js';
import { resolveUserFunctions } from '../../runtime/api/program.js';
import logLevels from '../../examples/log-levels.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-example-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('floe example', () => {
  it('generates the same log for the same seed, about the size asked for', () => {
    const a = [...generateLogLines(64 * 1024)];
    expect([...generateLogLines(64 * 1024)]).toEqual(a);
    const bytes = a.reduce((s, l) => s + Buffer.byteLength(l) + 1, 0);
    expect(bytes).toBeGreaterThanOrEqual(64 * 1024);
    expect(bytes).toBeLessThan(64 * 1024 + 1024);
  });

  it("agrees with the direct count when the example job's functions run over the log", async () => {
    const path = join(dir, 'logs.txt');
    expect(ensureExampleLog(path, 256 * 1024)).toEqual({ created: true });
    expect(ensureExampleLog(path, 256 * 1024)).toEqual({ created: false });
    const fns = resolveUserFunctions({ default: logLevels }, { export: 'default', args: [path] });
    const [parse, keep, normalise] = [...fns.values()] as [(l: string) => unknown[], (e: unknown) => boolean, (e: unknown) => unknown];
    const records = readFileSync(path, 'utf8').split('\n').flatMap(parse).filter(keep).map(normalise);
    const direct = await countWarningsAndErrors(path);
    expect(records.length).toBeGreaterThan(100);
    expect(sameCounts(countRecords(records), direct)).toBe(true);
    expect(records[0]).toMatchObject({ level: expect.stringMatching(/^(ERROR|WARN)$/), service: expect.stringMatching(/^[a-z]+$/) });
    // a lost record would show
    expect(sameCounts(countRecords(records.slice(1)), direct)).toBe(false);
  });
});
