// The JobGraph's shape as a valibot schema: parseJobGraph decodes untrusted JSON with it, naming each
// bad field by its path (`vertices[2].parallelism must be an integer >= 1, found "x"`), and its output
// type is checked against the JobGraph interfaces at compile time. Each field's message is the text
// after its path; formatIssue puts the two together. What is not shape (references between vertices
// and edges, cycles, paths, limits across the graph) is checked by validateJobGraph in validate.ts.
//
// Two parts stay code inside the schema, since valibot's object and record schemas would change what
// they report: the restart strategy (every field not of its type is named, in the order sent, with the
// option key of each bad value; valibot's strictObject stops at the first unknown field) and the resource
// profiles (a group may be named '__proto__'; valibot's record leaves such keys out).
import * as v from 'valibot';
import { JobId } from '../core/ids.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import {
  DistributionPattern,
  KeyedEmit,
  Partitioner,
  PartitionType,
  RESTART_STRATEGY_TYPES,
  WriteMode,
  type JobEdge,
  type JobGraph,
  type JobVertex,
  type OperatorKind,
  type OperatorSpec,
  type RestartStrategySpec,
  type RestartStrategyType,
  type SavepointRestoreSettings,
} from './jobgraph.js';
import { invalidJobGraph, JOB_GRAPH_LIMITS } from './limits.js';
import { CHECKPOINTING_MODES, EXTERNALIZED_CHECKPOINT_RETENTIONS, MIN_CHECKPOINT_INTERVAL_MS, type CheckpointingSettings } from './checkpointing.js';
import type { WindowAssignerSpec, WindowTriggerSpec } from './window-spec.js';
import { TWO_INPUT_OPERATOR_KINDS } from './two-input-operator-specs.js';

/** Vertex, edge and operator ids end up in partition ids and file names: letters, digits, '_' and '-'. */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
const SHA256_PATTERN = /^[0-9a-f]{64}$/;

export const OPERATOR_KINDS: readonly OperatorKind[] = [
  'source.sequence',
  'source.textFile',
  'source.connector',
  'source.collection',
  'source.generate',
  'map',
  'flatMap',
  'filter',
  'process',
  'keyed.process',
  'timestampsAndWatermarks',
  'sink.textFile',
  'sink.collect',
  'sink.connector',
  'keyed.reduce',
  'keyed.sum',
  'keyed.aggregate',
  'keyed.min',
  'keyed.max',
  'keyed.minBy',
  'keyed.maxBy',
  'keyed.window',
  ...TWO_INPUT_OPERATOR_KINDS,
];

/** A value as a message shows it: short, and never "null" for a number JSON.parse made Infinity. */
export const describe = (value: unknown): string => {
  if (value === undefined) return 'nothing';
  // JSON.stringify would say "null" for these: JSON.parse turns 1e999 into Infinity.
  if (typeof value === 'number' && !Number.isFinite(value)) return Number.isNaN(value) ? 'NaN' : `a number too large (${value})`;
  if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) return `an integer too large to hold exactly (${value})`;
  if (Array.isArray(value)) return `an array`;
  if (value !== null && typeof value === 'object') return 'an object';
  const s = JSON.stringify(value);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
};

// ---- field schemas: each message is what follows the field's path --------------------------------

type Message = (issue: v.BaseIssue<unknown>) => string;
const found =
  (expected: string): Message =>
  (issue) =>
    `${expected}, found ${describe(issue.input)}`;
const isPlainObject = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);

const text = () =>
  v.pipe(
    v.string(found('must be a string')),
    v.maxLength(
      JOB_GRAPH_LIMITS.maxStringLength,
      (issue) => `is ${(issue.input as string).length} characters long, the limit is ${JOB_GRAPH_LIMITS.maxStringLength}`,
    ),
  );
const nonEmptyText = () =>
  v.pipe(
    text(),
    v.nonEmpty(() => 'must be a non-empty string, found ""'),
  );
