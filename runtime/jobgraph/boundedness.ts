// Whether a job's sources end by themselves (Flink's Boundedness: BOUNDED or CONTINUOUS_UNBOUNDED).
import type { JobGraph, OperatorSpec } from './jobgraph.js';

/**
 * A source that never ends by itself: a generator without a count, a file source that monitors its
 * folder, a connector source that says it is unbounded. Read by fields, so sources of any kind answer.
 */
export function isUnboundedSource(op: OperatorSpec): boolean {
  const o = op as { readonly kind: string; readonly count?: unknown; readonly monitorIntervalMs?: unknown; readonly bounded?: unknown };
  if (!o.kind.startsWith('source.')) return false;
  if (typeof o.bounded === 'boolean') return !o.bounded;
  if (o.kind === 'source.generate') return o.count === undefined;
  return o.monitorIntervalMs !== undefined;
}

/** Whether any vertex of the job reads an unbounded source: the job runs until cancelled. */
export const readsUnboundedSource = (graph: Pick<JobGraph, 'vertices'>): boolean => graph.vertices.some((v) => v.operators.some(isUnboundedSource));
