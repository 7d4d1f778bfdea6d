// Which operators of a job keep state a checkpoint holds but have no uid(…): their state is stored under an
// id made from the graph's shape (`<vertex id>:<index in the chain>`), which a changed job does not keep, so
// a savepoint of one version of the job cannot restore them into the next.
import { isKeyedOperator, isSinkOperator, isSourceOperator, type JobGraph, type OperatorKind } from './jobgraph.js';
import { isTwoInputOperator } from './two-input-operator-specs.js';

export interface OperatorWithoutUid {
  readonly name: string;
  readonly kind: OperatorKind;
  /** The id its state is stored under instead. */
  readonly stateId: string;
}

/**
 * Sources (their positions), keyed and two-input operators (keyed and broadcast state, timers, buffers) and
 * sinks (pending commits) without a uid, in graph order.
 */
export function statefulOperatorsWithoutUid(graph: Pick<JobGraph, 'vertices'>): OperatorWithoutUid[] {
  const out: OperatorWithoutUid[] = [];
  for (const v of graph.vertices) {
    v.operators.forEach((op, j) => {
      const stateful = isSourceOperator(op) || isKeyedOperator(op) || isTwoInputOperator(op) || (isSinkOperator(op) && op.kind !== 'sink.collect');
      if (stateful && op.uid === undefined) out.push({ name: op.name, kind: op.kind, stateId: `${v.id}:${j}` });
    });
  }
  return out;
}
