// Runs a job program (the builder behind a library export) and exposes what it recorded: the client
// translates it into a JobGraph, a task looks up its user functions in it by operator id.
import { StreamEnvironment } from './datastream.js';
import type { UserFunction } from './functions.js';
import type { Transformation } from './transformation.js';
import { twoInputUserFunctions } from './two-input-transformations.js';
// Adds connect, join, intervalJoin and broadcast(descriptor) to the streams a builder run makes.
import './two-input-streams.js';
import { InvalidJobDefinitionError } from './errors.js';
import { isJobDefinition, type JobDefinition } from './job-definition.js';
import { createHash } from 'node:crypto';
import { functionKey, type JobProgram, type OperatorSpec } from '../jobgraph/jobgraph.js';
import { BuilderReadMismatchError, recordBuilderReads, replayBuilderReads, type BuilderReads } from './builder-reads.js';

/** The job definition exported as `exportName`, or an error naming what the module exports instead. */
export function loadJobDefinition(moduleNamespace: Record<string, unknown>, exportName: string): JobDefinition {
  const value = Object.prototype.hasOwnProperty.call(moduleNamespace, exportName) ? moduleNamespace[exportName] : undefined;
  if (value === undefined) {
    const exported = Object.keys(moduleNamespace).filter((k) => isJobDefinition(moduleNamespace[k]));
    throw new InvalidJobDefinitionError(
      `the job library has no export '${exportName}'; ` +
        (exported.length > 0
          ? `its job definitions are exported as: ${exported.map((e) => `'${e}'`).join(', ')}`
          : `it exports no job definition: export one with \`export default defineJob('name', (env, args) => { ... })\``),
    );
  }
  if (!isJobDefinition(value)) {
    throw new InvalidJobDefinitionError(
      `export '${exportName}' of the job library is not a job definition (found ${value === null ? 'null' : typeof value}): create it with defineJob('name', (env, args) => { ... }) from 'floe'`,
    );
  }
  return value;
}

/**
 * How a builder run meets what it reads beyond its arguments: as it is (`live`), recorded for the tasks
 * (`record`, on the client), or answered from a recording (`replay`, in a task).
 */
export type BuilderReadsMode = { readonly kind: 'live' } | { readonly kind: 'record' } | { readonly kind: 'replay'; readonly reads: BuilderReads };

/** Runs the builder on a fresh environment and returns the environment with what it recorded, and what the builder read. */
export function runJobBuilder(definition: JobDefinition, args: readonly string[], mode: BuilderReadsMode = { kind: 'live' }): StreamEnvironment {
  return runRecordedJobBuilder(definition, args, mode).env;
}

export function runRecordedJobBuilder(
  definition: JobDefinition,
  args: readonly string[],
  mode: BuilderReadsMode,
): { env: StreamEnvironment; reads: BuilderReads } {
  const env = new StreamEnvironment();
  const frozenArgs = Object.freeze([...args]);
  const build = (): unknown => definition.build(env, frozenArgs);
  let returned: unknown;
  let reads: BuilderReads = {};
  switch (mode.kind) {
    case 'live':
      returned = build();
      break;
    case 'record':
      ({ result: returned, reads } = recordBuilderReads(definition.name, build));
      break;
    case 'replay':
      returned = replayBuilderReads(definition.name, mode.reads, build);
      reads = mode.reads;
      break;
    default:
      mode satisfies never;
  }
  if (returned !== undefined && typeof (returned as { then?: unknown } | null)?.then === 'function') {
    throw new InvalidJobDefinitionError(
      `the builder of job '${definition.name}' returned a promise: builders must be synchronous, because every task re-runs them to find its functions; do asynchronous work inside the operators`,
    );
  }
  return { env, reads };
}

/**
 * A hash of the plan a builder made: every operator's id and kind, the source text of each of its
 * functions, and where its inputs come from and how they are partitioned. Names and parallelism are
 * left out: a task takes those from its deployment, never from its own builder run.
 */
export function planFingerprint(env: StreamEnvironment): string {
  const hash = createHash('sha256');
  for (const t of env.getTransformations()) {
    hash.update(`${t.id}|${t.spec.kind}|`);
    for (const [role, fn] of userFunctionsOf(t)) hash.update(`${role}=${createHash('sha256').update(userCodeText(fn)).digest('hex').slice(0, 16)},`);
    hash.update('|');
    for (const input of t.inputs)
      hash.update(
        `${input.from.id}/${input.partitioner ?? ''}/${input.keySelector === undefined ? '' : String(input.keySelector)}/${input.sideOutput ?? ''}/${input.targetInput ?? 0},`,
      );
    hash.update('\n');
  }
  return hash.digest('hex').slice(0, 32);
}

/**
 * The source text a plan hashes of a user function, or of a user object: its class's source (or its own
 * toString), and the source of each method it holds itself.
 */
function userCodeText(fn: unknown): string {
  if (typeof fn === 'function' || fn === null || typeof fn !== 'object') return String(fn);
  const own = Object.entries(fn)
    .filter(([, v]) => typeof v === 'function')
    .map(([k, v]) => `${k}=${String(v)}`);
  const ownToString = Object.getPrototypeOf(fn)?.toString !== Object.prototype.toString;
  return [ownToString ? String(fn) : String((fn as { constructor?: unknown }).constructor), ...own].join('\n');
}