const matching = (pattern: RegExp, hint: string) => v.pipe(text(), v.regex(pattern, found(`must be ${hint}`)));
const id = () => matching(ID_PATTERN, "1-128 letters, digits, '_' or '-'");
const integer = (min: number) => {
  const m = found(`must be an integer >= ${min}`);
  return v.pipe(v.number(m), v.safeInteger(m), v.minValue(min, m));
};
const safeInteger = () => {
  const m = found('must be a safe integer');
  return v.pipe(v.number(m), v.safeInteger(m));
};
const positiveNumber = () => {
  const m = found('must be a finite number > 0');
  return v.pipe(v.number(m), v.finite(m), v.gtValue(0, m));
};
const oneOf = <const T extends readonly string[]>(allowed: T) => v.picklist(allowed, found(`must be one of ${allowed.map((a) => `'${a}'`).join(', ')}`));

/** An array of at most `max` entries, each `item`: an oversized array is refused before its entries are read. */
const arrayOf = <T extends v.GenericSchema>(item: T, max: number) =>
  v.pipe(
    v.array(v.unknown(), found('must be an array')),
    v.maxLength(max, (issue) => `has ${(issue.input as unknown[]).length} entries, the limit is ${max}`),
    v.array(item),
  );

/**
 * An object with these fields (others are dropped). A missing field is reported as its own schema reports
 * `undefined` ("must be a string, found nothing"); an array is not an object here.
 */
const object = <E extends v.ObjectEntries>(entries: E) =>
  v.pipe(
    v.custom<Record<string, unknown>>(isPlainObject, found('must be an object')),
    v.object(entries, (issue) => {
      const key = issue.expected?.startsWith('"') === true ? (JSON.parse(issue.expected) as string) : undefined;
      const field = key === undefined ? undefined : entries[key];
      return (field === undefined ? undefined : v.safeParse(field, undefined, PARSE_CONFIG).issues?.[0]?.message) ?? found('must be an object')(issue);
    }),
  );

/** Every problem is listed, one per field: a field's pipe stops at its first. */
const PARSE_CONFIG = { abortPipeEarly: true } as const;

// ---- the JobGraph -----------------------------------------------------------------------------------

const FunctionRefSchema = object({ export: nonEmptyText(), operatorId: id(), role: v.optional(id()) });

/** A keyed min/max/sum's field: a property name or a tuple index; minBy and maxBy need one. */
const keyField = (kind: OperatorKind) => {
  const m: Message = (issue) =>
    issue.input === undefined && (kind === 'keyed.minBy' || kind === 'keyed.maxBy')
      ? `is needed by ${kind}: the property name or tuple index whose value picks the record`
      : `must be a property name (a string) or a tuple index (an integer >= 0), found ${describe(issue.input)}`;
  return v.union([text(), v.pipe(v.number(m), v.safeInteger(m), v.minValue(0, m))], m);
};

/** A window assigner's settings: sizes, slides, gaps in ms > 0, offsets in ms. */
const timeDomain = () => oneOf(['event-time', 'processing-time'] as const);
/** Reads an object by the schema its `type` names; an unknown type is named with the types allowed. */
const byType = <S extends Record<string, v.GenericSchema>>(schemas: S) => {
  const types = Object.keys(schemas);
  const unknownType = object({ type: oneOf(types as [string, ...string[]]) });
  return v.lazy((input) => {
    const type = isPlainObject(input) ? input['type'] : undefined;
    return typeof type === 'string' && Object.hasOwn(schemas, type) ? schemas[type]! : unknownType;
  }) as unknown as v.GenericSchema<unknown, v.InferOutput<S[keyof S]>>;
};
const WindowAssignerSchema = byType({
  tumbling: object({ type: v.literal('tumbling'), timeDomain: timeDomain(), size: integer(1), offset: safeInteger() }),
  sliding: object({ type: v.literal('sliding'), timeDomain: timeDomain(), size: integer(1), slide: integer(1), offset: safeInteger() }),
  session: object({ type: v.literal('session'), timeDomain: timeDomain(), gap: integer(1) }),
}) satisfies v.GenericSchema<unknown, WindowAssignerSpec>;
const WindowTriggerSchema = byType({
  'event-time': object({ type: v.literal('event-time') }),
  'processing-time': object({ type: v.literal('processing-time') }),
  count: object({ type: v.literal('count'), count: integer(1) }),
}) satisfies v.GenericSchema<unknown, WindowTriggerSpec>;

