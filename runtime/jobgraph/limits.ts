// The bounds a JobGraph must keep, and the one error that lists its problems. Kept apart from the schema
// (job-graph-schema.ts) so the job API, bundled into every job library, reads the bounds without it.
import { InvalidJobGraphError } from '../core/errors.js';

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

/** One InvalidJobGraphError listing the problems: at most maxReportedProblems of them, and a count of the rest. */
export function invalidJobGraph(list: readonly string[]): InvalidJobGraphError {
  const max = JOB_GRAPH_LIMITS.maxReportedProblems;
  return new InvalidJobGraphError(list.length > max ? [...list.slice(0, max), `…and ${list.length - max} more problems`] : [...list]);
}
