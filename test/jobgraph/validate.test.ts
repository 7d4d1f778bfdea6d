import { describe, expect, it } from 'vitest';
import { JobId } from '../../runtime/core/ids.js';
import type { JobEdge, JobGraph, JobVertex } from '../../runtime/jobgraph/jobgraph.js';
import { OPERATOR_KINDS, parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { JOB_GRAPH_LIMITS } from '../../runtime/jobgraph/limits.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import { problemsOf } from '../support/job-graphs.js';

const fn = (operatorId: string) => ({ export: 'default', operatorId });

function vertex(id: string, over: Partial<JobVertex> = {}): JobVertex {
  return {
    id,
    name: id,
    parallelism: 2,
    maxParallelism: 128,
    slotSharingGroup: 'default',
    operators: [{ kind: 'map', id: `${id}-op`, name: 'map', fn: fn(`${id}-op`) }],
    ...over,
  };
}
const source = (id: string, over: Partial<JobVertex> = {}): JobVertex =>
  vertex(id, { operators: [{ kind: 'source.sequence', id: `${id}-op`, name: 'seq', from: 1, to: 10 }], ...over });
const sink = (id: string, over: Partial<JobVertex> = {}): JobVertex =>
  vertex(id, { operators: [{ kind: 'sink.collect', id: `${id}-op`, name: 'collect', maxRecords: 10 }], ...over });
const edge = (id: string, s: string, t: string, over: Partial<JobEdge> = {}): JobEdge => ({
  id,
  source: s,
  target: t,
  distribution: 'forward',
  partitioner: 'forward',
  partitionType: 'pipelined',
  ...over,
});

function graph(vertices: JobVertex[], edges: JobEdge[]): JobGraph {
  return {
    jobId: JobId.of('job-1'),
    name: 'test',
    library: { sha256: 'b'.repeat(64), sizeBytes: 10 },
    program: { export: 'default', args: ['x'] },
    vertices,
    edges,
  };
}

const good = (): JobGraph => graph([source('a'), vertex('b'), sink('c')], [edge('e1', 'a', 'b'), edge('e2', 'b', 'c')]);

describe('validateJobGraph', () => {
  it('accepts a well-formed graph, also when checked against the library exports', () => {
    expect(() => validateJobGraph(good())).not.toThrow();
    expect(() => validateJobGraph(good(), ['default', 'other'])).not.toThrow();
  });

  it('lists every problem in one error', () => {
    const g = graph(
      [
        source('a'),
        vertex('b', { parallelism: 3 }), // forward edge a→b with 2 vs 3
        vertex('b'), // duplicate id
        vertex('d', { parallelism: 0 }),
        vertex('e', { parallelism: 200, maxParallelism: 128 }),
        source('f'), // a source with an input
        vertex('g'), // no inputs
        vertex('x'),
        vertex('y'), // x ⇄ y cycle
        sink('s'),
      ],
      [
        edge('e1', 'a', 'b'),
        edge('e2', 'b', 'ghost'),
        edge('e1', 'a', 'f'), // duplicate edge id
        edge('e4', 'x', 'y'),
        edge('e5', 'y', 'x'),
        edge('e6', 'y', 's'),
        edge('e7', 's', 'd', { distribution: 'all-to-all', partitioner: 'rebalance' }), // out of a sink
        edge('e8', 'a', 'e', { distribution: 'all-to-all', partitioner: 'forward' }),
      ],
    );
    const problems = problemsOf(() => validateJobGraph(g, ['other']));
    const expected = [
      /program.export 'default' is not exported by the library \(it exports: 'other'\)/,
      /vertices\[2\] \('b'\): duplicate vertex id 'b' \(also vertices\[1\]\)/,
      /vertices\[3\] \('d'\)\.parallelism must be >= 1, found 0/,
      /vertices\[4\] \('e'\)\.parallelism 200 exceeds its maxParallelism 128/,
      /\.fn\.export 'default' is not exported by the library/,
      /edges\[0\] \(from 'a' to 'b'\): a forward edge needs equal parallelism, but 'a' has 2 and 'b' has 3/,
      /edges\[1\] \(from 'b' to 'ghost'\)\.target 'ghost' is not a vertex of the graph/,
      /edges\[2\] \(from 'a' to 'f'\): duplicate edge id 'e1'/,
      /edges\[6\] \(from 's' to 'd'\): vertex 's' ends in a sink and cannot have outputs/,
      /edges\[7\] \(from 'a' to 'e'\): distribution 'all-to-all' does not go with partitioner 'forward'/,
      /vertices\[5\] \('f'\) starts with a source \(source.sequence\) but has 1 input edge/,
      /vertices\[6\] \('g'\) starts with 'map' \(map\), not a source, and has no input edges/,
      /cycle through vertices 'x', 'y'/,
    ];
    for (const re of expected) expect(problems).toContainEqual(expect.stringMatching(re));
    // only the cycle's own vertices are named, not what lies behind it
    expect(problems.find((p) => p.includes('cycle'))).not.toMatch(/'s'/);
  });

  it('rejects an empty graph and graphs over the limits', () => {
    expect(problemsOf(() => validateJobGraph(graph([], [])))).toEqual([expect.stringMatching(/no vertices/)]);
    const wide = graph(
      [source('a', { parallelism: 32_769, maxParallelism: 32_768 }), sink('b', { parallelism: 2000, maxParallelism: 40_000 })],
      [edge('e1', 'a', 'b')],
    );
    const problems = problemsOf(() => validateJobGraph(wide));
    expect(problems).toContainEqual(expect.stringMatching(/vertices\[0\] \('a'\)\.parallelism 32769 exceeds the limit of 32768 subtasks per vertex/));
    expect(problems).toContainEqual(expect.stringMatching(/vertices\[1\] \('b'\)\.maxParallelism 40000 exceeds the limit of 32768 key groups/));
    const many = graph(
      Array.from({ length: JOB_GRAPH_LIMITS.maxVertices + 1 }, (_, i) => source(`v${i}`)),
      [],
    );
    expect(problemsOf(() => validateJobGraph(many))).toContainEqual(expect.stringMatching(/1001 vertices, the limit is 1000/));
  });

  it('accepts vertices of parallelism and maxParallelism 32768, as Flink does', () => {
    const big = graph(
      [source('a', { parallelism: 32_768, maxParallelism: 32_768 }), sink('b', { parallelism: 32_768, maxParallelism: 32_768 })],
      [edge('e1', 'a', 'b')],
    );
    expect(() => validateJobGraph(big)).not.toThrow();
    expect(JOB_GRAPH_LIMITS.maxParallelism).toBe(32_768);
  });

  it('accepts a second edge between the same two vertices: each carries every record, as a union of a stream with itself does', () => {
    const g = graph(
      [source('a'), vertex('b'), sink('c')],
      [edge('e1', 'a', 'b'), edge('e2', 'b', 'c'), edge('again', 'a', 'b', { distribution: 'all-to-all', partitioner: 'rebalance' }), edge('e4', 'b', 'c')],
    );
    expect(() => validateJobGraph(g)).not.toThrow();
  });

  it('names vertices by name, not by id, in edge and cycle problems', () => {
    const g = graph(
      [
        source('op-1', { name: 'numbers' }),
        vertex('op-2', { name: 'double' }),
        vertex('op-3', { name: 'half' }),
        sink('op-4', { name: 'out', parallelism: 3 }),
      ],
      [edge('e-1', 'op-1', 'op-2'), edge('e-2', 'op-2', 'op-3'), edge('e-3', 'op-3', 'op-2'), edge('e-4', 'op-3', 'op-4')],
    );
    const problems = problemsOf(() => validateJobGraph(g));
    expect(problems).toEqual([
      "edges[3] (from 'half' to 'out'): a forward edge needs equal parallelism, but 'half' has 2 and 'out' has 3; use rebalance (all-to-all)",
      "the graph has a cycle through vertices 'double', 'half': a job graph must be acyclic",
    ]);
  });

  it('checks operator chains, paths and sinks', () => {
    const g = graph(
      [
        vertex('a', {
          operators: [
            { kind: 'source.textFile', id: 'o1', name: 'read', path: 'relative/in.txt', splitSizeBytes: 10 },
            { kind: 'sink.textFile', id: 'o2', name: 'write', path: '/out' },
            { kind: 'source.sequence', id: 'o1', name: 'seq', from: 9, to: 1 },
          ],
        }),
        sink('b'),
        sink('c', { operators: [{ kind: 'sink.textFile', id: 'o3', name: 'write2', path: '/out' }] }),
        vertex('d', { parallelism: 2, operators: [{ kind: 'source.collection', id: 'o4', name: 'coll', fn: fn('o4') }] }),
        sink('e'),
        vertex('f', { operators: [] }),
      ],
      [edge('e1', 'd', 'b'), edge('e2', 'd', 'e'), edge('e3', 'd', 'c'), edge('e4', 'd', 'f')],
    );
    const problems = problemsOf(() => validateJobGraph(g));
    const expected = [
      /operators\[0\] \('read'\)\.path must be absolute .* found 'relative\/in.txt'/,
      /operators\[1\] \('write'\): a sink \(sink.textFile\) can only be the last operator/,
      /operators\[2\] \('seq'\): a source \(source.sequence\) can only be the first operator/,
      /operators\[2\] \('seq'\): duplicate operator id 'o1'/,
      /operators\[2\] \('seq'\): from \(9\) must be <= to \(1\)/,
      /vertices\[2\] \('c'\)\.operators\[0\] \('write2'\): writes to '\/out' like vertices\[0\]/,
      /vertices\[3\] \('d'\)\.parallelism must be 1: its collection source is not parallel, found 2/,
      /2 collect sinks \('collect', 'collect'\), at most one/,
      /vertices\[5\] \('f'\)\.operators is empty/,
    ];
    for (const re of expected) expect(problems).toContainEqual(expect.stringMatching(re));
  });
});

describe('parseJobGraph', () => {
  const json = (g: unknown): unknown => JSON.parse(JSON.stringify(g));

  it('decodes a valid graph and drops unknown fields', () => {
    const input = json(good()) as Record<string, unknown>;
    input['extra'] = true;
    (input['vertices'] as Record<string, unknown>[])[0]!['extra'] = 1;
    expect(parseJobGraph(input)).toEqual(good());
  });

  it('decodes min, max, minBy and maxBy with their field, and refuses minBy or maxBy without one', () => {
    const keyed = (op: Record<string, unknown>): unknown => {
      const g = json(good()) as any;
      g.vertices[1].operators = [{ id: 'k', name: 'lowest', key: fn('k'), emit: 'final', preAggregate: true, ...op }];
      g.edges[0] = { ...g.edges[0], distribution: 'all-to-all', partitioner: 'hash', keySelector: fn('k') };
      return g;
    };
    for (const kind of ['keyed.min', 'keyed.max', 'keyed.minBy', 'keyed.maxBy']) {
      const g = parseJobGraph(keyed({ kind, field: 'temp' }));
      expect(g.vertices[1]!.operators[0]).toEqual({ kind, id: 'k', name: 'lowest', key: fn('k'), field: 'temp', emit: 'final', preAggregate: true });
      expect(() => validateJobGraph(g)).not.toThrow();
    }
    expect(parseJobGraph(keyed({ kind: 'keyed.max', field: 1 })).vertices[1]!.operators[0]).toMatchObject({ field: 1 });
    expect(parseJobGraph(keyed({ kind: 'keyed.min' })).vertices[1]!.operators[0]).not.toHaveProperty('field');
    expect(problemsOf(() => parseJobGraph(keyed({ kind: 'keyed.minBy' })))).toEqual([
      'vertices[1].operators[0].field is needed by keyed.minBy: the property name or tuple index whose value picks the record',
    ]);
    expect(problemsOf(() => parseJobGraph(keyed({ kind: 'keyed.maxBy', field: -1 })))).toEqual([
      'vertices[1].operators[0].field must be a property name (a string) or a tuple index (an integer >= 0), found -1',
    ]);
  });

  it('decodes where a job restores from (--from-savepoint) and names what is wrong with it', () => {
    const withRestore = (savepointRestore: unknown): unknown => ({ ...(json(good()) as object), savepointRestore });
    const restore = { path: 'file:///tmp/savepoints/savepoint-abc123-1f2e', allowNonRestoredState: true };
    expect(parseJobGraph(withRestore(restore)).savepointRestore).toEqual(restore);
    expect(problemsOf(() => parseJobGraph(withRestore({ path: '', allowNonRestoredState: 'yes' })))).toEqual([
      'savepointRestore.path must be a non-empty string, found ""',
      'savepointRestore.allowNonRestoredState must be true or false, found "yes"',
    ]);
  });

  it('names every malformed field by its path', () => {
    const input = json(good()) as any;
    input.jobId = 'bad id!';
    input.library.sha256 = 'xyz';
    input.program.args = ['ok', 7];
    input.vertices[2].parallelism = 'x';
    input.vertices[1].operators[0].fn = { export: '', operatorId: 'op-2' };
    input.vertices[0].operators[0].kind = 'source.kafka';
    delete input.vertices[2].slotSharingGroup;
    input.edges[1].partitionType = 'lazy';
    input.edges.push(null);
    const problems = problemsOf(() => parseJobGraph(input));
    expect(problems).toEqual([
      `jobId must be 1-64 letters, digits, '_' or '-', found "bad id!"`,
      'library.sha256 must be 64 lowercase hex digits, found "xyz"',
      'program.args[1] must be a string, found 7',
      `vertices[0].operators[0].kind must be one of ${OPERATOR_KINDS.map((k) => `'${k}'`).join(', ')}, found "source.kafka"`,
      'vertices[1].operators[0].fn.export must be a non-empty string, found ""',
      'vertices[2].parallelism must be an integer >= 1, found "x"',
      'vertices[2].slotSharingGroup must be a string, found nothing',
      "edges[1].partitionType must be one of 'pipelined', 'blocking', found \"lazy\"",
      'edges[2] must be an object, found null',
    ]);
  });

  it('says what a number it cannot use is: too large, not exact, not an integer, never "null"', () => {
    const input = json(good()) as any;
    input.vertices[0].parallelism = Infinity; // what JSON.parse makes of 1e999
    input.vertices[1].maxParallelism = -Infinity;
    input.vertices[0].operators[0].to = 2 ** 53; // what JSON.parse makes of 9007199254740993
    input.vertices[2].operators[0].maxRecords = 1.5;
    input.library.sizeBytes = 1e300;
    const problems = problemsOf(() => parseJobGraph(input));
    expect(problems).toEqual([
      'library.sizeBytes must be an integer >= 0, found an integer too large to hold exactly (1e+300)',
      'vertices[0].parallelism must be an integer >= 1, found a number too large (Infinity)',
      'vertices[0].operators[0].to must be a safe integer, found an integer too large to hold exactly (9007199254740992)',
      'vertices[1].maxParallelism must be an integer >= 1, found a number too large (-Infinity)',
      'vertices[2].operators[0].maxRecords must be an integer >= 0, found 1.5',
    ]);
    for (const p of problems) expect(p).not.toMatch(/null/);
  });

  it('names a keyed sum field that is neither a property name nor a tuple index', () => {
    const input = json(good()) as any;
    input.vertices[1].operators[0] = { kind: 'keyed.sum', id: 'b-op', name: 'sum', key: fn('b-op'), emit: 'final', field: -1 };
    expect(problemsOf(() => parseJobGraph(input))).toEqual([
      'vertices[1].operators[0].field must be a property name (a string) or a tuple index (an integer >= 0), found -1',
    ]);
    input.vertices[1].operators[0].field = Infinity;
    expect(problemsOf(() => parseJobGraph(input))).toEqual([
      'vertices[1].operators[0].field must be a property name (a string) or a tuple index (an integer >= 0), found a number too large (Infinity)',
    ]);
  });

  it('rejects what is not an object, and oversized arrays before walking them', () => {
    expect(problemsOf(() => parseJobGraph('{}'))).toEqual(['jobGraph must be an object, found "{}"']);
    expect(problemsOf(() => parseJobGraph([]))).toEqual(['jobGraph must be an object, found an array']);
    const input = json(good()) as any;
    input.edges = Array.from({ length: JOB_GRAPH_LIMITS.maxEdges + 1 }, () => ({}));
    expect(problemsOf(() => parseJobGraph(input))).toEqual([`edges has ${JOB_GRAPH_LIMITS.maxEdges + 1} entries, the limit is ${JOB_GRAPH_LIMITS.maxEdges}`]);
  });

  it('caps the number of problems it lists', () => {
    const input = json(good()) as any;
    input.program.args = Array.from({ length: 300 }, (_, i) => i);
    const problems = problemsOf(() => parseJobGraph(input));
    expect(problems).toHaveLength(JOB_GRAPH_LIMITS.maxReportedProblems + 1);
    expect(problems.at(-1)).toBe('…and 200 more problems');
  });
});
