// Runs a job program (the builder behind a library export) and exposes what it recorded: the client
// translates it into a JobGraph, a task looks up its user functions in it by operator id.
import { StreamEnvironment, type Transformation, type UserFunction } from './datastream.js';
import { InvalidJobDefinitionError, isJobDefinition, type JobDefinition } from './job-definition.js';
import { functionKey } from '../jobgraph/jobgraph.js';

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

/** Runs the builder on a fresh environment and returns the environment with what it recorded. */
export function runJobBuilder(definition: JobDefinition, args: readonly string[]): StreamEnvironment {
  const env = new StreamEnvironment();
  const returned: unknown = definition.build(env, Object.freeze([...args]));
  if (returned !== undefined && typeof (returned as { then?: unknown } | null)?.then === 'function') {
    throw new InvalidJobDefinitionError(
      `the builder of job '${definition.name}' returned a promise: builders must be synchronous, because every task re-runs them to find its functions; do asynchronous work inside the operators`,
    );
  }
  return env;
}

/**
 * The user functions of a transformation by role: '' for its one function, or 'key', 'selector',
 * 'createAccumulator', … for operators with several (the keys of FunctionRef.role).
 */
export function userFunctionsOf(t: Transformation): [role: string, fn: UserFunction][] {
  const spec = t.spec;
  switch (spec.kind) {
    case 'source.collection':
    case 'source.generate':
    case 'map':
    case 'flatMap':
    case 'filter':
      return [['', spec.fn]];
    case 'keyed.reduce':
      return [['key', spec.key], ['', spec.fn]];
    case 'keyed.sum':
      return spec.selector === undefined ? [['key', spec.key]] : [['key', spec.key], ['selector', spec.selector]];
    case 'keyed.aggregate':
      return [
        ['key', spec.key],
        ['createAccumulator', spec.createAccumulator],
        ['add', spec.add],
        ['getResult', spec.getResult],
        ...(spec.merge !== undefined ? [['merge', spec.merge] as [string, UserFunction]] : []),
      ];
    case 'source.sequence':
    case 'source.textFile':
    case 'sink.textFile':
    case 'sink.collect':
      return [];
    default:
      return spec satisfies never;
  }
}

/**
 * Re-runs the builder exported as `exportName` with `args` and returns functionKey(ref) → user function
 * (the operator id, or `<operator id>.<role>` for one of several functions of an operator). The same arguments give the same ids as the client saw, which is
 * how a task finds the closures its FunctionRefs name.
 */
export function resolveUserFunctions(moduleNamespace: Record<string, unknown>, exportName: string, args: readonly string[]): Map<string, Function> {
  const env = runJobBuilder(loadJobDefinition(moduleNamespace, exportName), args);
  const functions = new Map<string, UserFunction>();
  for (const t of env.getTransformations()) {
    for (const [role, fn] of userFunctionsOf(t)) functions.set(functionKey(role === '' ? { operatorId: t.id } : { operatorId: t.id, role }), fn);
  }
  return functions;
}
