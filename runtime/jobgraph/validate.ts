// Decoding and checking of submitted JobGraphs: parseJobGraph turns untrusted JSON into a JobGraph
// (structure), validateJobGraph checks that it can run (semantics). Both report every problem at once.
import { InvalidJobGraphError } from '../core/errors.js';
import { JobId } from '../core/ids.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import {
  DistributionPattern,
  KeyedEmit,
  Partitioner,
  PartitionType,
  WriteMode,
  functionKey,
  functionRefsOf,
  isKeyedOperator,
  isSinkOperator,
  isSourceOperator,
  type FunctionRef,
  type JobEdge,
  type JobGraph,
  type JobVertex,
  type OperatorKind,
  type OperatorSpec,
  RESTART_STRATEGY_TYPES,
  type RestartStrategySpec,
  type RestartStrategyType,
} from './jobgraph.js';
import { isFilesystemRoot, isWithin, pathProblem } from './paths.js';

export const JOB_GRAPH_LIMITS = {
  maxVertices: 1000,
  maxEdges: 10_000,
  maxOperatorsPerVertex: 100,
  /** Largest parallelism of one vertex: Flink's, as a vertex cannot run more subtasks than it has key groups. */
  maxParallelism: 32_768,
  /** Largest maxParallelism (the number of key groups), as in Flink. */
  maxMaxParallelism: 32_768,
  maxArgs: 1000,
  /** What the builder read on the client (program.builderReads), as JSON: it travels with every task deployment. */
  maxBuilderReadsBytes: 262_144,
  maxStringLength: 4096,
  /** Problems listed in one error; the rest are counted. */
  maxReportedProblems: 100,
  /** Slot sharing groups with a resource profile. */
  maxResourceProfiles: 64,
  /** Largest vCPUs of one slot's profile. */
  maxProfileCpu: 64,
  /** Smallest and largest memory of one slot's profile, in MiB. */
  minProfileMemoryMiB: 128,
  maxProfileMemoryMiB: 1_048_576,
} as const;

/** Vertex, edge and operator ids end up in partition ids and file names: letters, digits, '_' and '-'. */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
const SHA256_PATTERN = /^[0-9a-f]{64}$/;

const OPERATOR_KINDS: readonly OperatorKind[] = [
  'source.sequence',
  'source.textFile',
  'source.collection',
  'source.generate',
  'map',
  'flatMap',
  'filter',
  'sink.textFile',
  'sink.collect',
  'keyed.reduce',
  'keyed.sum',
  'keyed.aggregate',
  'keyed.min',
  'keyed.max',
  'keyed.minBy',
  'keyed.maxBy',
];

class Problems {
  readonly list: string[] = [];
  add(message: string): void {
    this.list.push(message);
  }
  throwIfAny(): void {
    if (this.list.length === 0) return;
    const max = JOB_GRAPH_LIMITS.maxReportedProblems;
    const shown = this.list.length > max ? [...this.list.slice(0, max), `…and ${this.list.length - max} more problems`] : this.list;
    throw new InvalidJobGraphError(shown);
  }
}

const describe = (v: unknown): string => {
  if (v === undefined) return 'nothing';
  // JSON.stringify would say "null" for these: JSON.parse turns 1e999 into Infinity.
  if (typeof v === 'number' && !Number.isFinite(v)) return Number.isNaN(v) ? 'NaN' : `a number too large (${v})`;
  if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) return `an integer too large to hold exactly (${v})`;
  if (Array.isArray(v)) return `an array`;
  if (v !== null && typeof v === 'object') return 'an object';
  const s = JSON.stringify(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
};

/** Field readers: each reports `<path> must be …, found …` and returns undefined on a bad value. */
class Reader {
  constructor(private readonly problems: Problems) {}

  problem(message: string): undefined {
    this.problems.add(message);
    return undefined;
  }

  object(v: unknown, path: string): Record<string, unknown> | undefined {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
    this.problems.add(`${path} must be an object, found ${describe(v)}`);
    return undefined;
  }

  array(v: unknown, path: string, maxLength: number): unknown[] | undefined {
    if (!Array.isArray(v)) {
      this.problems.add(`${path} must be an array, found ${describe(v)}`);
      return undefined;
    }
    if (v.length > maxLength) {
      this.problems.add(`${path} has ${v.length} entries, the limit is ${maxLength}`);
      return undefined;
    }
    return v;
  }

