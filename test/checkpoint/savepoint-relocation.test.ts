// A savepoint moved or copied whole restores from where it is now: relocateSavepoint rewrites the handles of
// its metadata from the folder it was written in to the folder it is found in — another folder, another
// bucket, or from S3 to a local disk — and leaves every other URI as it was.
import { describe, expect, it } from 'vitest';
import { relocateSavepoint } from '../../runtime/checkpoint/savepoint-location.js';

const written = 's3://bucket-a/savepoints/savepoint-9f2c1a-0123456789ab';
const metadata = {
  jobId: 'job',
  checkpointId: 7,
  savepointFolder: written,
  subtasks: [
    {
      vertexId: 'v',
      subtaskIndex: 0,
      state: {
        operators: {
          counts: {
            keyed: [{ handle: { uri: `${written}/counts-0-keyed`, size: 10 }, start: 0, end: 63, offsets: [0] }],
            operator: [{ handle: { uri: `${written}/counts-0-op`, size: 4 }, lists: [] }],
          },
          // Not under the savepoint's folder (a sink's target, say): left alone.
          sink: { keyed: [], operator: [{ handle: { uri: 's3://bucket-a/output/part-0-1', size: 3 }, lists: [] }] },
        },
      },
    },
  ],
};

const uris = (m: typeof metadata): string[] =>
  m.subtasks.flatMap((s) => Object.values(s.state.operators).flatMap((o) => [...o.keyed, ...o.operator].map((h) => h.handle.uri)));

describe('relocateSavepoint', () => {
  it.each([
    ['another folder of the bucket', 's3://bucket-a/kept/sp', 's3://bucket-a/kept/sp'],
    ['another bucket, named by its _metadata', 's3://bucket-b/sp/_metadata', 's3://bucket-b/sp'],
    ['a local disk', '/data/savepoints/sp/', 'file:///data/savepoints/sp'],
  ])('moves its handles to %s', (_, foundAt, folder) => {
    const moved = relocateSavepoint(metadata, foundAt);
    expect(uris(moved)).toEqual([`${folder}/counts-0-keyed`, `${folder}/counts-0-op`, 's3://bucket-a/output/part-0-1']);
    expect(moved.savepointFolder).toBe(folder);
    expect(uris(metadata), 'the metadata read stays as it was').toContain(`${written}/counts-0-keyed`);
  });

  it('changes nothing where the savepoint was not moved, or when it does not say where it was written', () => {
    expect(relocateSavepoint(metadata, `${written}/`)).toBe(metadata);
    const { savepointFolder: _, ...rest } = metadata;
    const unrecorded: typeof rest & { readonly savepointFolder?: string } = rest;
    expect(relocateSavepoint(unrecorded, '/elsewhere')).toBe(unrecorded);
  });
});