const operator = <K extends OperatorKind, E extends v.ObjectEntries>(kind: K, entries: E) =>
  object({ kind: v.literal(kind), id: id(), name: nonEmptyText(), uid: v.optional(nonEmptyText()), ...entries });

/** Keyed operators carry `preAggregate` only when it is true. */
const keyed = <K extends OperatorKind, E extends v.ObjectEntries>(kind: K, entries: E) =>
  v.pipe(
    operator(kind, {
      key: FunctionRefSchema,
      emit: oneOf(Object.values(KeyedEmit)),
      preAggregate: v.optional(v.boolean(found('must be true or false'))),
      ...entries,
    }),
    v.transform(({ preAggregate, ...op }) => (preAggregate === true ? { ...op, preAggregate } : op)),
  );

const OPERATOR_SCHEMAS = {
  'source.sequence': operator('source.sequence', { from: safeInteger(), to: safeInteger() }),
  'source.textFile': v.pipe(
    operator('source.textFile', { path: nonEmptyText(), splitSizeBytes: integer(1), monitorIntervalMs: v.optional(integer(1)) }),
    v.transform(({ monitorIntervalMs, ...op }) => (monitorIntervalMs !== undefined ? { ...op, monitorIntervalMs } : op)),
  ),
  'source.connector': operator('source.connector', {
    connector: id(),
    config: v.custom<Readonly<Record<string, unknown>>>(isPlainObject, found('must be an object')),
    bounded: v.boolean(found('must be true or false')),
  }),
  'source.collection': operator('source.collection', { fn: FunctionRefSchema }),
  'source.generate': operator('source.generate', { fn: FunctionRefSchema, count: v.optional(integer(0)), ratePerSecond: v.optional(positiveNumber()) }),
  map: operator('map', { fn: FunctionRefSchema }),
  flatMap: operator('flatMap', { fn: FunctionRefSchema }),
  filter: operator('filter', { fn: FunctionRefSchema }),
  process: operator('process', { fn: FunctionRefSchema }),
  'keyed.process': operator('keyed.process', { key: FunctionRefSchema, fn: FunctionRefSchema }),
  timestampsAndWatermarks: operator('timestampsAndWatermarks', { strategy: FunctionRefSchema, watermarkIntervalMs: integer(0) }),
  // Graphs stored before write modes existed carry none: they get the safe default.
  'sink.textFile': operator('sink.textFile', {
    path: nonEmptyText(),
    writeMode: v.optional(oneOf(Object.values(WriteMode)), WriteMode.NO_OVERWRITE),
    rolling: v.optional(
      object({ rolloverIntervalMs: integer(1), inactivityIntervalMs: integer(1), maxPartSizeBytes: integer(1), checkIntervalMs: integer(1) }),
    ),
    encoder: v.optional(FunctionRefSchema),
  }),
  'sink.collect': operator('sink.collect', { maxRecords: integer(0) }),
  'sink.connector': operator('sink.connector', {
    connector: id(),
    config: v.custom<Readonly<Record<string, unknown>>>(isPlainObject, found('must be an object')),
    fns: arrayOf(FunctionRefSchema, 16),
  }),
  'keyed.reduce': keyed('keyed.reduce', { fn: FunctionRefSchema }),
  'keyed.sum': keyed('keyed.sum', { field: v.optional(keyField('keyed.sum')), selector: v.optional(FunctionRefSchema) }),
  'keyed.aggregate': keyed('keyed.aggregate', {
    createAccumulator: FunctionRefSchema,
    add: FunctionRefSchema,
    getResult: FunctionRefSchema,
    merge: v.optional(FunctionRefSchema),
  }),
  'keyed.min': keyed('keyed.min', { field: v.optional(keyField('keyed.min')) }),
  'keyed.max': keyed('keyed.max', { field: v.optional(keyField('keyed.max')) }),
  'keyed.minBy': keyed('keyed.minBy', { field: keyField('keyed.minBy') }),
  'keyed.maxBy': keyed('keyed.maxBy', { field: keyField('keyed.maxBy') }),
  'keyed.window': v.pipe(
    operator('keyed.window', {
      key: FunctionRefSchema,
      window: WindowAssignerSchema,
      trigger: WindowTriggerSchema,
      allowedLateness: integer(0),
      lateDataTag: v.optional(nonEmptyText()),
      windowFunction: oneOf(['reduce', 'aggregate', 'process'] as const),
      reduce: v.optional(FunctionRefSchema),
      createAccumulator: v.optional(FunctionRefSchema),
      add: v.optional(FunctionRefSchema),
      getResult: v.optional(FunctionRefSchema),
      merge: v.optional(FunctionRefSchema),
      process: v.optional(FunctionRefSchema),
      preAggregate: v.optional(v.boolean(found('must be true or false'))),
    }),
    v.transform(({ preAggregate, ...op }) => (preAggregate === true ? { ...op, preAggregate } : op)),
  ),
  'co.map': operator('co.map', { fn: FunctionRefSchema }),
  'co.flatMap': operator('co.flatMap', { fn: FunctionRefSchema }),
  'co.process': operator('co.process', { fn: FunctionRefSchema }),
  'keyed.coProcess': operator('keyed.coProcess', { key: FunctionRefSchema, key2: FunctionRefSchema, fn: FunctionRefSchema }),
  'keyed.intervalJoin': operator('keyed.intervalJoin', {
    key: FunctionRefSchema,
    key2: FunctionRefSchema,
    fn: FunctionRefSchema,
    lowerMs: safeInteger(),
    upperMs: safeInteger(),
    lowerBoundExclusive: v.boolean(found('must be true or false')),
    upperBoundExclusive: v.boolean(found('must be true or false')),
  }),
  'keyed.windowJoin': operator('keyed.windowJoin', {
    key: FunctionRefSchema,
    key2: FunctionRefSchema,
    fn: FunctionRefSchema,
    assigner: FunctionRefSchema,
    mode: oneOf(['join', 'coGroup'] as const),
    window: object({ sizeMs: integer(1), slideMs: v.optional(integer(1)), offsetMs: safeInteger() }),
  }),
  'broadcast.process': operator('broadcast.process', { fn: FunctionRefSchema, broadcastStates: arrayOf(nonEmptyText(), 64) }),
  'keyed.broadcastProcess': operator('keyed.broadcastProcess', { key: FunctionRefSchema, fn: FunctionRefSchema, broadcastStates: arrayOf(nonEmptyText(), 64) }),
} satisfies { readonly [K in OperatorKind]: v.GenericSchema<unknown, OperatorSpec & { readonly kind: K }> };