  string(v: unknown, path: string, opts: { nonEmpty?: boolean; pattern?: RegExp; patternHint?: string } = {}): string | undefined {
    if (typeof v !== 'string') {
      this.problems.add(`${path} must be a string, found ${describe(v)}`);
      return undefined;
    }
    if (v.length > JOB_GRAPH_LIMITS.maxStringLength) {
      this.problems.add(`${path} is ${v.length} characters long, the limit is ${JOB_GRAPH_LIMITS.maxStringLength}`);
      return undefined;
    }
    if (opts.nonEmpty && v === '') {
      this.problems.add(`${path} must be a non-empty string, found ""`);
      return undefined;
    }
    if (opts.pattern && !opts.pattern.test(v)) {
      this.problems.add(`${path} must be ${opts.patternHint ?? `a string matching ${opts.pattern}`}, found ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  integer(v: unknown, path: string, min: number): number | undefined {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
      this.problems.add(`${path} must be an integer >= ${min}, found ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  positiveNumber(v: unknown, path: string): number | undefined {
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
      this.problems.add(`${path} must be a finite number > 0, found ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  boolean(v: unknown, path: string): boolean | undefined {
    if (typeof v !== 'boolean') {
      this.problems.add(`${path} must be true or false, found ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  safeInteger(v: unknown, path: string): number | undefined {
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
      this.problems.add(`${path} must be a safe integer, found ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  oneOf<T extends string>(v: unknown, path: string, allowed: readonly T[]): T | undefined {
    if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
    this.problems.add(`${path} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, found ${describe(v)}`);
    return undefined;
  }

  id(v: unknown, path: string): string | undefined {
    return this.string(v, path, { pattern: ID_PATTERN, patternHint: "1-128 letters, digits, '_' or '-'" });
  }
}

function parseFunctionRef(r: Reader, v: unknown, path: string): FunctionRef | undefined {
  const o = r.object(v, path);
  if (!o) return undefined;
  const exp = r.string(o['export'], `${path}.export`, { nonEmpty: true });
  const operatorId = r.id(o['operatorId'], `${path}.operatorId`);
  const role = o['role'] === undefined ? undefined : r.id(o['role'], `${path}.role`);
  if (exp === undefined || operatorId === undefined || (o['role'] !== undefined && role === undefined)) return undefined;
  return role === undefined ? { export: exp, operatorId } : { export: exp, operatorId, role };
}

function parseOperator(r: Reader, v: unknown, path: string): OperatorSpec | undefined {
  const o = r.object(v, path);
  if (!o) return undefined;
  const kind = r.oneOf(o['kind'], `${path}.kind`, OPERATOR_KINDS);
  const id = r.id(o['id'], `${path}.id`);
  const name = r.string(o['name'], `${path}.name`, { nonEmpty: true });
  if (kind === undefined) return undefined;
  let op: OperatorSpec | undefined;
  switch (kind) {
    case 'source.sequence': {
      const from = r.safeInteger(o['from'], `${path}.from`);
      const to = r.safeInteger(o['to'], `${path}.to`);
      if (id !== undefined && name !== undefined && from !== undefined && to !== undefined) op = { kind, id, name, from, to };
      break;
    }
    case 'source.textFile': {
      const p = r.string(o['path'], `${path}.path`, { nonEmpty: true });
      const split = r.integer(o['splitSizeBytes'], `${path}.splitSizeBytes`, 1);
      if (id !== undefined && name !== undefined && p !== undefined && split !== undefined) op = { kind, id, name, path: p, splitSizeBytes: split };
      break;
    }
    case 'source.collection':
    case 'map':
    case 'flatMap':
    case 'filter': {
      const fn = parseFunctionRef(r, o['fn'], `${path}.fn`);
      if (id !== undefined && name !== undefined && fn !== undefined) op = { kind, id, name, fn };
      break;
    }
    case 'sink.textFile': {
      const p = r.string(o['path'], `${path}.path`, { nonEmpty: true });
      // Graphs stored before write modes existed carry none: they get the safe default.
      const writeMode = o['writeMode'] === undefined ? WriteMode.NO_OVERWRITE : r.oneOf(o['writeMode'], `${path}.writeMode`, Object.values(WriteMode));
      if (id !== undefined && name !== undefined && p !== undefined && writeMode !== undefined) op = { kind, id, name, path: p, writeMode };
      break;
    }
    case 'sink.collect': {
      const maxRecords = r.integer(o['maxRecords'], `${path}.maxRecords`, 0);
      if (id !== undefined && name !== undefined && maxRecords !== undefined) op = { kind, id, name, maxRecords };
      break;
    }
    case 'source.generate': {
      const fn = parseFunctionRef(r, o['fn'], `${path}.fn`);
      const count = o['count'] === undefined ? undefined : r.integer(o['count'], `${path}.count`, 0);
      const rate = o['ratePerSecond'] === undefined ? undefined : r.positiveNumber(o['ratePerSecond'], `${path}.ratePerSecond`);
      const bad = (o['count'] !== undefined && count === undefined) || (o['ratePerSecond'] !== undefined && rate === undefined);
      if (id !== undefined && name !== undefined && fn !== undefined && !bad) {
        op = { kind, id, name, fn, ...(count !== undefined ? { count } : {}), ...(rate !== undefined ? { ratePerSecond: rate } : {}) };
      }
      break;
    }
    case 'keyed.reduce':
    case 'keyed.sum':
    case 'keyed.aggregate':
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy': {
      const key = parseFunctionRef(r, o['key'], `${path}.key`);
      const emit = r.oneOf(o['emit'], `${path}.emit`, Object.values(KeyedEmit));
      const preAggregate = o['preAggregate'] === undefined ? undefined : r.boolean(o['preAggregate'], `${path}.preAggregate`);
      if (id === undefined || name === undefined || key === undefined || emit === undefined) break;
      if (o['preAggregate'] !== undefined && preAggregate === undefined) break;
      const pre = preAggregate === true ? { preAggregate } : {};
      if (kind === 'keyed.reduce') {
        const fn = parseFunctionRef(r, o['fn'], `${path}.fn`);
        if (fn !== undefined) op = { kind, id, name, key, fn, emit, ...pre };
      } else if (kind === 'keyed.sum' || kind === 'keyed.min' || kind === 'keyed.max' || kind === 'keyed.minBy' || kind === 'keyed.maxBy') {
        const rawField = o['field'];
        let field: string | number | undefined;
        if (typeof rawField === 'string') {
          field = r.string(rawField, `${path}.field`);
          if (field === undefined) break;
        } else if (typeof rawField === 'number' && Number.isSafeInteger(rawField) && rawField >= 0) field = rawField;
        else if (rawField !== undefined) {
          r.problem(`${path}.field must be a property name (a string) or a tuple index (an integer >= 0), found ${describe(rawField)}`);
          break;
        }
        if (kind !== 'keyed.sum') {
          if (field === undefined && (kind === 'keyed.minBy' || kind === 'keyed.maxBy')) {
            r.problem(`${path}.field is needed by ${kind}: the property name or tuple index whose value picks the record`);
            break;
          }
          op = { kind, id, name, key, emit, ...(field !== undefined ? { field } : {}), ...pre };
          break;
        }
        const selector = o['selector'] === undefined ? undefined : parseFunctionRef(r, o['selector'], `${path}.selector`);
        if (o['selector'] !== undefined && selector === undefined) break;
        op = { kind, id, name, key, emit, ...(field !== undefined ? { field } : {}), ...(selector !== undefined ? { selector } : {}), ...pre };
      } else {
        const createAccumulator = parseFunctionRef(r, o['createAccumulator'], `${path}.createAccumulator`);
        const add = parseFunctionRef(r, o['add'], `${path}.add`);
        const getResult = parseFunctionRef(r, o['getResult'], `${path}.getResult`);
        const merge = o['merge'] === undefined ? undefined : parseFunctionRef(r, o['merge'], `${path}.merge`);
        if (createAccumulator !== undefined && add !== undefined && getResult !== undefined && (o['merge'] === undefined || merge !== undefined)) {
          op = { kind, id, name, key, createAccumulator, add, getResult, ...(merge !== undefined ? { merge } : {}), emit, ...pre };
        }
      }
      break;
    }
    default:
      return kind satisfies never;
  }
  return op;
}

function parseVertex(r: Reader, v: unknown, path: string): JobVertex | undefined {
  const o = r.object(v, path);
  if (!o) return undefined;
  const id = r.id(o['id'], `${path}.id`);
  const name = r.string(o['name'], `${path}.name`, { nonEmpty: true });
  const parallelism = r.integer(o['parallelism'], `${path}.parallelism`, 1);
  const maxParallelism = r.integer(o['maxParallelism'], `${path}.maxParallelism`, 1);
  const slotSharingGroup = r.string(o['slotSharingGroup'], `${path}.slotSharingGroup`, { nonEmpty: true });
  const rawOps = r.array(o['operators'], `${path}.operators`, JOB_GRAPH_LIMITS.maxOperatorsPerVertex);
  const operators = rawOps?.map((op, i) => parseOperator(r, op, `${path}.operators[${i}]`));
  if (
    id === undefined || name === undefined || parallelism === undefined || maxParallelism === undefined ||
    slotSharingGroup === undefined || operators === undefined || operators.some((op) => op === undefined)
  ) {
    return undefined;
  }
  return { id, name, parallelism, maxParallelism, slotSharingGroup, operators: operators as OperatorSpec[] };
}

function parseEdge(r: Reader, v: unknown, path: string): JobEdge | undefined {
  const o = r.object(v, path);
  if (!o) return undefined;
  const id = r.id(o['id'], `${path}.id`);
  const source = r.string(o['source'], `${path}.source`, { nonEmpty: true });
  const target = r.string(o['target'], `${path}.target`, { nonEmpty: true });
  const distribution = r.oneOf(o['distribution'], `${path}.distribution`, Object.values(DistributionPattern));
  const partitioner = r.oneOf(o['partitioner'], `${path}.partitioner`, Object.values(Partitioner));
  const partitionType = r.oneOf(o['partitionType'], `${path}.partitionType`, Object.values(PartitionType));
  const keySelector = o['keySelector'] === undefined ? undefined : parseFunctionRef(r, o['keySelector'], `${path}.keySelector`);
  if (id === undefined || source === undefined || target === undefined || distribution === undefined || partitioner === undefined || partitionType === undefined) {
    return undefined;
  }
  if (o['keySelector'] !== undefined && keySelector === undefined) return undefined;
  return { id, source, target, distribution, partitioner, partitionType, ...(keySelector !== undefined ? { keySelector } : {}) };
}

/**
 * Decodes an untrusted JobGraph (e.g. a request body). Checks shapes and types only, naming each bad
 * field by its path (`vertices[2].parallelism must be an integer >= 1, found "x"`); unknown fields are
 * dropped. Follow with validateJobGraph for what makes a graph runnable.
 */
export function parseJobGraph(input: unknown): JobGraph {
  const problems = new Problems();
  const r = new Reader(problems);
  const o = r.object(input, 'jobGraph');
  if (!o) problems.throwIfAny();
  const g = o as Record<string, unknown>;

  const rawJobId = g['jobId'];
  let jobId: JobId | undefined;
  if (JobId.isValid(rawJobId)) jobId = rawJobId;
  else problems.add(`jobId must be 1-64 letters, digits, '_' or '-', found ${describe(rawJobId)}`);
  const name = r.string(g['name'], 'name', { nonEmpty: true });

  let library: JobGraph['library'] | undefined;
  const lib = r.object(g['library'], 'library');
  if (lib) {
    const sha256 = r.string(lib['sha256'], 'library.sha256', { pattern: SHA256_PATTERN, patternHint: '64 lowercase hex digits' });
    const sizeBytes = r.integer(lib['sizeBytes'], 'library.sizeBytes', 0);
    if (sha256 !== undefined && sizeBytes !== undefined) library = { sha256, sizeBytes };
  }

  let program: JobGraph['program'] | undefined;
  const prog = r.object(g['program'], 'program');
  if (prog) {
    const exp = r.string(prog['export'], 'program.export', { nonEmpty: true });
    const rawArgs = r.array(prog['args'], 'program.args', JOB_GRAPH_LIMITS.maxArgs);
    const args = rawArgs?.map((a, i) => r.string(a, `program.args[${i}]`));
    const builderReads = prog['builderReads'] === undefined ? undefined : parseBuilderReads(r, prog['builderReads'], 'program.builderReads');
    const planFingerprint =
      prog['planFingerprint'] === undefined ? undefined : r.string(prog['planFingerprint'], 'program.planFingerprint', { pattern: /^[0-9a-f]{32}$/, patternHint: '32 lowercase hex digits' });
    if (exp !== undefined && args !== undefined && args.every((a) => a !== undefined)) {
      program = { export: exp, args: args as string[], ...(builderReads !== undefined ? { builderReads } : {}), ...(planFingerprint !== undefined ? { planFingerprint } : {}) };
    }
  }

  const rawVertices = r.array(g['vertices'], 'vertices', JOB_GRAPH_LIMITS.maxVertices);
  const vertices = rawVertices?.map((v, i) => parseVertex(r, v, `vertices[${i}]`));
  const rawEdges = r.array(g['edges'], 'edges', JOB_GRAPH_LIMITS.maxEdges);
  const edges = rawEdges?.map((e, i) => parseEdge(r, e, `edges[${i}]`));
  const restartStrategy = g['restartStrategy'] === undefined ? undefined : parseRestartStrategy(r, g['restartStrategy'], 'restartStrategy');
  const resourceProfiles = g['resourceProfiles'] === undefined ? undefined : parseResourceProfiles(r, g['resourceProfiles'], 'resourceProfiles');

  problems.throwIfAny();
  return {
    jobId: jobId!,
    name: name!,
    library: library!,
    program: program!,
    vertices: vertices as JobVertex[],
    edges: edges as JobEdge[],
    ...(restartStrategy !== undefined ? { restartStrategy } : {}),
    ...(resourceProfiles !== undefined ? { resourceProfiles } : {}),
  };
}

/** read → the values the client's builder got: any JSON, bounded in size as a whole. */
function parseBuilderReads(r: Reader, v: unknown, path: string): Record<string, unknown[]> | undefined {
  const o = r.object(v, path);
  if (o === undefined) return undefined;
  const size = Buffer.byteLength(JSON.stringify(o));
  if (size > JOB_GRAPH_LIMITS.maxBuilderReadsBytes) return r.problem(`${path} is ${size} bytes as JSON, the limit is ${JOB_GRAPH_LIMITS.maxBuilderReadsBytes}`);
  for (const [read, values] of Object.entries(o)) {
    if (!Array.isArray(values)) return r.problem(`${path}['${read.slice(0, 100)}'] must be an array of the values read, found ${describe(values)}`);
  }
  return o as Record<string, unknown[]>;
}

/** Slot sharing group → { cpu, memoryMiB }: bounded in count, each value in range (checked in validateJobGraph). */
function parseResourceProfiles(r: Reader, v: unknown, path: string): Record<string, ResourceProfile> | undefined {
  const o = r.object(v, path);
  if (!o) return undefined;
  const entries = Object.entries(o);
  if (entries.length > JOB_GRAPH_LIMITS.maxResourceProfiles) {
    return r.problem(`${path} has ${entries.length} entries, the limit is ${JOB_GRAPH_LIMITS.maxResourceProfiles}`);
  }
  const out: [string, ResourceProfile][] = [];
  for (const [group, raw] of entries) {
    const at = `${path}[${JSON.stringify(group)}]`;
    if (r.string(group, `${at} (the group name)`, { nonEmpty: true }) === undefined) continue;
    const p = r.object(raw, at);
    if (!p) continue;
    const extra = Object.keys(p).filter((k) => k !== 'cpu' && k !== 'memoryMiB');
    if (extra.length > 0) r.problem(`${at} has unknown field(s) ${extra.join(', ')}; a profile has cpu and memoryMiB`);
    const cpu = r.positiveNumber(p['cpu'], `${at}.cpu`);
    const memoryMiB = r.integer(p['memoryMiB'], `${at}.memoryMiB`, 1);
    if (cpu !== undefined && memoryMiB !== undefined && extra.length === 0) out.push([group, { cpu, memoryMiB }]);
  }
  // fromEntries defines own properties, so a group named '__proto__' stays a group.
  return out.length === entries.length ? Object.fromEntries(out) : undefined;
}

/**
 * A job's restart strategy: its type and the fields of that type only, each named as the option it
 * stands for (`restart-strategy.fixed-delay.attempts`) when it is out of range.
 */
function parseRestartStrategy(r: Reader, v: unknown, path: string): RestartStrategySpec | undefined {
  const o = r.object(v, path);
  if (!o) return undefined;
  const type = r.oneOf(o['type'], `${path}.type`, RESTART_STRATEGY_TYPES);
  if (type === undefined) return undefined;
  const fields = RESTART_STRATEGY_FIELDS[type];
  const out: Record<string, unknown> = { type };
  let ok = true;
  for (const key of Object.keys(o)) {
    if (key === 'type') continue;
    const field = fields[key];
    if (field === undefined) {
      r.problem(`${path}.${key} is not a field of restart strategy '${type}' (its fields: ${Object.keys(fields).join(', ') || 'none'})`);
      ok = false;
      continue;
    }
    const n = o[key];
    const [option, min, max, fractional] = field;
    if (typeof n !== 'number' || !Number.isFinite(n) || (!fractional && !Number.isSafeInteger(n)) || n < min || (max !== undefined && n > max)) {
      r.problem(`${path}.${key} ('${option}') must be ${fractional ? 'a number' : 'an integer'} >= ${min}${max !== undefined ? ` and <= ${max}` : ''}, found ${describe(n)}`);
      ok = false;
      continue;
    }
    out[key] = n;
  }
  return ok ? (out as RestartStrategySpec) : undefined;
}

/** Per strategy type: field → [option key, min, max, fractional]. */
const RESTART_STRATEGY_FIELDS: Record<RestartStrategyType, Record<string, readonly [string, number, number | undefined, boolean]>> = {
  none: {},
  'fixed-delay': {
    attempts: ['restart-strategy.fixed-delay.attempts', 0, undefined, false],
    delayMs: ['restart-strategy.fixed-delay.delay', 0, undefined, false],
  },
  'exponential-delay': {
    initialBackoffMs: ['restart-strategy.exponential-delay.initial-backoff', 0, undefined, false],
    maxBackoffMs: ['restart-strategy.exponential-delay.max-backoff', 0, undefined, false],
    backoffMultiplier: ['restart-strategy.exponential-delay.backoff-multiplier', 1, undefined, true],
    jitterFactor: ['restart-strategy.exponential-delay.jitter-factor', 0, 1, true],
    resetBackoffThresholdMs: ['restart-strategy.exponential-delay.reset-backoff-threshold', 1, undefined, false],
    attemptsBeforeResetBackoff: ['restart-strategy.exponential-delay.attempts-before-reset-backoff', 0, undefined, false],
  },
  'failure-rate': {
    maxFailuresPerInterval: ['restart-strategy.failure-rate.max-failures-per-interval', 1, undefined, false],
    failureRateIntervalMs: ['restart-strategy.failure-rate.failure-rate-interval', 1, undefined, false],
    delayMs: ['restart-strategy.failure-rate.delay', 0, undefined, false],
  },
};

/** Source paths and sink targets on S3 (AWS backend): a valid bucket name, then an optional key or prefix. */
const S3_URI = /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[^\0]*)?$/;

/**
 * Checks that a (well-typed) JobGraph can run, throwing one InvalidJobGraphError that lists every
 * problem. With `libraryExports`, also checks that the program and every FunctionRef name an export of
 * the library.
 */
export function validateJobGraph(graph: JobGraph, libraryExports?: readonly string[]): void {
  const problems = new Problems();
  const L = JOB_GRAPH_LIMITS;
  const exportSet = libraryExports === undefined ? undefined : new Set(libraryExports);
  const label = (v: JobVertex, i: number): string => `vertices[${i}] ('${v.name}')`;

  if (graph.vertices.length === 0) problems.add('the graph has no vertices: a job needs at least one source and one sink');
  if (graph.vertices.length > L.maxVertices) problems.add(`the graph has ${graph.vertices.length} vertices, the limit is ${L.maxVertices}`);
  if (graph.edges.length > L.maxEdges) problems.add(`the graph has ${graph.edges.length} edges, the limit is ${L.maxEdges}`);
  if (graph.program.args.length > L.maxArgs) problems.add(`program.args has ${graph.program.args.length} entries, the limit is ${L.maxArgs}`);
  if (exportSet !== undefined && !exportSet.has(graph.program.export)) {
    problems.add(`program.export '${graph.program.export}' is not exported by the library (it exports: ${[...exportSet].map((e) => `'${e}'`).join(', ') || 'nothing'})`);
  }

  const vertexIndex = new Map<string, number>();
  const operatorSeen = new Map<string, string>();
  const sinkPaths = new Map<string, string>();
  const collectSinks: string[] = [];
  // Operator id → its name, so messages about a function name the operator the user wrote.
  const operatorNames = new Map<string, string>();
  for (const v of graph.vertices) for (const op of v.operators) if (!operatorNames.has(op.id)) operatorNames.set(op.id, op.name);
  const operatorOf = (ref: FunctionRef): string => {
    const name = operatorNames.get(ref.operatorId);
    return name === undefined ? `'${functionKey(ref)}' (no operator of the graph has id '${ref.operatorId}')` : `the ${ref.role ?? 'function'} of '${name}'`;
  };
  graph.vertices.forEach((v, i) => {
    const at = label(v, i);
    if (vertexIndex.has(v.id)) problems.add(`${at}: duplicate vertex id '${v.id}' (also vertices[${vertexIndex.get(v.id)}])`);
    else vertexIndex.set(v.id, i);
    if (v.parallelism < 1) problems.add(`${at}.parallelism must be >= 1, found ${v.parallelism}`);
    if (v.parallelism > L.maxParallelism) problems.add(`${at}.parallelism ${v.parallelism} exceeds the limit of ${L.maxParallelism} subtasks per vertex`);
    if (v.maxParallelism > L.maxMaxParallelism) problems.add(`${at}.maxParallelism ${v.maxParallelism} exceeds the limit of ${L.maxMaxParallelism} key groups`);
    if (v.parallelism > v.maxParallelism) problems.add(`${at}.parallelism ${v.parallelism} exceeds its maxParallelism ${v.maxParallelism}`);
    if (v.operators.length === 0) problems.add(`${at}.operators is empty: a vertex runs at least one operator`);
    if (v.operators.length > L.maxOperatorsPerVertex) problems.add(`${at}.operators has ${v.operators.length} entries, the limit is ${L.maxOperatorsPerVertex}`);
    v.operators.forEach((op, j) => {
      const opAt = `${at}.operators[${j}] ('${op.name}')`;
      const prev = operatorSeen.get(op.id);
      if (prev !== undefined) problems.add(`${opAt}: duplicate operator id '${op.id}' (also ${prev})`);
      else operatorSeen.set(op.id, opAt);
      if (isSourceOperator(op) && j > 0) problems.add(`${opAt}: a source (${op.kind}) can only be the first operator of a chain`);
      if (isSinkOperator(op) && j < v.operators.length - 1) problems.add(`${opAt}: a sink (${op.kind}) can only be the last operator of a chain`);
      if (exportSet !== undefined) {
        for (const ref of functionRefsOf(op)) {
          if (!exportSet.has(ref.export)) problems.add(`${opAt}.${ref.role ?? 'fn'}.export '${ref.export}' is not exported by the library`);
        }
      }
      if (isKeyedOperator(op) && j > 0) {
        problems.add(`${opAt}: a keyed operator (${op.kind}) must head its chain, fed by hash edges; found at position ${j}`);
      }
      if ('preAggregate' in op && op.preAggregate === true) {
        if (op.emit !== 'final') problems.add(`${opAt}: preAggregate needs emit 'final' (bounded input), found emit '${op.emit}': running updates are never pre-aggregated`);
        if (op.kind === 'keyed.aggregate' && op.merge === undefined) problems.add(`${opAt}: preAggregate on an aggregate needs its merge function, found none`);
      }
      switch (op.kind) {
        case 'source.sequence':
          if (op.from > op.to) problems.add(`${opAt}: from (${op.from}) must be <= to (${op.to})`);
          break;
        case 'source.textFile': {
          const bad = pathProblem(op.path, `${opAt}.path`, true);
          if (op.path.startsWith('s3://')) {
            if (!S3_URI.test(op.path)) problems.add(`${opAt}.path must be s3://<bucket>/<key or prefix> with a valid bucket name, found '${op.path}'`);
            else if (bad !== undefined) problems.add(bad);
          } else if (bad !== undefined) {
            problems.add(bad.replace('must be absolute (tasks run in other processes)', 'must be absolute (tasks run in other processes) or an s3://<bucket>/<key or prefix> URI (AWS backend)'));
          }
          break;
        }
        case 'source.collection':
          if (v.parallelism !== 1) problems.add(`${at}.parallelism must be 1: its collection source is not parallel, found ${v.parallelism}`);
          break;
        case 'sink.textFile': {
          const bad = pathProblem(op.path, `${opAt}.path`, true);
          if (op.path.startsWith('s3://')) {
            if (!S3_URI.test(op.path)) problems.add(`${opAt}.path must be s3://<bucket>/<prefix> with a valid bucket name, found '${op.path}'`);
            else if (bad !== undefined) problems.add(bad);
          } else if (bad !== undefined) {
            problems.add(bad.replace('must be absolute (tasks run in other processes)', 'must be absolute (tasks run in other processes) or an s3://<bucket>/<prefix> URI (AWS backend)'));
          } else if (isFilesystemRoot(op.path)) {
            problems.add(`${opAt}.path is a filesystem root ('${op.path}'); a text sink writes a folder of its own: name one below it`);
          }
          if (bad === undefined) {
            for (const [other, otherAt] of sinkPaths) {
              if (other === op.path) problems.add(`${opAt}: writes to '${op.path}' like ${otherAt}; give each sink its own path`);
              else if (isWithin(op.path, other) || isWithin(other, op.path)) problems.add(`${opAt}: its target '${op.path}' and the target '${other}' of ${otherAt} lie one inside the other; give each sink a folder of its own`);
            }
            sinkPaths.set(op.path, opAt);
          }
          break;
        }
        case 'sink.collect':
          collectSinks.push(`'${op.name}'`);
          break;
        case 'source.generate':
          if (op.count !== undefined && (!Number.isSafeInteger(op.count) || op.count < 0)) problems.add(`${opAt}.count must be an integer >= 0, found ${op.count}`);
          if (op.ratePerSecond !== undefined && !(op.ratePerSecond > 0)) problems.add(`${opAt}.ratePerSecond must be > 0, found ${op.ratePerSecond}`);
          break;
        case 'keyed.sum':
          if (op.field !== undefined && op.selector !== undefined) problems.add(`${opAt}: sum takes a field or a selector, not both`);
          break;
        case 'map':
        case 'flatMap':
        case 'filter':
        case 'keyed.reduce':
        case 'keyed.aggregate':
        case 'keyed.min':
        case 'keyed.max':
        case 'keyed.minBy':
        case 'keyed.maxBy':
          break;
        default:
          op satisfies never;
      }
    });
  });
  if (collectSinks.length > 1) {
    problems.add(`the graph has ${collectSinks.length} collect sinks (${collectSinks.join(', ')}), at most one is allowed (its records are the job's result); collect one stream, or union the streams first`);
  }

