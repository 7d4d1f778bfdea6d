// Shared by the tests that translate job definitions into JobGraphs and validate them: the translation
// options of a job 'job-1' at default parallelism 2, and the problems an InvalidJobGraphError lists.
import { expect } from 'vitest';
import type { BuildJobGraphOptions } from '../../runtime/api/translate.js';
import { InvalidJobGraphError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';

export const buildOptions = (over: Partial<BuildJobGraphOptions> = {}): BuildJobGraphOptions => ({
  jobId: JobId.of('job-1'),
  args: [],
  exportName: 'default',
  library: { sha256: 'a'.repeat(64), sizeBytes: 123 },
  defaultParallelism: 2,
  cwd: '/home/user/project',
  ...over,
});

/** The problems of the InvalidJobGraphError that `f` throws; fails the test when it throws none or another. */
export function problemsOf(f: () => unknown): readonly string[] {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidJobGraphError);
    return (e as InvalidJobGraphError).problems;
  }
  throw new Error('expected an InvalidJobGraphError');
}
