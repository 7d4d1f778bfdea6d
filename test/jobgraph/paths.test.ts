// What a submitted JobGraph may name as a text sink or source path, and its sinks' write modes.
import { describe, expect, it } from 'vitest';
import { InvalidJobGraphError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph, JobVertex } from '../../runtime/jobgraph/jobgraph.js';
import { isWithin, normalisePath, pathProblem } from '../../runtime/jobgraph/paths.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';

function vertexWith(id: string, operators: JobVertex['operators']): JobVertex {
  return { id, name: id, parallelism: 1, maxParallelism: 128, slotSharingGroup: 'default', operators };
}

/** A graph of one chain per sink path: sequence → text sink. */
function graphWithSinks(paths: string[], sourcePath = '/data/in.txt'): JobGraph {
  return {
    jobId: JobId.of('job-paths'),
    name: 'paths',
    library: { sha256: 'b'.repeat(64), sizeBytes: 10 },
    program: { export: 'default', args: [] },
    vertices: [
      vertexWith('read', [
        { kind: 'source.textFile', id: 'read-op', name: 'read', path: sourcePath, splitSizeBytes: 10 },
        { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 1 },
      ]),
      ...paths.map((path, i) =>
        vertexWith(`v${i}`, [
          { kind: 'source.sequence', id: `s${i}`, name: 'seq', from: 1, to: 2 },
          { kind: 'sink.textFile', id: `w${i}`, name: `write${i}`, path, writeMode: 'no-overwrite' },
        ]),
      ),
    ],
    edges: [],
  };
}

function problemsOf(graph: JobGraph): readonly string[] {
  try {
    validateJobGraph(graph);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidJobGraphError);
    return (e as InvalidJobGraphError).problems;
  }
  return [];
}

describe('paths in a JobGraph', () => {
  it('normalises absolute paths and s3:// URIs', () => {
    expect(normalisePath('/a//b/./c/')).toBe('/a/b/c');
    expect(normalisePath('/')).toBe('/');
    expect(normalisePath('s3://bucket//out/./x/')).toBe('s3://bucket/out/x');
    expect(isWithin('/a/b/c', '/a/b')).toBe(true);
    expect(isWithin('/a/bc', '/a/b')).toBe(false);
    expect(pathProblem('/a/b', 'p', false)).toBeUndefined();
  });

  it("refuses sink and source paths that hold '..', are not normalised or not absolute, naming each", () => {
    const problems = problemsOf(graphWithSinks(['/data/out/../../etc', '/data/x/', 's3://bucket/a/../b', 'relative/out'], '/data//in.txt'));
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/operators\[1\] \('write0'\)\.path holds '\.\.' segments.*'\/data\/out\/\.\.\/\.\.\/etc'/),
        expect.stringMatching(/\('write1'\)\.path must be normalised, found '\/data\/x\/' \(its normal form is '\/data\/x'\)/),
        expect.stringMatching(/\('write2'\)\.path holds '\.\.' segments.*'s3:\/\/bucket\/a\/\.\.\/b'/),
        expect.stringMatching(/\('write3'\)\.path must be absolute .* found 'relative\/out'/),
        expect.stringMatching(/\('read'\)\.path must be normalised, found '\/data\/\/in\.txt'/),
      ]),
    );
    expect(problems).toHaveLength(5);
  });

  it('accepts an s3:// source naming a key or prefix; refuses one with a bad bucket name or a .. segment, and a relative one', () => {
    expect(problemsOf(graphWithSinks([], 's3://bucket/in/2024'))).toEqual([]);
    expect(problemsOf(graphWithSinks([], 's3://bucket'))).toEqual([]);
    expect(problemsOf(graphWithSinks([], 's3://Bad_Bucket/in'))).toEqual([
      expect.stringMatching(/\('read'\)\.path must be s3:\/\/<bucket>\/<key or prefix> with a valid bucket name, found 's3:\/\/Bad_Bucket\/in'/),
    ]);
    expect(problemsOf(graphWithSinks([], 's3://bucket/a/../b'))).toEqual([expect.stringMatching(/\('read'\)\.path holds '\.\.' segments/)]);
    expect(problemsOf(graphWithSinks([], 'in.txt'))).toEqual([
      expect.stringMatching(
        /\('read'\)\.path must be absolute \(tasks run in other processes\) or an s3:\/\/<bucket>\/<key or prefix> URI \(AWS backend\), found 'in\.txt'/,
      ),
    ]);
  });

  it('refuses a filesystem root as a sink folder, and sink folders inside one another', () => {
    expect(problemsOf(graphWithSinks(['/']))).toEqual([expect.stringMatching(/path is a filesystem root \('\/'\)/)]);
    expect(problemsOf(graphWithSinks(['/data/out', '/data/out/inner']))).toEqual([
      expect.stringMatching(/'\/data\/out\/inner' and the target '\/data\/out' of .* lie one inside the other/),
    ]);
    expect(problemsOf(graphWithSinks(['/data/out', '/data/outer']))).toEqual([]);
  });

  it('gives a sink without a write mode the default, and names a bad one', () => {
    const raw = JSON.parse(JSON.stringify(graphWithSinks(['/data/out']))) as { vertices: { operators: Record<string, unknown>[] }[] };
    delete raw.vertices[1]!.operators[1]!['writeMode'];
    expect(parseJobGraph(raw).vertices[1]!.operators[1]).toMatchObject({ kind: 'sink.textFile', writeMode: 'no-overwrite' });
    raw.vertices[1]!.operators[1]!['writeMode'] = 'clobber';
    expect(() => parseJobGraph(raw)).toThrow(/vertices\[1\]\.operators\[1\]\.writeMode must be one of 'no-overwrite', 'overwrite', found "clobber"/);
  });
});
