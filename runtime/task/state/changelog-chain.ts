// What the lmdb backend's incremental checkpoints build on (Flink's changelog state backend in shape): a
// materialization — a full snapshot of the key groups taken at one checkpoint — and the changelog deltas
// written after it, each holding the state entries changed since the snapshot before it. A checkpoint's
// handles are the chain of the latest snapshot written (moved onto a newer materialization once one is
// written) and its own delta, holding every change since that snapshot: its own and those of snapshots
// begun since, written or not. It builds on the latest written snapshot, completed or not: the coordinator
// deletes shared files only when a completed checkpoint subsumes another (what the latest written chain
// references stays) or at the job's end, and at most one checkpoint is in flight, so the one a checkpoint
// completes after has written its files.
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import type { KeyGroupRange } from './keyed-state-backend.js';

/** A full snapshot taken at checkpoint `at`, or a delta written for checkpoint `at`. */
interface Link {
  readonly at: number;
  readonly handle: KeyGroupsStateHandle;
}

/** A materialization and the deltas after it, oldest first: what a restore reads. */
export interface Chain {
  readonly base: Link;
  readonly deltas: readonly Link[];
}

/** The handles a restore of `chain` reads, materialization first. */
export const handlesOf = (chain: Chain): KeyGroupsStateHandle[] => [chain.base.handle, ...chain.deltas.map((d) => d.handle)];

export class ChangelogChain {
  /** The latest snapshot written, by checkpoint id, and its chain. */
  private latest: { readonly checkpointId: number; readonly chain: Chain } | undefined;
  /** Snapshots begun after the latest written one (in flight, or failed): the record keys each took. */
  private begun: { readonly checkpointId: number; readonly changed: ReadonlyMap<string, Buffer> }[] = [];
  /** The newest materialization written, maybe newer than the latest chain's. */
  private materialized: Link | undefined;

  /**
   * Checkpoint `checkpointId` begins, taking the record keys (by write-cache key) changed since the
   * snapshot before it. Returns what its delta builds on: the chain, and every record key changed since the
   * chain's last point. Undefined: nothing to build on (no snapshot written since the start or a restore),
   * and the checkpoint writes in full.
   */
  begin(checkpointId: number, changedNow: ReadonlyMap<string, Buffer>): { chain: Chain; changed: Map<string, Buffer> } | undefined {
    let chain = this.latest?.chain;
    const m = this.materialized;
    if (m !== undefined && (chain === undefined || m.at > chain.base.at)) {
      // Each delta holds every change since the one before it: those after the materialization suffice.
      chain = { base: m, deltas: (chain?.deltas ?? []).filter((d) => d.at > m.at) };
    }
    const changed = new Map<string, Buffer>();
    for (const b of this.begun) for (const [k, v] of b.changed) changed.set(k, v);
    for (const [k, v] of changedNow) changed.set(k, v);
    this.begun.push({ checkpointId, changed: changedNow });
    return chain === undefined ? undefined : { chain, changed };
  }

  /** Checkpoint `checkpointId` wrote a full snapshot: it is a materialization, and its own chain. */
  wroteFull(checkpointId: number, handle: KeyGroupsStateHandle): KeyGroupsStateHandle[] {
    const base = { at: checkpointId, handle };
    this.materializedAt(checkpointId, handle);
    return this.wrote(checkpointId, { base, deltas: [] });
  }

  /** Checkpoint `checkpointId` wrote `delta` onto `chain`. */
  wroteDelta(checkpointId: number, chain: Chain, delta: KeyGroupsStateHandle): KeyGroupsStateHandle[] {
    return this.wrote(checkpointId, { base: chain.base, deltas: [...chain.deltas, { at: checkpointId, handle: delta }] });
  }

  private wrote(checkpointId: number, chain: Chain): KeyGroupsStateHandle[] {
    if (this.latest === undefined || checkpointId > this.latest.checkpointId) {
      this.latest = { checkpointId, chain };
      this.begun = this.begun.filter((b) => b.checkpointId > checkpointId);
    }
    return handlesOf(chain);
  }

  /** A materialization of the state at checkpoint `at` was written: later checkpoints build on it. */
  materializedAt(at: number, handle: KeyGroupsStateHandle): void {
    if (this.materialized === undefined || at > this.materialized.at) this.materialized = { at, handle };
  }

  /** The checkpoint the newest materialization written was taken at; -Infinity: none. */
  lastMaterialization(): number {
    return this.materialized?.at ?? -Infinity;
  }

  /**
   * The state was restored from `handles`, a chain a backend of the same key groups wrote (a full snapshot
   * and the deltas after it): the next checkpoint builds on it, and a materialization follows it soon.
   */
  adopt(handles: readonly KeyGroupsStateHandle[]): void {
    const [base, ...deltas] = handles;
    this.reset();
    if (base === undefined) return;
    // Checkpoint ids only grow: a restored chain is older than anything this backend writes.
    this.latest = { checkpointId: 0, chain: { base: { at: 0, handle: base }, deltas: deltas.map((handle) => ({ at: 0, handle })) } };
  }

  /** The state came from elsewhere (a restore): nothing written before builds it. */
  reset(): void {
    this.latest = undefined;
    this.begun = [];
    this.materialized = undefined;
  }
}

/** Whether `handles` are one full snapshot and the deltas after it, all shared files of exactly `range`. */
export function isOwnChain(handles: readonly KeyGroupsStateHandle[], range: KeyGroupRange): boolean {
  return (
    handles.length > 0 &&
    handles[0]!.delta !== true &&
    handles.every((h, i) => (i === 0 || h.delta === true) && h.shared === true && h.start === range.start && h.end === range.end)
  );
}