/** An operator of an unknown kind: its kind is named, and its id and name checked all the same (it never passes). */
const UnknownOperatorSchema = object({ kind: oneOf(OPERATOR_KINDS), id: id(), name: nonEmptyText() }) as unknown as v.GenericSchema<unknown, OperatorSpec>;

/** Each operator is read by the schema of its kind. */
const OperatorSchema = v.lazy((input): v.GenericSchema<unknown, OperatorSpec> => {
  const kind = isPlainObject(input) ? input['kind'] : undefined;
  return typeof kind === 'string' && Object.hasOwn(OPERATOR_SCHEMAS, kind) ? OPERATOR_SCHEMAS[kind as OperatorKind] : UnknownOperatorSchema;
});

const VertexSchema = object({
  id: id(),
  name: nonEmptyText(),
  parallelism: integer(1),
  maxParallelism: integer(1),
  slotSharingGroup: nonEmptyText(),
  operators: arrayOf(OperatorSchema, JOB_GRAPH_LIMITS.maxOperatorsPerVertex),
  chainInputs: v.optional(arrayOf(integer(-1), JOB_GRAPH_LIMITS.maxOperatorsPerVertex)),
}) satisfies v.GenericSchema<unknown, JobVertex>;

const EdgeSchema = object({
  id: id(),
  source: nonEmptyText(),
  target: nonEmptyText(),
  distribution: oneOf(Object.values(DistributionPattern)),
  partitioner: oneOf(Object.values(Partitioner)),
  partitionType: oneOf(Object.values(PartitionType)),
  keySelector: v.optional(FunctionRefSchema),
  sideOutputTag: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(256))),
  targetInput: v.optional(v.picklist([0, 1])),
  sourceOperator: v.optional(integer(0)),
}) satisfies v.GenericSchema<unknown, JobEdge>;