/**
 * The user functions of a transformation by role: '' for its one function, or 'key', 'selector',
 * 'createAccumulator', … for operators with several (the keys of FunctionRef.role).
 */
export function userFunctionsOf(t: Transformation): [role: string, fn: UserFunction][] {
  const spec = t.spec;
  switch (spec.kind) {
    case 'timestampsAndWatermarks':
      // A user object, kept like a function: the task reads its timestamp assigner and generator.
      return [['', spec.strategy as UserFunction]];
    case 'source.collection':
    case 'source.generate':
    case 'map':
    case 'flatMap':
    case 'filter':
      return [['', spec.fn]];
    case 'keyed.reduce':
      return [
        ['key', spec.key],
        ['', spec.fn],
      ];
    // User objects (a process function) are kept as they are, under the role of a function: the task calls their methods.
    case 'process':
      return [['', spec.fn as UserFunction]];
    case 'keyed.process':
      return [
        ['key', spec.key],
        ['', spec.fn as UserFunction],
      ];
    case 'keyed.sum':
      return spec.selector === undefined
        ? [['key', spec.key]]
        : [
            ['key', spec.key],
            ['selector', spec.selector],
          ];
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy':
      return [['key', spec.key]];
    case 'keyed.aggregate':
      return [
        ['key', spec.key],
        ['createAccumulator', spec.createAccumulator],
        ['add', spec.add],
        ['getResult', spec.getResult],
        ...(spec.merge !== undefined ? [['merge', spec.merge] as [string, UserFunction]] : []),
      ];
    case 'sink.connector':
      return Object.keys(spec.fns)
        .sort()
        .map((role) => [role, spec.fns[role]!]);
    case 'sink.textFile':
      return spec.encoder === undefined ? [] : [['encoder', spec.encoder]];
    case 'keyed.window': {
      const roles: [string, UserFunction | undefined][] = [
        ['key', spec.key],
        ['reduce', spec.reduce],
        ['createAccumulator', spec.createAccumulator],
        ['add', spec.add],
        ['getResult', spec.getResult],
        ['merge', spec.merge],
        ['process', spec.process],
      ];
      return roles.filter((r): r is [string, UserFunction] => r[1] !== undefined);
    }
    case 'source.sequence':
    case 'source.textFile':
    case 'source.connector':
    case 'sink.collect':
      return [];
    case 'co.map':
    case 'co.flatMap':
    case 'co.process':
    case 'keyed.coProcess':
    case 'keyed.intervalJoin':
    case 'keyed.windowJoin':
    case 'broadcast.process':
    case 'keyed.broadcastProcess':
      return twoInputUserFunctions(spec);
    default:
      return spec satisfies never;
  }
}

/**
 * Re-runs the builder of `program` and returns functionKey(ref) → user function (the operator id, or
 * `<operator id>.<role>` for one of several functions of an operator): each call makes new functions,
 * so a task attempt shares no closure state with another. The builder's reads are answered with what
 * the client's builder read, and the plan it makes must be the client's: a task whose builder made
 * other operators (checked against `operators`, the task's own, and the plan's fingerprint) fails with
 * a PLAN_MISMATCH error that names the first operator that differs.
 */
export function resolveUserFunctions(
  moduleNamespace: Record<string, unknown>,
  program: JobProgram,
  operators: readonly OperatorSpec[] = [],
): Map<string, Function> {
  const definition = loadJobDefinition(moduleNamespace, program.export);
  const mode: BuilderReadsMode = program.planFingerprint === undefined ? { kind: 'live' } : { kind: 'replay', reads: program.builderReads ?? {} };
  const env = runJobBuilder(definition, program.args, mode);
  if (program.planFingerprint !== undefined) checkPlan(definition.name, env, program.planFingerprint, operators);
  const functions = new Map<string, UserFunction>();
  for (const t of env.getTransformations()) {
    for (const [role, fn] of userFunctionsOf(t)) functions.set(functionKey(role === '' ? { operatorId: t.id } : { operatorId: t.id, role }), fn);
  }
  return functions;
}

function checkPlan(jobName: string, env: StreamEnvironment, expected: string, operators: readonly OperatorSpec[]): void {
  const found = planFingerprint(env);
  if (found === expected) return;
  const made = new Map(env.getTransformations().map((t) => [t.id, t]));
  const advice =
    'the builder must make the same operators, in the same order, with the same functions, wherever it runs: make it depend only on its arguments and on what it reads (environment variables, files, the clock and random numbers are recorded on the client and given back in every task), not on module-level state or the thread it runs on';
  for (const op of operators) {
    const t = made.get(op.id);
    if (t === undefined || t.spec.kind !== op.kind) {
      throw new BuilderReadMismatchError(
        `the builder of job '${jobName}' made another plan in this task than on the client: operator '${op.name}' is a ${op.kind} on the client, ` +
          `${t === undefined ? "and the task's builder made no operator in its place" : `the task's builder made a ${t.spec.kind} ('${t.name}') in its place`}; ${advice}`,
      );
    }
  }
  throw new BuilderReadMismatchError(
    `the builder of job '${jobName}' made another plan in this task than on the client (plan fingerprint ${found}, on the client ${expected}): ` +
      `${operators.length > 0 ? `this task's operators (${operators.map((o) => `'${o.name}'`).join(', ')}) match, an operator elsewhere differs in its kind, functions or inputs` : 'an operator differs in its kind, functions or inputs'}; ${advice}`,
  );
}