  const edgeIds = new Set<string>();
  const inDegree = new Map<string, number>();
  const outEdges = new Map<string, string[]>();
  // A vertex by its name (what the job API makes of its operators' names), its id when it has none.
  const vertexName = (id: string): string => {
    const i = vertexIndex.get(id);
    return i === undefined ? `'${id}'` : `'${graph.vertices[i]!.name}'`;
  };
  graph.edges.forEach((e, i) => {
    const at = `edges[${i}] (from ${vertexName(e.source)} to ${vertexName(e.target)})`;
    if (edgeIds.has(e.id)) problems.add(`${at}: duplicate edge id '${e.id}'`);
    edgeIds.add(e.id);
    const si = vertexIndex.get(e.source);
    const ti = vertexIndex.get(e.target);
    if (si === undefined) problems.add(`${at}.source '${e.source}' is not a vertex of the graph`);
    if (ti === undefined) problems.add(`${at}.target '${e.target}' is not a vertex of the graph`);
    if (e.source === e.target) problems.add(`${at} connects a vertex to itself: a job graph must be acyclic`);
    // Two edges between the same two vertices are allowed: each carries every record, which is what a
    // stream unioned with itself means (each record once per occurrence).
    if ((e.distribution === 'forward') !== (e.partitioner === 'forward')) {
      problems.add(`${at}: distribution '${e.distribution}' does not go with partitioner '${e.partitioner}' (a forward partitioner needs a forward distribution and the other way round)`);
    }
    if (si === undefined || ti === undefined) return;
    const s = graph.vertices[si]!;
    const t = graph.vertices[ti]!;
    if (e.partitioner === 'hash' && e.keySelector === undefined) {
      problems.add(`${at}: a hash edge needs a keySelector (the function that gives each record its key)`);
    }
    if (e.partitioner !== 'hash' && e.keySelector !== undefined) {
      problems.add(`${at}: only hash edges carry a keySelector, found one on a '${e.partitioner}' edge`);
    }
    const head = t.operators[0];
    if (head !== undefined && isKeyedOperator(head) && 'key' in head) {
      if (e.partitioner !== 'hash') {
        problems.add(`${at}: '${t.name}' starts with keyed operator '${head.name}' (${head.kind}), which must be fed by hash edges, found a '${e.partitioner}' edge; use keyBy(...)`);
      } else if (e.keySelector !== undefined && (e.keySelector.export !== head.key.export || functionKey(e.keySelector) !== functionKey(head.key))) {
        problems.add(`${at}: routes records by ${operatorOf(e.keySelector)} but '${head.name}' keys them by ${operatorOf(head.key)}; both sides must use the same key selector`);
      }
    }
    if (e.distribution === 'forward' && s.parallelism !== t.parallelism) {
      problems.add(`${at}: a forward edge needs equal parallelism, but '${s.name}' has ${s.parallelism} and '${t.name}' has ${t.parallelism}; use rebalance (all-to-all)`);
    }
    const last = s.operators[s.operators.length - 1];
    if (last !== undefined && isSinkOperator(last)) problems.add(`${at}: vertex '${s.name}' ends in a sink and cannot have outputs`);
    inDegree.set(e.target, (inDegree.get(e.target) ?? 0) + 1);
    const outs = outEdges.get(e.source) ?? [];
    outs.push(e.target);
    outEdges.set(e.source, outs);
  });

