import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary, JobFileError } from '../../runtime/api/library.js';
import { listLibraryExports } from '../../runtime/api/library-exports.js';
import { sha256Hex } from '../../runtime/blob/blob-store.js';
import { loadJobDefinition, resolveUserFunctions } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import { InvalidJobGraphError } from '../../runtime/core/errors.js';

const fixture = (name: string): string => join(import.meta.dirname, '..', 'fixtures', 'jobs', name);
const tmp = mkdtempSync(join(tmpdir(), 'floe-library-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('job libraries', () => {
  it('bundles a job file into one deterministic, content-addressed ESM module', async () => {
    const a = await bundleJobFile(fixture('word-lengths.ts'));
    const b = await bundleJobFile(fixture('word-lengths.ts'));
    expect(a.sha256).toBe(b.sha256);
    expect(a.sha256).toBe(sha256Hex(a.code));
    const text = Buffer.from(a.code).toString('utf8');
    // the API is inside the bundle; node builtins stay imports; the source map is inline
    expect(text).toContain('__floeJob');
    expect(text).not.toMatch(/from ["']floe["']/);
    expect(text).toMatch(/from ["']node:util["']/);
    expect(text).toContain('sourceMappingURL=data:application/json');
  });

  it('lists exports without running the library', async () => {
    const { code } = await bundleJobFile(fixture('word-lengths.ts'));
    expect((await listLibraryExports(code)).sort()).toEqual(['default', 'lines', 'notAJob']);
  });

  it('rejects bytes that are not an ES module', async () => {
    await expect(listLibraryExports(Buffer.from('export { a'))).rejects.toThrow(/not a valid ES module/);
  });

  it('reports a job file that does not compile, with its location', async () => {
    const error = await bundleJobFile(fixture('broken.ts')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFileError);
    expect((error as Error).message).toMatch(/broken\.ts:4:\d+/);
    await expect(bundleJobFile(fixture('missing.ts'))).rejects.toThrow(/does not exist/);
  });

  it('imports a library from the cache, resolves functions by operator id, and they match the JobGraph', async () => {
    const { code, sha256 } = await bundleJobFile(fixture('word-lengths.ts'));
    const cache = join(tmp, 'cache');
    const ns = await importLibrary(code, cache);
    const again = await importLibrary(code, cache);
    expect(again).toBe(ns);
    expect(readdirSync(cache)).toEqual([`${sha256}.mjs`]);

    const graph = buildJobGraph(loadJobDefinition(ns, 'default'), {
      jobId: JobId.of('job-1'),
      args: ['5'],
      exportName: 'default',
      library: { sha256, sizeBytes: code.byteLength },
      defaultParallelism: 2,
    });
    validateJobGraph(graph, await listLibraryExports(code));

    const fns = resolveUserFunctions(ns, { export: 'default', args: ['5'] });
    const refs = graph.vertices.flatMap((v) => v.operators).flatMap((op) => ('fn' in op ? [op] : []));
    expect(refs.map((op) => op.kind)).toEqual(['map', 'filter', 'flatMap']);
    for (const op of refs) expect(fns.has(op.fn.operatorId)).toBe(true);
    const [toWord, keep, explode] = refs.map((op) => fns.get(op.fn.operatorId)!);
    expect(toWord!(7)).toBe('w7');
    expect(keep!('w7')).toBe(false);
    expect(keep!('w10')).toBe(true);
    expect(explode!('w10')).toEqual(['w10', 'W10']);
  });

  it('says what a library exports when the export is missing or not a job', async () => {
    const { code } = await bundleJobFile(fixture('word-lengths.ts'));
    const ns = await importLibrary(code, join(tmp, 'cache'));
    expect(() => resolveUserFunctions(ns, { export: 'nope', args: [] })).toThrow(InvalidJobDefinitionError);
    expect(() => resolveUserFunctions(ns, { export: 'nope', args: [] })).toThrow(/no export 'nope'.*'default', 'lines'/);
    expect(() => resolveUserFunctions(ns, { export: 'notAJob', args: [] })).toThrow(/'notAJob' .* is not a job definition \(found number\)/);
  });

  it('validates FunctionRefs and the program export against the library exports', async () => {
    const { code, sha256 } = await bundleJobFile(fixture('word-lengths.ts'));
    const ns = await importLibrary(code, join(tmp, 'cache'));
    const graph = buildJobGraph(loadJobDefinition(ns, 'lines'), {
      jobId: JobId.of('job-2'),
      args: [],
      exportName: 'lines',
      library: { sha256, sizeBytes: code.byteLength },
      defaultParallelism: 1,
      cwd: '/data',
    });
    const error = (() => {
      try {
        validateJobGraph(graph, ['default']);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(InvalidJobGraphError);
    const problems = (error as InvalidJobGraphError).problems;
    expect(problems).toContainEqual(expect.stringMatching(/program.export 'lines' is not exported by the library/));
    expect(problems).toContainEqual(expect.stringMatching(/operators\[\d\] \('map'\)\.fn\.export 'lines' is not exported/));
  });
});
