// Translates what a job builder recorded into a JobGraph: operators fused into chains (one vertex per
// chain), edges by the rules below, paths made absolute.
import { isAbsolute, resolve } from 'node:path';
import type { JobId } from '../core/ids.js';
import {
  DEFAULT_ROLLING_POLICY,
  WriteMode,
  type FunctionRef,
  type JobEdge,
  type JobGraph,
  type JobVertex,
  type KeyedEmit,
  type OperatorSpec,
} from '../jobgraph/jobgraph.js';
import { isS3Uri, normalisePath } from '../jobgraph/paths.js';
import { defaultTriggerOf, windowPreAggregationProblem } from '../jobgraph/window-spec.js';
import { validateJobGraph } from '../jobgraph/validate.js';
import type { StreamEnvironment } from './datastream.js';
import type { Transformation } from './transformation.js';
import { InvalidJobDefinitionError } from './errors.js';
import type { JobDefinition } from './job-definition.js';
import { planFingerprint, runRecordedJobBuilder } from './program.js';
import { twoInputOperatorOf } from './two-input-transformations.js';

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

function operatorOf(t: Transformation, exportName: string, cwd: string, collectMaxRecords: number, bounded: boolean): OperatorSpec {
  const base = { id: t.id, name: t.name, ...(t.uid !== undefined ? { uid: t.uid } : {}) };
  const ref = (role?: string): FunctionRef => (role === undefined ? { export: exportName, operatorId: t.id } : { export: exportName, operatorId: t.id, role });
  // Relative paths are resolved against the client's working directory; every path is normalised (no
  // '.', '..', doubled or trailing separators), as validation requires. s3:// URIs (AWS backend) only
  // lose empty segments and a trailing '/'.
  const absolute = (p: string): string => normalisePath(isS3Uri(p) || isAbsolute(p) ? p : resolve(cwd, p));
  const emit: KeyedEmit = bounded ? 'final' : 'updates';
  // Bounded input: the producers fold records per key before the exchange (a combiner), when the
  // operator can merge partial results. Running updates are never pre-aggregated.
  const preAggregate = bounded && (t.spec.kind !== 'keyed.aggregate' || t.spec.merge !== undefined) ? { preAggregate: true } : {};
  const spec = t.spec;
  switch (spec.kind) {
    case 'source.sequence':
      return { kind: spec.kind, ...base, from: spec.from, to: spec.to };
    case 'source.textFile':
      return {
        kind: spec.kind,
        ...base,
        path: absolute(spec.path),
        splitSizeBytes: spec.splitSizeBytes ?? DEFAULT_SPLIT_SIZE_BYTES,
        ...(spec.monitorIntervalMs !== undefined ? { monitorIntervalMs: spec.monitorIntervalMs } : {}),
      };
    case 'source.connector':
      return { kind: spec.kind, ...base, connector: spec.connector, config: spec.config, bounded: spec.bounded };
    case 'source.collection':
    case 'map':
    case 'flatMap':
    case 'filter':
      return { kind: spec.kind, ...base, fn: ref() };
    case 'process':
      return { kind: spec.kind, ...base, fn: ref() };
    case 'keyed.process':
      return { kind: spec.kind, ...base, key: ref('key'), fn: ref() };
    case 'timestampsAndWatermarks':
      return { kind: spec.kind, ...base, strategy: ref(), watermarkIntervalMs: spec.watermarkIntervalMs };
    case 'source.generate':
      return {
        kind: spec.kind,
        ...base,
        fn: ref(),
        ...(spec.count !== undefined ? { count: spec.count } : {}),
        ...(spec.ratePerSecond !== undefined ? { ratePerSecond: spec.ratePerSecond } : {}),
      };
    case 'keyed.reduce':
      return { kind: spec.kind, ...base, key: ref('key'), fn: ref(), emit, ...preAggregate };
    case 'keyed.sum':
      return {
        kind: spec.kind,
        ...base,
        key: ref('key'),
        emit,
        ...(spec.field !== undefined ? { field: spec.field } : {}),
        ...(spec.selector !== undefined ? { selector: ref('selector') } : {}),
        ...preAggregate,
      };
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy':
      return { kind: spec.kind, ...base, key: ref('key'), emit, ...(spec.field !== undefined ? { field: spec.field } : {}), ...preAggregate };
    case 'keyed.aggregate':
      return {
        kind: spec.kind,
        ...base,
        key: ref('key'),
        createAccumulator: ref('createAccumulator'),
        add: ref('add'),
        getResult: ref('getResult'),
        ...(spec.merge !== undefined ? { merge: ref('merge') } : {}),
        emit,
        ...preAggregate,
      };
    case 'keyed.window': {
      const roles = ['reduce', 'createAccumulator', 'add', 'getResult', 'merge', 'process'] as const;
      const window = {
        kind: spec.kind,
        ...base,
        key: ref('key'),
        window: spec.window,
        trigger: spec.trigger ?? defaultTriggerOf(spec.window),
        allowedLateness: spec.allowedLateness,
        ...(spec.lateDataTag !== undefined ? { lateDataTag: spec.lateDataTag } : {}),
        windowFunction: spec.function,
        ...Object.fromEntries(roles.filter((r) => spec[r] !== undefined).map((r) => [r, ref(r)])),
      };
      // The producers fold records per key and pane before the exchange when the window's results do
      // not depend on which elements arrive when (window-combiner.ts).
      return windowPreAggregationProblem(window) === undefined ? { ...window, preAggregate: true } : window;
    }
    case 'sink.textFile':
      if (!bounded && spec.writeMode === WriteMode.OVERWRITE) {
        throw new InvalidJobDefinitionError(
          `sink '${t.name}' writes '${spec.path}' with writeMode 'overwrite', but its input is unbounded: a streaming file sink adds part files to its folder while the job runs and never replaces an earlier output; write to a new or empty folder (writeMode 'no-overwrite')`,
        );
      }
      return {
        kind: spec.kind,
        ...base,
        path: absolute(spec.path),
        writeMode: spec.writeMode ?? WriteMode.NO_OVERWRITE,
        // Unbounded input: parts roll into the target while the job runs (Flink's defaults for writeAsText).
        ...(bounded ? {} : { rolling: spec.rolling ?? DEFAULT_ROLLING_POLICY }),
        ...(spec.encoder !== undefined ? { encoder: ref('encoder') } : {}),
      };
    case 'sink.collect':
      return { kind: spec.kind, ...base, maxRecords: spec.maxRecords ?? collectMaxRecords };
    case 'sink.connector':
      return {
        kind: spec.kind,
        ...base,
        connector: spec.connector,
        config: spec.config,
        fns: Object.keys(spec.fns)
          .sort()
          .map((role) => ref(role)),
      };
    case 'co.map':
    case 'co.flatMap':
    case 'co.process':
    case 'keyed.coProcess':
    case 'keyed.intervalJoin':
    case 'keyed.windowJoin':
    case 'broadcast.process':
    case 'keyed.broadcastProcess':
      return twoInputOperatorOf(spec, base, ref);
    default:
      return spec satisfies never;
  }
}

