// What the lmdb backend's incremental checkpoints build on (Flink's changelog state backend in shape): a
// materialization — a full snapshot of the key groups taken at one checkpoint — and the changelog deltas
// written after it, each holding the state entries changed since the snapshot before it. A checkpoint's
// handles are the chain of the last completed checkpoint (moved onto a newer materialization once one is
// written) and its own delta, which holds the changes since that chain's last point.
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';

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

/** A snapshot not yet known complete: its chain, and the record keys changed since the snapshot before it. */
interface SnapshotRecord {
  readonly checkpointId: number;
  readonly chain: Chain;
  readonly changed: ReadonlyMap<string, Buffer>;
}

/** The handles a restore of `chain` reads, materialization first. */
export const handlesOf = (chain: Chain): KeyGroupsStateHandle[] => [chain.base.handle, ...chain.deltas.map((d) => d.handle)];

/** The checkpoint a chain's state is as of. */
const pointOf = (chain: Chain): number => chain.deltas.at(-1)?.at ?? chain.base.at;

export class ChangelogChain {
  /** Snapshots not yet confirmed complete, oldest first, after the last completed one. */
  private pending: SnapshotRecord[] = [];
  private confirmed: Chain | undefined;
  /** The newest materialization written, maybe newer than the confirmed chain's. */
  private materialized: Link | undefined;

  /**
   * What checkpoint `checkpointId`'s delta builds on: the chain, and the record keys (by write-cache key)
   * changed since its last point, `changedNow` (those since the last snapshot) included. Undefined: there is
   * nothing to build on (no snapshot since the start or a restore), and the checkpoint writes in full.
   */
  base(changedNow: ReadonlyMap<string, Buffer>): { chain: Chain; changed: Map<string, Buffer> } | undefined {
    let chain = this.confirmed;
    const m = this.materialized;
    if (m !== undefined && (chain === undefined || m.at > chain.base.at)) {
      // Deltas after the materialization hold every change since it (each those since the one before it).
      chain = { base: m, deltas: (chain?.deltas ?? []).filter((d) => d.at > m.at) };
    }
    if (chain === undefined) return undefined;
    const since = pointOf(chain);
    const changed = new Map<string, Buffer>();
    for (const p of this.pending) if (p.checkpointId > since) for (const [k, v] of p.changed) changed.set(k, v);
    for (const [k, v] of changedNow) changed.set(k, v);
    return { chain, changed };
  }

  /** Checkpoint `checkpointId` wrote a full snapshot: it is a materialization, and its own chain. */
  tookFull(checkpointId: number, handle: KeyGroupsStateHandle, changed: ReadonlyMap<string, Buffer>): KeyGroupsStateHandle[] {
    const base = { at: checkpointId, handle };
    this.materialized = base;
    const chain = { base, deltas: [] };
    this.pending.push({ checkpointId, chain, changed });
    return handlesOf(chain);
  }

  /** Checkpoint `checkpointId` wrote `delta` onto `chain`. */
  tookDelta(checkpointId: number, chain: Chain, delta: KeyGroupsStateHandle, changed: ReadonlyMap<string, Buffer>): KeyGroupsStateHandle[] {
    const next = { base: chain.base, deltas: [...chain.deltas, { at: checkpointId, handle: delta }] };
    this.pending.push({ checkpointId, chain: next, changed });
    return handlesOf(next);
  }

  /** A materialization of the state at checkpoint `at` was written: later checkpoints build on it. */
  materializedAt(at: number, handle: KeyGroupsStateHandle): void {
    if (this.materialized === undefined || at > this.materialized.at) this.materialized = { at, handle };
  }

  /** The checkpoint the newest materialization (written or confirmed) was taken at; -Infinity: none. */
  lastMaterialization(): number {
    return Math.max(this.materialized?.at ?? -Infinity, this.confirmed?.base.at ?? -Infinity);
  }

  /** Checkpoint `checkpointId` completed: later snapshots build on its chain. */
  complete(checkpointId: number): void {
    const i = this.pending.findIndex((p) => p.checkpointId === checkpointId);
    if (i < 0) return;
    this.confirmed = this.pending[i]!.chain;
    this.pending = this.pending.slice(i + 1);
  }

  /** The state came from elsewhere (a restore): nothing written before builds it. */
  reset(): void {
    this.pending = [];
    this.confirmed = undefined;
    this.materialized = undefined;
  }
}