  graph.vertices.forEach((v, i) => {
    const first = v.operators[0];
    if (first === undefined) return;
    const inputs = inDegree.get(v.id) ?? 0;
    if (isSourceOperator(first) && inputs > 0) problems.add(`${label(v, i)} starts with a source (${first.kind}) but has ${inputs} input edge(s)`);
    if (!isSourceOperator(first) && inputs === 0) problems.add(`${label(v, i)} starts with '${first.name}' (${first.kind}), not a source, and has no input edges`);
  });

  // Kahn's algorithm over the vertices whose ids are unique; what remains lies on or behind a cycle.
  if (vertexIndex.size > 0) {
    const remaining = new Map<string, number>();
    for (const id of vertexIndex.keys()) remaining.set(id, 0);
    for (const e of graph.edges) {
      if (remaining.has(e.source) && remaining.has(e.target)) remaining.set(e.target, remaining.get(e.target)! + 1);
    }
    const ready = [...remaining].filter(([, d]) => d === 0).map(([id]) => id);
    while (ready.length > 0) {
      const id = ready.pop()!;
      remaining.delete(id);
      for (const target of outEdges.get(id) ?? []) {
        const d = remaining.get(target);
        if (d === undefined) continue;
        remaining.set(target, d - 1);
        if (d - 1 === 0) ready.push(target);
      }
    }
    // Also drop what merely lies behind a cycle, so the message names the cycle's own vertices.
    for (let trimmed = true; trimmed; ) {
      trimmed = false;
      for (const id of remaining.keys()) {
        if (!(outEdges.get(id) ?? []).some((t) => remaining.has(t))) {
          remaining.delete(id);
          trimmed = true;
        }
      }
    }
    if (remaining.size > 0) {
      problems.add(`the graph has a cycle through vertices ${[...remaining.keys()].map(vertexName).join(', ')}: a job graph must be acyclic`);
    }
  }