const isSink = (t: Transformation): boolean => t.spec.kind.startsWith('sink.');
const isSource = (t: Transformation): boolean => t.spec.kind.startsWith('source.');

/** Whether a source ends by itself (an unbounded generator and a monitored folder do not). */
function isBoundedSource(t: Transformation): boolean {
  if (t.spec.kind === 'source.textFile') return t.spec.monitorIntervalMs === undefined;
  if (t.spec.kind === 'source.connector') return t.spec.bounded;
  return t.spec.kind !== 'source.generate' || t.spec.count !== undefined;
}

interface VertexBuilder {
  readonly head: Transformation;
  readonly chain: Transformation[];
  /** Per operator of the chain, the index of the chained operator it reads (-1 for the head). */
  readonly chainInputs: number[];
  /** An operator of the chain feeds more than one chained operator. */
  branching: boolean;
  readonly parallelism: number;
  readonly maxParallelism: number;
  readonly group: string;
}

/**
 * Runs the job's builder with `options.args` and returns its JobGraph, validated. Only operators that
 * lead to a sink become part of it (as in Flink, a branch that ends nowhere is not run).
 *
 * Edges: equal parallelism and no partitioner asked for → forward (pointwise); otherwise rebalance, or
 * the partitioner asked for (hash for keyBy, broadcast), over all-to-all. All-to-all edges take the
 * exchange mode asked for on them, else the environment's default (pipelined unless changed);
 * forward edges are pipelined. An operator without a slot sharing group takes its inputs' group when
 * they agree, else 'default'.
 *
 * Chaining, as in Flink: an operator joins its input's chain (one vertex, one task, records passed by
 * a function call) when chaining is enabled, the edge would be forward, both have the same
 * parallelism and slot sharing group, the operator has that one input and the input has that one
 * consumer, the operator did not startNewChain() or disableChaining(), and the input did not
 * disableChaining(). An input with several consumers chains those that qualify otherwise (Flink chains a
 * fan-out: the chain branches, each branch's records go on by a function call); sinks join only a chain
 * that does not branch. A vertex takes its head operator's id, its max parallelism (keyed operators head
 * their chains), and its operators' names joined by ' -> '.
 */
