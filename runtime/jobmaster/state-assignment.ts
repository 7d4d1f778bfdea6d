// Which share of a checkpoint or savepoint each subtask of a job restores (Flink's StateAssignmentOperation):
// operators are matched by their id (uid, or vertex and place in the chain). At the parallelism the state
// was taken with each subtask gets its own; at another, each subtask gets the keyed handles whose key-group
// range meets its own (restoreKeyedState reads only its groups) and its round-robin deal of every split list
// of operator state (union lists whole). Subtasks that had FINISHED restore as done: empty state.
import { FloeError } from '../core/errors.js';
import type { JobGraph, JobVertex } from '../jobgraph/jobgraph.js';
import { keyGroupRange } from '../network/key-groups.js';
import type { KeyGroupsStateHandle, OperatorStateHandle, OperatorSubtaskState, TaskRestore } from '../protocol/checkpoints.js';
import { operatorIdOf } from '../task/checkpointing.js';
import type { CheckpointMetadata } from './checkpoint-coordinator.js';

/** A checkpoint or savepoint cannot be restored into this job. */
export class StateAssignmentError extends FloeError {
  constructor(message: string) {
    super('STATE_RESTORE', message, { retryable: false });
  }
}

/** The key of a subtask in the map assignTaskRestores returns. */
export const subtaskKey = (vertexId: string, subtaskIndex: number): string => `${vertexId}#${subtaskIndex}`;

/** One operator's state in the checkpoint: the vertex it ran in, its parallelism then, each subtask's share. */
interface OperatorStateInCheckpoint {
  readonly vertexId: string;
  readonly parallelism: number;
  readonly bySubtask: Map<number, OperatorSubtaskState>;
}

const EMPTY: OperatorSubtaskState = { keyed: [], operator: [] };

/** Each subtask's share of a checkpoint or savepoint, keyed `${vertexId}#${subtaskIndex}` (Flink's StateAssignmentOperation). */
export function assignTaskRestores(
  metadata: CheckpointMetadata,
  jobGraph: JobGraph,
  options?: { allowNonRestoredState?: boolean },
): ReadonlyMap<string, TaskRestore> {
  const operators = operatorsOf(metadata, jobGraph);
  const known = new Map<string, JobVertex>();
  for (const v of jobGraph.vertices) v.operators.forEach((op, i) => known.set(operatorIdOf(op, v.id, i), v));
  const unknown = [...operators].filter(([id, s]) => !known.has(id) && [...s.bySubtask.values()].some(hasState)).map(([id]) => id);
  if (unknown.length > 0 && options?.allowNonRestoredState !== true) {
    throw new StateAssignmentError(
      `checkpoint ${metadata.checkpointId} holds state of operator${unknown.length > 1 ? 's' : ''} ${unknown.map((id) => `'${id}'`).join(', ')} that job '${jobGraph.name}' does not have ` +
        `(its operators: ${[...known.keys()].map((id) => `'${id}'`).join(', ')}); give the operators the uid they had, or skip that state with --allow-non-restored-state`,
    );
  }
  const restores = new Map<string, Record<string, OperatorSubtaskState>>();
  for (const v of jobGraph.vertices) for (let i = 0; i < v.parallelism; i++) restores.set(subtaskKey(v.id, i), {});
  for (const v of jobGraph.vertices) {
    v.operators.forEach((op, index) => {
      const id = operatorIdOf(op, v.id, index);
      const taken = operators.get(id);
      if (taken === undefined) return;
      const shares = taken.parallelism === v.parallelism ? ownShares(taken) : redistribute(id, taken, v, metadata.checkpointId);
      shares.forEach((share, i) => (restores.get(subtaskKey(v.id, i))![id] = share));
    });
  }
  const out = new Map<string, TaskRestore>();
  for (const [key, ops] of restores) out.set(key, { checkpointId: metadata.checkpointId, state: { operators: ops } });
  return out;
}

