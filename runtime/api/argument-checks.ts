// The checks of what a job's builder passes to the DataStream API: each throws an
// InvalidJobDefinitionError that names the call, what it needs and what it found.
import type { ResourceProfile } from '../core/resource-profile.js';
import type { WriteMode } from '../jobgraph/jobgraph.js';
import { JOB_GRAPH_LIMITS } from '../jobgraph/limits.js';
import { InvalidJobDefinitionError } from './errors.js';
import type { UserFunction } from './functions.js';
import type { ExchangeMode, ExchangeOptions, Transformation } from './transformation.js';

export function checkParallelism(what: string, n: unknown): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) {
    throw new InvalidJobDefinitionError(`${what}.setParallelism(n) needs an integer >= 1, found ${JSON.stringify(n)}`);
  }
  if (n > JOB_GRAPH_LIMITS.maxParallelism) {
    throw new InvalidJobDefinitionError(
      `${what}.setParallelism(n) needs an integer <= ${JOB_GRAPH_LIMITS.maxParallelism} (the most subtasks a vertex may have), found ${n}`,
    );
  }
  return n;
}

export function checkMaxParallelism(what: string, n: unknown): number {
  const max = JOB_GRAPH_LIMITS.maxMaxParallelism;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > max) {
    throw new InvalidJobDefinitionError(
      `${what}.setMaxParallelism(n) needs an integer from 1 to ${max} (the number of key groups keyed state is split into), found ${JSON.stringify(n)}`,
    );
  }
  return n;
}

export function checkName(what: string, name: unknown): string {
  if (typeof name !== 'string' || name.trim() === '') {
    throw new InvalidJobDefinitionError(`${what}.name(name) needs a non-empty string, found ${JSON.stringify(name)}`);
  }
  return name;
}

export function checkGroup(what: string, group: unknown): string {
  if (typeof group !== 'string' || group.trim() === '') {
    throw new InvalidJobDefinitionError(`${what}.slotSharingGroup(group) needs a non-empty string, found ${JSON.stringify(group)}`);
  }
  return group;
}

export function checkProfile(what: string, group: string, profile: unknown): ResourceProfile {
  const p = profile as { cpu?: unknown; memoryMiB?: unknown } | null;
  const cpu = p?.cpu;
  const memoryMiB = p?.memoryMiB;
  if (
    p === null ||
    typeof p !== 'object' ||
    typeof cpu !== 'number' ||
    !Number.isFinite(cpu) ||
    cpu <= 0 ||
    typeof memoryMiB !== 'number' ||
    !Number.isSafeInteger(memoryMiB) ||
    memoryMiB < 1
  ) {
    throw new InvalidJobDefinitionError(
      `${what}.slotSharingGroup('${group}', profile) needs { cpu: <vCPUs > 0>, memoryMiB: <integer MiB> } per slot, found ${JSON.stringify(profile)}`,
    );
  }
  return { cpu, memoryMiB };
}

export function checkFunction(method: string, fn: unknown): UserFunction {
  if (typeof fn !== 'function') {
    throw new InvalidJobDefinitionError(`${method}(fn) needs a function, found ${fn === null ? 'null' : typeof fn}`);
  }
  return fn as UserFunction;
}

/**
 * A user object with method `method` (a process function, a rich function): checked here, called by name
 * in the task (its class comes from the job library's copy of the API, so no instanceof).
 */
export function checkUserObject(call: string, fn: unknown, method: string, example: string): object {
  if (fn === null || typeof fn !== 'object' || typeof (fn as Record<string, unknown>)[method] !== 'function') {
    throw new InvalidJobDefinitionError(`${call} needs an object with a ${method} method (${example}), found ${fn === null ? 'null' : typeof fn}`);
  }
  return fn;
}

export function checkExchange(method: string, options: ExchangeOptions | undefined): ExchangeMode | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object') {
    throw new InvalidJobDefinitionError(
      `${method}(options) needs an object such as { exchange: 'blocking' }, found ${options === null ? 'null' : typeof options}`,
    );
  }
  const mode = options.exchange;
  if (mode !== undefined && mode !== 'pipelined' && mode !== 'blocking') {
    throw new InvalidJobDefinitionError(`${method}({ exchange }) must be 'pipelined' or 'blocking', found ${JSON.stringify(mode)}`);
  }
  return mode;
}

export function checkPath(method: string, path: unknown): string {
  if (typeof path !== 'string' || path === '') {
    throw new InvalidJobDefinitionError(`${method}(path) needs a non-empty file path, found ${JSON.stringify(path)}`);
  }
  // A leading '../' names a folder beside the working directory on purpose; a '..' after a folder name
  // leads out of the folder the path names ('out/../../etc'), which is never what a sink should do.
  const segments = path.replace(/^s3:\/\//, '').split(/[\\/]/);
  const firstName = segments.findIndex((s) => s !== '' && s !== '.' && s !== '..');
  if (firstName !== -1 && segments.some((s, i) => s === '..' && i > firstName)) {
    throw new InvalidJobDefinitionError(
      `${method}('${path}'): the path holds '..' after a folder name, which leads out of the folder it names; write the path you mean without it`,
    );
  }
  return path;
}

/** A keyed aggregation's field: a property name or tuple index; none where the records are the values. */
export function checkField(method: string, field: unknown, optional: boolean, alternatives = ''): string | number | undefined {
  if (field === undefined && optional) return undefined;
  if ((typeof field === 'string' && field !== '') || (typeof field === 'number' && Number.isSafeInteger(field) && field >= 0)) return field;
  throw new InvalidJobDefinitionError(
    `${method}(field) needs a property name, a tuple index >= 0${alternatives}, found ${field === undefined ? 'nothing' : JSON.stringify(field)}`,
  );
}

export const WRITE_MODES: readonly WriteMode[] = ['no-overwrite', 'overwrite'];

export function setOperatorParallelism(t: Transformation, n: unknown): void {
  const p = checkParallelism(`'${t.name}'`, n);
  if (t.nonParallel && p !== 1) {
    throw new InvalidJobDefinitionError(
      `'${t.name}' is a non-parallel operator and runs with parallelism 1, found setParallelism(${p}); use rebalance() after it to spread its records`,
    );
  }
  t.parallelism = p;
}