export function buildJobGraph(definition: JobDefinition, options: BuildJobGraphOptions): JobGraph {
  const { env, reads } = runRecordedJobBuilder(definition, options.args, { kind: 'record' });
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

  const consumers = new Map<Transformation, number>();
  for (const t of all) {
    if (!used.has(t)) continue;
    // Readers of a side output do not count: the main output's one consumer may still join the chain.
    for (const input of t.inputs) if (input.sideOutput === undefined) consumers.set(input.from, (consumers.get(input.from) ?? 0) + 1);
  }

  const cwd = options.cwd ?? process.cwd();
  const collectMaxRecords = options.collectMaxRecords ?? DEFAULT_COLLECT_MAX_RECORDS;
  const envParallelism = env.getParallelism() ?? options.defaultParallelism;
  const defaultExchange = env.getDefaultExchange();
  const parallelismOf = new Map<Transformation, number>();
  const groupOf = new Map<Transformation, string>();
  const boundedOf = new Map<Transformation, boolean>();
  const vertexOf = new Map<Transformation, VertexBuilder>();
  const builders: VertexBuilder[] = [];
  const edges: JobEdge[] = [];
  /** The transformation whose output each edge carries (by edge index). */
  const edgeFrom: Transformation[] = [];

  // Creation order is a topological order: an operator can only take inputs that already exist.
  for (const t of all) {
    if (!used.has(t)) continue;
    const parallelism = t.parallelism ?? envParallelism;
    const maxParallelism = t.maxParallelism ?? env.getMaxParallelism() ?? defaultMaxParallelism(parallelism);
    if (parallelism > maxParallelism) {
      throw new InvalidJobDefinitionError(
        `operator '${t.name}' has parallelism ${parallelism} but max parallelism ${maxParallelism}: a keyed operator cannot run more subtasks than it has key groups; lower its parallelism or raise setMaxParallelism`,
      );
    }
    const inputGroups = new Set(t.inputs.map((i) => groupOf.get(i.from)!));
    const group = t.slotSharingGroup ?? (inputGroups.size === 1 ? [...inputGroups][0]! : DEFAULT_SLOT_SHARING_GROUP);
    parallelismOf.set(t, parallelism);
    groupOf.set(t, group);
    boundedOf.set(t, isSource(t) ? isBoundedSource(t) : t.inputs.every((i) => boundedOf.get(i.from)!));

    const only = t.inputs.length === 1 ? t.inputs[0]! : undefined;
    const fanOut = only !== undefined && consumers.get(only.from)! > 1;
    const chained =
      only !== undefined &&
      env.isChainingEnabled() &&
      only.partitioner === undefined &&
      only.sideOutput === undefined &&
      (only.targetInput ?? 0) === 0 &&
      parallelismOf.get(only.from) === parallelism &&
      groupOf.get(only.from) === group &&
      (fanOut ? !isSink(t) : !isSink(t) || !vertexOf.get(only.from)!.branching) &&
      t.chaining === 'always' &&
      only.from.chaining !== 'never' &&
      !isSink(only.from) &&
      !isSource(t);
    if (chained) {
      const vertex = vertexOf.get(only.from)!;
      vertex.chainInputs.push(vertex.chain.indexOf(only.from));
      if (fanOut) vertex.branching = true;
      vertex.chain.push(t);
      vertexOf.set(t, vertex);
      continue;
    }
    const vertex: VertexBuilder = { head: t, chain: [t], chainInputs: [-1], branching: false, parallelism, maxParallelism, group };
    builders.push(vertex);
    vertexOf.set(t, vertex);
    for (const input of t.inputs) {
      const partitioner = input.partitioner ?? (parallelismOf.get(input.from) === parallelism ? 'forward' : 'rebalance');
      edgeFrom.push(input.from);
      edges.push({
        id: `e-${edges.length + 1}`,
        source: vertexOf.get(input.from)!.head.id,
        target: t.id,
        distribution: partitioner === 'forward' ? 'forward' : 'all-to-all',
        partitioner,
        partitionType: partitioner === 'forward' ? 'pipelined' : (input.exchange ?? defaultExchange),
        ...(partitioner === 'hash' ? { keySelector: { export: options.exportName, operatorId: t.id, role: input.keyRole ?? 'key' } } : {}),
        ...(input.sideOutput !== undefined ? { sideOutputTag: input.sideOutput } : {}),
        ...(input.targetInput !== undefined && input.targetInput !== 0 ? { targetInput: input.targetInput } : {}),
      });
    }
  }

  const vertices: JobVertex[] = builders.map((b) => ({
    id: b.head.id,
    name: b.chain.map((t) => t.name).join(' -> '),
    parallelism: b.parallelism,
    maxParallelism: b.maxParallelism,
    slotSharingGroup: b.group,
    operators: b.chain.map((t) => operatorOf(t, options.exportName, cwd, collectMaxRecords, boundedOf.get(t)!)),
    ...(b.branching ? { chainInputs: b.chainInputs } : {}),
  }));
  // A branching chain's edges name the operator whose output they carry (a side output's, its tag).
  edges.forEach((e, i) => {
    const from = edgeFrom[i]!;
    const b = vertexOf.get(from)!;
    if (b.branching && e.sideOutputTag === undefined) edges[i] = { ...e, sourceOperator: b.chain.indexOf(from) };
  });

  const graph: JobGraph = {
    jobId: options.jobId,
    name: definition.name,
    library: { sha256: options.library.sha256, sizeBytes: options.library.sizeBytes },
    program: {
      export: options.exportName,
      args: [...options.args],
      ...(Object.keys(reads).length > 0 ? { builderReads: reads } : {}),
      planFingerprint: planFingerprint(env),
    },
    vertices,
    edges,
    ...(env.getRestartStrategy() !== undefined ? { restartStrategy: env.getRestartStrategy()! } : {}),
    ...resourceProfilesOf(env, vertices),
    ...(env.getCheckpointConfig().toSettings() !== undefined ? { checkpointing: env.getCheckpointConfig().toSettings()! } : {}),
    ...(env.getConfig().isObjectReuseEnabled() ? { objectReuse: true } : {}),
  };
  validateJobGraph(graph);
  return graph;
}

/** The declared profiles of the groups the vertices use (a group left by every operator needs none). */
function resourceProfilesOf(env: StreamEnvironment, vertices: readonly JobVertex[]): Pick<JobGraph, 'resourceProfiles'> {
  const used = new Set(vertices.map((v) => v.slotSharingGroup));
  const entries = [...env.getResourceProfiles()].filter(([group]) => used.has(group));
  return entries.length === 0 ? {} : { resourceProfiles: Object.fromEntries(entries) };
}