/** read → the values the client's builder got: any JSON, bounded in size as a whole. */
const BuilderReadsSchema = v.pipe(
  v.custom<Record<string, unknown>>(isPlainObject, found('must be an object')),
  v.check(
    (reads) => Buffer.byteLength(JSON.stringify(reads)) <= JOB_GRAPH_LIMITS.maxBuilderReadsBytes,
    (issue) => `is ${Buffer.byteLength(JSON.stringify(issue.input))} bytes as JSON, the limit is ${JOB_GRAPH_LIMITS.maxBuilderReadsBytes}`,
  ),
  v.check(
    (reads) => Object.values(reads).every((values) => Array.isArray(values)),
    (issue) => {
      const [read, values] = Object.entries(issue.input as Record<string, unknown>).find(([, vs]) => !Array.isArray(vs))!;
      return `['${read.slice(0, 100)}'] must be an array of the values read, found ${describe(values)}`;
    },
  ),
  v.transform((reads) => reads as Record<string, unknown[]>),
);

const ProgramSchema = object({
  export: nonEmptyText(),
  args: arrayOf(text(), JOB_GRAPH_LIMITS.maxArgs),
  builderReads: v.optional(BuilderReadsSchema),
  planFingerprint: v.optional(matching(/^[0-9a-f]{32}$/, '32 lowercase hex digits')),
});

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

/**
 * A job's restart strategy: its type and the fields of that type only, each named as the option it
 * stands for (`restart-strategy.fixed-delay.attempts`) when it is out of range.
 */
const RestartStrategySchema = v.pipe(
  v.custom<Record<string, unknown>>(isPlainObject, found('must be an object')),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const o = dataset.value;
    const typed = v.safeParse(oneOf(RESTART_STRATEGY_TYPES), o['type'], PARSE_CONFIG);
    if (!typed.success) {
      addIssue({ message: `.type ${typed.issues[0].message}` });
      return NEVER;
    }
    const type = typed.output;
    const fields = RESTART_STRATEGY_FIELDS[type];
    const out: Record<string, unknown> = { type };
    let ok = true;
    for (const key of Object.keys(o)) {
      if (key === 'type') continue;
      const field = fields[key];
      if (field === undefined) {
        addIssue({ message: `.${key} is not a field of restart strategy '${type}' (its fields: ${Object.keys(fields).join(', ') || 'none'})` });
        ok = false;
        continue;
      }
      const n = o[key];
      const [option, min, max, fractional] = field;
      if (typeof n !== 'number' || !Number.isFinite(n) || (!fractional && !Number.isSafeInteger(n)) || n < min || (max !== undefined && n > max)) {
        addIssue({
          message: `.${key} ('${option}') must be ${fractional ? 'a number' : 'an integer'} >= ${min}${max !== undefined ? ` and <= ${max}` : ''}, found ${describe(n)}`,
        });
        ok = false;
        continue;
      }
      out[key] = n;
    }
    return ok ? (out as RestartStrategySpec) : NEVER;
  }),
);

/** Slot sharing group → { cpu, memoryMiB }: bounded in count, each value in range (checked in validateJobGraph). */
const ResourceProfilesSchema = v.pipe(
  v.custom<Record<string, unknown>>(isPlainObject, found('must be an object')),
  v.check(
    (profiles) => Object.keys(profiles).length <= JOB_GRAPH_LIMITS.maxResourceProfiles,
    (issue) => `has ${Object.keys(issue.input as object).length} entries, the limit is ${JOB_GRAPH_LIMITS.maxResourceProfiles}`,
  ),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const entries = Object.entries(dataset.value);
    const out: [string, ResourceProfile][] = [];
    for (const [group, raw] of entries) {
      const at = `[${JSON.stringify(group)}]`;
      if (group === '') {
        addIssue({ message: `${at} (the group name) must be a non-empty string, found ""` });
        continue;
      }
      if (group.length > JOB_GRAPH_LIMITS.maxStringLength) {
        addIssue({ message: `${at} (the group name) is ${group.length} characters long, the limit is ${JOB_GRAPH_LIMITS.maxStringLength}` });
        continue;
      }
      if (!isPlainObject(raw)) {
        addIssue({ message: `${at} must be an object, found ${describe(raw)}` });
        continue;
      }
      const extra = Object.keys(raw).filter((k) => k !== 'cpu' && k !== 'memoryMiB');
      if (extra.length > 0) addIssue({ message: `${at} has unknown field(s) ${extra.join(', ')}; a profile has cpu and memoryMiB` });
      const cpu = v.safeParse(positiveNumber(), raw['cpu'], PARSE_CONFIG);
      if (!cpu.success) addIssue({ message: `${at}.cpu ${cpu.issues[0].message}` });
      const memoryMiB = v.safeParse(integer(1), raw['memoryMiB'], PARSE_CONFIG);
      if (!memoryMiB.success) addIssue({ message: `${at}.memoryMiB ${memoryMiB.issues[0].message}` });
      if (cpu.success && memoryMiB.success && extra.length === 0) out.push([group, { cpu: cpu.output, memoryMiB: memoryMiB.output }]);
    }
    // fromEntries defines own properties, so a group named '__proto__' stays a group.
    return out.length === entries.length ? (Object.fromEntries(out) as Record<string, ResourceProfile>) : NEVER;
  }),
);