  checkResourceProfiles(graph, problems);

  problems.throwIfAny();
}

function checkResourceProfiles(graph: JobGraph, problems: Problems): void {
  if (graph.resourceProfiles === undefined) return;
  const L = JOB_GRAPH_LIMITS;
  const entries = Object.entries(graph.resourceProfiles);
  if (entries.length > L.maxResourceProfiles) problems.add(`resourceProfiles has ${entries.length} entries, the limit is ${L.maxResourceProfiles}`);
  const groups = new Set(graph.vertices.map((v) => v.slotSharingGroup));
  for (const [group, p] of entries) {
    const at = `resourceProfiles[${JSON.stringify(group)}]`;
    if (!groups.has(group)) problems.add(`${at}: no vertex is in slot sharing group '${group}' (groups: ${[...groups].map((g) => `'${g}'`).join(', ')})`);
    if (!(Number.isFinite(p.cpu) && p.cpu > 0 && p.cpu <= L.maxProfileCpu)) problems.add(`${at}.cpu must be > 0 and <= ${L.maxProfileCpu} vCPUs per slot, found ${p.cpu}`);
    if (!(Number.isSafeInteger(p.memoryMiB) && p.memoryMiB >= L.minProfileMemoryMiB && p.memoryMiB <= L.maxProfileMemoryMiB)) {
      problems.add(`${at}.memoryMiB must be an integer from ${L.minProfileMemoryMiB} to ${L.maxProfileMemoryMiB} MiB per slot, found ${p.memoryMiB}`);
    }
  }
}