/** Every operator of the checkpoint by id, with its vertex's parallelism then (acknowledged and finished subtasks). */
function operatorsOf(metadata: CheckpointMetadata, jobGraph: JobGraph): Map<string, OperatorStateInCheckpoint> {
  const parallelism = new Map<string, number>();
  for (const s of [...metadata.subtasks, ...(metadata.finished ?? [])])
    parallelism.set(s.vertexId, Math.max(parallelism.get(s.vertexId) ?? 0, s.subtaskIndex + 1));
  const operators = new Map<string, OperatorStateInCheckpoint>();
  const entry = (id: string, vertexId: string): OperatorStateInCheckpoint => {
    let e = operators.get(id);
    if (e === undefined) operators.set(id, (e = { vertexId, parallelism: parallelism.get(vertexId)!, bySubtask: new Map() }));
    else if (e.vertexId !== vertexId) {
      throw new StateAssignmentError(
        `checkpoint ${metadata.checkpointId} holds operator '${id}' in two vertices ('${e.vertexId}' and '${vertexId}'): the checkpoint is malformed`,
      );
    }
    return e;
  };
  for (const s of metadata.subtasks) for (const [id, state] of Object.entries(s.state.operators)) entry(id, s.vertexId).bySubtask.set(s.subtaskIndex, state);
  // A finished subtask restores as done: its operators (those its vertex had) with nothing left.
  const byVertex = new Map<string, Set<string>>();
  for (const [id, e] of operators) byVertex.set(e.vertexId, (byVertex.get(e.vertexId) ?? new Set()).add(id));
  for (const f of metadata.finished ?? []) {
    const vertex = jobGraph.vertices.find((v) => v.id === f.vertexId);
    const ids = new Set(byVertex.get(f.vertexId) ?? []);
    vertex?.operators.forEach((op, i) => ids.add(operatorIdOf(op, vertex.id, i)));
    for (const id of ids) {
      const e = entry(id, f.vertexId);
      if (!e.bySubtask.has(f.subtaskIndex)) e.bySubtask.set(f.subtaskIndex, EMPTY);
    }
  }
  return operators;
}

function hasState(s: OperatorSubtaskState): boolean {
  return s.keyed.length > 0 || s.operator.some((h) => h.lists.some((l) => l.count > 0)) || (s.inFlight?.length ?? 0) > 0;
}

/** At the parallelism it was taken with: each subtask its own state. */
function ownShares(taken: OperatorStateInCheckpoint): OperatorSubtaskState[] {
  return Array.from({ length: taken.parallelism }, (_, i) => taken.bySubtask.get(i) ?? EMPTY);
}

/** At another parallelism: keyed handles by key-group range, operator state dealt out. */
function redistribute(id: string, taken: OperatorStateInCheckpoint, vertex: JobVertex, checkpointId: number): OperatorSubtaskState[] {
  const old = [...taken.bySubtask.entries()].sort(([a], [b]) => a - b).map(([, s]) => s);
  if (old.some((s) => (s.inFlight?.length ?? 0) > 0)) {
    throw new StateAssignmentError(
      `checkpoint ${checkpointId} is unaligned: operator '${id}' has records in flight, which restore only at the parallelism it was taken with (${taken.parallelism}, now ${vertex.parallelism}); ` +
        'restore at that parallelism, or from an aligned checkpoint or a savepoint',
    );
  }
  const keyed: KeyGroupsStateHandle[] = old.flatMap((s) => s.keyed);
  const dealt = dealOperatorState(
    old.flatMap((s) => s.operator),
    vertex.parallelism,
  );
  return Array.from({ length: vertex.parallelism }, (_, i) => {
    const range = keyGroupRange(i, vertex.parallelism, vertex.maxParallelism);
    // In the checkpoint's order: an incremental snapshot's newer files come after the older ones.
    return { keyed: keyed.filter((k) => k.start <= range.end && k.end >= range.start), operator: dealt[i]! };
  });
}

/**
 * Operator state handles dealt among `parallelism` subtasks: each split list's entries, counted across
 * the handles in order, go round-robin (the n-th to subtask n mod parallelism), named in the handle's
 * `assigned`; union lists go whole to every subtask. A subtask gets only the handles it reads something of.
 */
export function dealOperatorState(handles: readonly OperatorStateHandle[], parallelism: number): OperatorStateHandle[][] {
  const out: OperatorStateHandle[][] = Array.from({ length: parallelism }, () => []);
  const seen = new Map<string, number>();
  for (const h of handles) {
    const picks: Record<string, number[]>[] = Array.from({ length: parallelism }, () => ({}));
    const reads = new Array<boolean>(parallelism).fill(false);
    for (const list of h.lists) {
      if (list.mode === 'union') {
        if (list.count > 0) reads.fill(true);
        continue;
      }
      for (const p of picks) Object.defineProperty(p, list.name, { value: [], enumerable: true, writable: true });
      // The entries of this handle's list: already dealt where an earlier handle asked for them.
      const first = seen.get(list.name) ?? 0;
      const already = h.assigned !== undefined && Object.hasOwn(h.assigned, list.name) ? h.assigned[list.name]! : undefined;
      const positions = already ?? Array.from({ length: list.count }, (_, j) => j);
      positions.forEach((position, n) => {
        const to = (first + n) % parallelism;
        picks[to]![list.name]!.push(position);
        reads[to] = true;
      });
      seen.set(list.name, first + positions.length);
    }
    for (let i = 0; i < parallelism; i++) if (reads[i]) out[i]!.push({ handle: h.handle, lists: h.lists, assigned: picks[i]! });
  }
  return out;
}