/** A job's checkpointing settings: the interval, and whichever of the other settings the job set. */
const CheckpointingSchema = object({
  intervalMs: integer(MIN_CHECKPOINT_INTERVAL_MS),
  mode: v.optional(oneOf(CHECKPOINTING_MODES)),
  timeoutMs: v.optional(integer(1)),
  minPauseMs: v.optional(integer(0)),
  tolerableFailures: v.optional(integer(0)),
  alignedCheckpointTimeoutMs: v.optional(integer(0)),
  unaligned: v.optional(v.boolean(found('must be true or false'))),
  externalizedRetention: v.optional(oneOf(EXTERNALIZED_CHECKPOINT_RETENTIONS)),
}) satisfies v.GenericSchema<unknown, CheckpointingSettings>;

/** `floe run --from-savepoint`: the savepoint's folder or `_metadata` URI, and whether state of removed operators may be skipped. */
const SavepointRestoreSchema = object({
  path: nonEmptyText(),
  allowNonRestoredState: v.boolean(found('must be true or false')),
}) satisfies v.GenericSchema<unknown, SavepointRestoreSettings>;

const JobGraphSchema = object({
  jobId: v.custom<JobId>(JobId.isValid, found("must be 1-64 letters, digits, '_' or '-'")),
  name: nonEmptyText(),
  library: object({ sha256: matching(SHA256_PATTERN, '64 lowercase hex digits'), sizeBytes: integer(0) }),
  program: ProgramSchema,
  vertices: arrayOf(VertexSchema, JOB_GRAPH_LIMITS.maxVertices),
  edges: arrayOf(EdgeSchema, JOB_GRAPH_LIMITS.maxEdges),
  restartStrategy: v.optional(RestartStrategySchema),
  resourceProfiles: v.optional(ResourceProfilesSchema),
  checkpointing: v.optional(CheckpointingSchema),
  objectReuse: v.optional(v.boolean(found('must be true or false'))),
  savepointRestore: v.optional(SavepointRestoreSchema),
}) satisfies v.GenericSchema<unknown, JobGraph>;

/** `vertices[2].operators[0].fn.export` from an issue's path; the whole graph is `jobGraph`. */
function formatIssue(issue: v.BaseIssue<unknown>): string {
  let path = '';
  for (const item of issue.path ?? []) {
    const key = (item as { key?: unknown }).key;
    path += typeof key === 'number' ? `[${key}]` : path === '' ? String(key) : `.${String(key)}`;
  }
  if (path === '') path = 'jobGraph';
  // A message that goes on naming the field (`.attempts ('…') must be`, `["g"].cpu must be`) follows the path directly.
  return issue.message.startsWith('.') || issue.message.startsWith('[') ? `${path}${issue.message}` : `${path} ${issue.message}`;
}

/**
 * Decodes an untrusted JobGraph (e.g. a request body). Checks shapes and types only, naming each bad
 * field by its path (`vertices[2].parallelism must be an integer >= 1, found "x"`); unknown fields are
 * dropped. Follow with validateJobGraph for what makes a graph runnable.
 */
export function parseJobGraph(input: unknown): JobGraph {
  const result = v.safeParse(JobGraphSchema, input, PARSE_CONFIG);
  if (result.success) return result.output;
  throw invalidJobGraph(result.issues.map(formatIssue));
}
