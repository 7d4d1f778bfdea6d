// The JobDefinition value a job file exports. A plain, marked object (not a class instance) so a definition
// made by the copy of the API bundled into a user library is recognised by the runtime's own copy.
import type { StreamEnvironment } from './datastream.js';
import { InvalidJobDefinitionError } from './errors.js';

/** Builds the job's dataflow on `env`. Runs once on the client and again in every task that runs user code. */
export type JobBuilder = (env: StreamEnvironment, args: readonly string[]) => void;

export interface JobDefinition {
  readonly __floeJob: 1;
  readonly name: string;
  readonly build: JobBuilder;
}

const MAX_JOB_NAME_LENGTH = 200;

/**
 * Defines a job. Export the result from the job file (as its default export, or under a name passed
 * to `floe run --export`). The builder must be synchronous and deterministic: given the same arguments it
 * must create the same operators in the same order, because each task re-runs it to find its functions.
 */
export function defineJob(name: string, build: JobBuilder): JobDefinition {
  if (typeof name !== 'string' || name.trim() === '' || name.length > MAX_JOB_NAME_LENGTH) {
    throw new InvalidJobDefinitionError(
      `defineJob(name, build) needs a non-empty job name of at most ${MAX_JOB_NAME_LENGTH} characters, found ${JSON.stringify(name)}`,
    );
  }
  if (typeof build !== 'function') {
    throw new InvalidJobDefinitionError(`defineJob('${name}', build) needs a builder function (env, args) => { ... }, found ${typeof build}`);
  }
  return Object.freeze({ __floeJob: 1 as const, name, build });
}

export function isJobDefinition(value: unknown): value is JobDefinition {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return v['__floeJob'] === 1 && typeof v['name'] === 'string' && typeof v['build'] === 'function';
}
