// Translates what a job builder recorded into a JobGraph: one vertex per operator (its chain has one
// entry until operator chaining exists), edges by the rules below, paths made absolute.
import { isAbsolute, resolve } from 'node:path';
import type { JobId } from '../core/ids.js';
import type { JobEdge, JobGraph, JobVertex, OperatorSpec } from '../jobgraph/jobgraph.js';
import { validateJobGraph } from '../jobgraph/validate.js';
import type { Transformation } from './datastream.js';
import { InvalidJobDefinitionError, type JobDefinition } from './job-definition.js';
import { runJobBuilder } from './program.js';

export const DEFAULT_SLOT_SHARING_GROUP = 'default';
/** Split size of a text file source that sets none. */
export const DEFAULT_SPLIT_SIZE_BYTES = 1024 * 1024;
/** Records a collect sink keeps when it sets no maxRecords. */
export const DEFAULT_COLLECT_MAX_RECORDS = 10_000;

export interface BuildJobGraphOptions {
  readonly jobId: JobId;
  readonly args: readonly string[];
  /** The library export that holds `definition`. */
  readonly exportName: string;
  readonly library: { readonly sha256: string; readonly sizeBytes: number };
  /** Parallelism of operators that set none, when the builder sets no environment default either. */
  readonly defaultParallelism: number;
  /** Records kept by a collect sink that sets no maxRecords. @default - DEFAULT_COLLECT_MAX_RECORDS */
  readonly collectMaxRecords?: number;
  /** Where relative file paths are resolved. @default - process.cwd() */
  readonly cwd?: string;
}

/**
 * Flink's default number of key groups: 1.5 × parallelism rounded up to a power of two, at least 128
 * and at most 32768.
 */
export function defaultMaxParallelism(parallelism: number): number {
  const wanted = parallelism + Math.floor(parallelism / 2);
  let pow = 1;
  while (pow < wanted) pow *= 2;
  return Math.min(Math.max(pow, 128), 32_768);
}

function operatorOf(t: Transformation, exportName: string, cwd: string, collectMaxRecords: number): OperatorSpec {
  const base = { id: t.id, name: t.name };
  const fn = { export: exportName, operatorId: t.id };
  const absolute = (p: string): string => (isAbsolute(p) ? p : resolve(cwd, p));
  const spec = t.spec;
  switch (spec.kind) {
    case 'source.sequence':
      return { kind: spec.kind, ...base, from: spec.from, to: spec.to };
    case 'source.textFile':
      return { kind: spec.kind, ...base, path: absolute(spec.path), splitSizeBytes: spec.splitSizeBytes ?? DEFAULT_SPLIT_SIZE_BYTES };
    case 'source.collection':
    case 'map':
    case 'flatMap':
    case 'filter':
      return { kind: spec.kind, ...base, fn };
    case 'sink.textFile':
      return { kind: spec.kind, ...base, path: absolute(spec.path) };
    case 'sink.collect':
      return { kind: spec.kind, ...base, maxRecords: spec.maxRecords ?? collectMaxRecords };
    default:
      return spec satisfies never;
  }
}

const isSink = (t: Transformation): boolean => t.spec.kind.startsWith('sink.');

/**
 * Runs the job's builder with `options.args` and returns its JobGraph, validated. Only operators that
 * lead to a sink become vertices (as in Flink, a branch that ends nowhere is not run).
 *
 * Edges: equal parallelism and no partitioner asked for → forward (pointwise); otherwise rebalance over
 * all-to-all. Every partition is pipelined. An operator without a slot sharing group takes its inputs'
 * group when they agree, else 'default'.
 */
export function buildJobGraph(definition: JobDefinition, options: BuildJobGraphOptions): JobGraph {
  const env = runJobBuilder(definition, options.args);
  const all = env.getTransformations();
  const sinks = all.filter(isSink);
  if (sinks.length === 0) {
    throw new InvalidJobDefinitionError(
      `job '${definition.name}' defines no sink, so it would compute nothing: end a stream with .writeAsText(path) or .collect()`,
    );
  }

  const used = new Set<Transformation>();
  const visit = (t: Transformation): void => {
    if (used.has(t)) return;
    used.add(t);
    for (const input of t.inputs) visit(input.from);
  };
  sinks.forEach(visit);

  const cwd = options.cwd ?? process.cwd();
  const collectMaxRecords = options.collectMaxRecords ?? DEFAULT_COLLECT_MAX_RECORDS;
  const envParallelism = env.getParallelism() ?? options.defaultParallelism;
  const parallelismOf = new Map<Transformation, number>();
  const groupOf = new Map<Transformation, string>();
  const vertices: JobVertex[] = [];
  const edges: JobEdge[] = [];

  // Creation order is a topological order: an operator can only take inputs that already exist.
  for (const t of all) {
    if (!used.has(t)) continue;
    const parallelism = t.parallelism ?? envParallelism;
    const inputGroups = new Set(t.inputs.map((i) => groupOf.get(i.from)!));
    const group = t.slotSharingGroup ?? (inputGroups.size === 1 ? [...inputGroups][0]! : DEFAULT_SLOT_SHARING_GROUP);
    parallelismOf.set(t, parallelism);
    groupOf.set(t, group);
    vertices.push({
      id: t.id,
      name: t.name,
      parallelism,
      maxParallelism: defaultMaxParallelism(parallelism),
      slotSharingGroup: group,
      operators: [operatorOf(t, options.exportName, cwd, collectMaxRecords)],
    });
    for (const input of t.inputs) {
      const partitioner = input.partitioner ?? (parallelismOf.get(input.from) === parallelism ? 'forward' : 'rebalance');
      edges.push({
        id: `e-${edges.length + 1}`,
        source: input.from.id,
        target: t.id,
        distribution: partitioner === 'forward' ? 'forward' : 'all-to-all',
        partitioner,
        partitionType: 'pipelined',
      });
    }
  }

  const graph: JobGraph = {
    jobId: options.jobId,
    name: definition.name,
    library: { sha256: options.library.sha256, sizeBytes: options.library.sizeBytes },
    program: { export: options.exportName, args: [...options.args] },
    vertices,
    edges,
  };
  validateJobGraph(graph);
  return graph;
}
