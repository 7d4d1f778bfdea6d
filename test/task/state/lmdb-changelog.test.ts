// The lmdb backend's changelog checkpoints: deltas of the entries changed since the snapshot before (updates,
// removals, map entries) on a materialization written in the background, restored at the same and at
// other key-group ranges; checkpoints taken while a materialization is written, or after one failed.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { MapStateDescriptor, ValueStateDescriptor, ListStateDescriptor } from '../../../runtime/api/state.js';
import { ManualClock } from '../../../runtime/core/clock.js';
import { canonicalKey, keyGroupOf } from '../../../runtime/network/key-groups.js';
import type { StreamStateHandle } from '../../../runtime/protocol/checkpoints.js';
import type { KeyedStateBackend, KeyGroupRange } from '../../../runtime/task/state/keyed-state-backend.js';
import { LmdbKeyedStateBackend } from '../../../runtime/task/state/lmdb-keyed-state-backend.js';
import type { CheckpointStreamFactory } from '../../../runtime/checkpoint/checkpoint-storage.js';
import { checkpointStorageFor } from '../../../runtime/checkpoint/file-system-checkpoint-storage.js';
import { MemoryCheckpointStreams } from '../../support/checkpoint-streams.js';

const MAX = 128;
const root = mkdtempSync(join(tmpdir(), 'floe-lmdb-changelog-'));
let n = 0;
const made: LmdbKeyedStateBackend[] = [];
afterEach(() => {
  for (const b of made.splice(0)) b.dispose();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function backend(range: KeyGroupRange = { start: 0, end: MAX - 1 }, fullEvery = 3, restoreRecordsInMemory?: number): LmdbKeyedStateBackend {
  const b = new LmdbKeyedStateBackend({
    maxParallelism: MAX,
    keyGroupRange: range,
    clock: new ManualClock(),
    dir: join(root, `b${n++}`),
    writeCacheEntries: 64,
    fullEvery,
    ...(restoreRecordsInMemory !== undefined ? { restoreRecordsInMemory } : {}),
  });
  made.push(b);
  return b;
}

/** Streams whose writes of files `held` names wait for `release`, and of those `failing` names fail (by default, materializations: …-full-…). */
class GatedStreams extends MemoryCheckpointStreams {
  failing = false;
  failingName = (name: string) => name.includes('-full-');
  /** A write of a held file is waiting (a materialization's groups are all read). */
  waiting = false;
  private gate: Promise<void> | undefined;
  private heldName: (name: string) => boolean = () => false;
  private open: (() => void) | undefined;
  hold(names = (name: string) => name.includes('-full-')): void {
    this.heldName = names;
    this.gate = new Promise((resolve) => (this.open = resolve));
  }
  release(): void {
    this.open?.();
    this.gate = undefined;
  }
  override async write(checkpointId: number, name: string, bytes: Uint8Array, options?: { readonly shared?: boolean }): Promise<StreamStateHandle> {
    if (this.failing && this.failingName(name)) throw new Error(`storage refused ${name}`);
    if (this.heldName(name) && this.gate !== undefined) {
      this.waiting = true;
      await this.gate;
    }
    return super.write(checkpointId, name, bytes, options);
  }
}

const counts = new ValueStateDescriptor<number>('count');
const seen = new ListStateDescriptor<string>('seen');
const tags = new MapStateDescriptor<string, number>('tags');
const groupOf = (key: unknown): number => keyGroupOf(canonicalKey(key), MAX);
const keys = Array.from({ length: 400 }, (_, i) => `user-${i}`);

/** Round `round` of updates to `ks`: counts up, a list element and a map entry added, the map entry of round-2 removed, every 7th key cleared. */
function update(b: KeyedStateBackend, ks: readonly string[], round: number): void {
  const count = b.getPartitionedState(counts);
  const list = b.getPartitionedState(seen);
  const map = b.getPartitionedState(tags);
  ks.forEach((k, i) => {
    b.setCurrentKey(k);
    if ((i + round) % 7 === 0) {
      count.clear();
      list.clear();
      map.clear();
      return;
    }
    count.update((count.value() ?? 0) + 1);
    list.add(`${k}@${round}`);
    map.put(`r${round}`, round);
    map.remove(`r${round - 2}`);
  });
}

/** Every key's state, as a user reads it. */
function contents(b: KeyedStateBackend, ks: readonly string[]): Record<string, unknown> {
  const count = b.getPartitionedState(counts);
  const list = b.getPartitionedState(seen);
  const map = b.getPartitionedState(tags);
  const out: Record<string, unknown> = {};
  for (const k of ks) {
    b.setCurrentKey(k);
    const entries = map.entries().sort();
    if (count.value() !== undefined || entries.length > 0) out[k] = [count.value(), list.get(), entries];
  }
  return out;
}

async function restoredFrom(
  handles: Parameters<LmdbKeyedStateBackend['restoreKeyGroups']>[0],
  streams: CheckpointStreamFactory,
  range?: KeyGroupRange,
  restoreRecordsInMemory?: number,
) {
  const b = backend(range, 3, restoreRecordsInMemory);
  await b.restoreKeyGroups(handles, streams);
  return b;
}

const within = (range: KeyGroupRange) => keys.filter((k) => groupOf(k) >= range.start && groupOf(k) <= range.end);

describe('lmdb changelog checkpoints', () => {
  it('restores updates, removals and map entries from deltas on a materialization, at the same and at other key-group ranges', async () => {
    const streams = new GatedStreams();
    const left = backend({ start: 0, end: 63 });
    const right = backend({ start: 64, end: 127 });
    const both = [left, right];
    const take = async (id: number) => {
      return Promise.all(both.map((b, i) => b.snapshotKeyGroups(id, streams, `op-${i}`)));
    };
    update(left, within(left.keyGroupRange), 1);
    update(right, within(right.keyGroupRange), 1);
    const first = await take(1);
    expect(first.map((t) => t.incremental)).toEqual([false, false]);
    let last = first;
    for (let id = 2; id <= 6; id++) {
      // A tenth of the keys change each time, a third of them in groups the others do not touch.
      const changing = keys.filter((_, i) => i % 10 === id % 10);
      update(
        left,
        within(left.keyGroupRange).filter((k) => changing.includes(k)),
        id,
      );
      update(
        right,
        within(right.keyGroupRange).filter((k) => changing.includes(k)),
        id,
      );
      last = await take(id);
      expect(last.map((t) => t.incremental)).toEqual([true, true]);
      expect(last[0]!.bytesPersisted).toBeLessThan(first[0]!.bytesPersisted / 3);
      // Checkpoint 4 starts a materialization (full-every 3); the next ones build on it.
      if (id === 4) await Promise.all(both.map((b) => b.materialized()));
    }
    expect(last[0]!.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-0-full-4', 'memory://shared/op-0-5', 'memory://shared/op-0-6']);
    expect(last[0]!.handles.map((h) => h.delta === true)).toEqual([false, true, true]);
    const expected = { ...contents(left, within(left.keyGroupRange)), ...contents(right, within(right.keyGroupRange)) };
    expect(Object.keys(expected).length).toBeGreaterThan(300);
    // What the JobMaster hands a subtask: every old subtask's handles, each one's in checkpoint order.
    const handles = [...last[0]!.handles, ...last[1]!.handles];
    for (const range of [
      { start: 0, end: 127 },
      { start: 0, end: 63 },
      { start: 32, end: 95 },
      { start: 100, end: 127 },
    ]) {
      const mine = within(range);
      // A restore that keeps a few of the records it wrote in memory looks the others up in lmdb: the same state.
      for (const inMemory of [undefined, 5]) {
        const b = await restoredFrom(handles, streams, range, inMemory);
        expect(contents(b, mine)).toEqual(Object.fromEntries(mine.filter((k) => k in expected).map((k) => [k, expected[k]])));
      }
    }
  });

  it('writes in full once most records changed since the chain it would build on, and builds the next deltas on that', async () => {
    const streams = new MemoryCheckpointStreams();
    const a = backend(undefined, 10);
    update(a, keys, 1);
    await a.snapshotKeyGroups(1, streams, 'op');
    update(a, keys.slice(0, 100), 2);
    const second = await a.snapshotKeyGroups(2, streams, 'op');
    expect(second.incremental).toBe(true);
    // Every key's count, list and map change: more than half the records.
    update(a, keys, 3);
    const third = await a.snapshotKeyGroups(3, streams, 'op');
    expect(third.incremental).toBe(false);
    expect(third.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-3']);
    expect(contents(await restoredFrom(third.handles, streams), keys)).toEqual(contents(a, keys));
    update(a, keys.slice(0, 40), 4);
    const fourth = await a.snapshotKeyGroups(4, streams, 'op');
    expect(fourth.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-3', 'memory://shared/op-4']);
    expect(contents(await restoredFrom(fourth.handles, streams), keys)).toEqual(contents(a, keys));
  });

  it('after a restore of its own chain at the same key groups, the next checkpoint is a delta on it; at other groups or from foreign files, full', async () => {
    const streams = new GatedStreams();
    const a = backend();
    update(a, keys, 1);
    const first = await a.snapshotKeyGroups(1, streams, 'op');
    update(a, keys.slice(0, 40), 2);
    const second = await a.snapshotKeyGroups(2, streams, 'op');
    expect(second.incremental).toBe(true);
    // A failover: a new backend of the same key groups restores checkpoint 2 and goes on.
    const b = await restoredFrom(second.handles, streams);
    update(b, keys.slice(40, 60), 3);
    const third = await b.snapshotKeyGroups(3, streams, 'op-b');
    expect(third.incremental).toBe(true);
    expect(third.handles.map((h) => h.handle.uri)).toEqual([...second.handles.map((h) => h.handle.uri), 'memory://shared/op-b-3']);
    expect(third.bytesPersisted).toBeLessThan(first.bytesPersisted / 3);
    expect(contents(await restoredFrom(third.handles, streams), keys)).toEqual(contents(b, keys));
    // At other key groups (a rescale), or from files not the job's own (a savepoint, another job): in full.
    const half = await restoredFrom(second.handles, streams, { start: 0, end: 63 });
    expect((await half.snapshotKeyGroups(4, streams, 'half')).incremental).toBe(false);
    streams.foreign = true;
    const foreign = await restoredFrom(second.handles, streams);
    expect((await foreign.snapshotKeyGroups(5, streams, 'foreign')).incremental).toBe(false);
  });

  /** A backend (a materialization every 2 checkpoints) after checkpoint 3, whose materialization's write `streams` hold. */
  async function materializingAtThree(streams: GatedStreams) {
    const a = backend(undefined, 2);
    update(a, keys, 1);
    await a.snapshotKeyGroups(1, streams, 'op');
    update(a, keys.slice(0, 40), 2);
    await a.snapshotKeyGroups(2, streams, 'op');
    streams.hold();
    update(a, keys.slice(40, 80), 3);
    // Checkpoint 3 starts the materialization and completes while its write waits.
    const third = await a.snapshotKeyGroups(3, streams, 'op');
    return { a, third };
  }

  it('a checkpoint taken while a materialization is written builds on the one before and restores right; later ones drop the deltas before it', async () => {
    const streams = new GatedStreams();
    const { a, third } = await materializingAtThree(streams);
    const atThree = contents(a, keys);
    update(a, keys.slice(20, 60), 4);
    const fourth = await a.snapshotKeyGroups(4, streams, 'op');
    expect(fourth.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-1', 'memory://shared/op-2', 'memory://shared/op-3', 'memory://shared/op-4']);
    expect(contents(await restoredFrom(third.handles, streams), keys)).toEqual(atThree);
    expect(contents(await restoredFrom(fourth.handles, streams), keys)).toEqual(contents(a, keys));

    streams.release();
    await a.materialized();
    update(a, keys.slice(100, 120), 5);
    const fifth = await a.snapshotKeyGroups(5, streams, 'op');
    expect(fifth.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-full-3', 'memory://shared/op-4', 'memory://shared/op-5']);
    expect(contents(await restoredFrom(fifth.handles, streams), keys)).toEqual(contents(a, keys));
  });

  it('disposed while a materialization is written, is settled only once that write ended', async () => {
    const streams = new GatedStreams();
    const { a } = await materializingAtThree(streams);
    await vi.waitFor(() => expect(streams.waiting).toBe(true));
    a.dispose();
    let settled = false;
    const done = a.settled().then(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(settled, 'settled while the materialization still writes').toBe(false);
    streams.release();
    await done;
    // The file is written, and nothing references it: the job's cleanup, which runs after the task's end, deletes it.
    expect(streams.files.has('memory://shared/op-full-3')).toBe(true);
  });

  it('a materialization reads its groups over time while the task writes, and the chains built on it restore exactly', async () => {
    // Values of 20 KB: the groups are read in several runs, with the task's writes in between.
    const payload = new ValueStateDescriptor<string>('payload');
    const write = (b: KeyedStateBackend, k: string, round: number) => {
      b.setCurrentKey(k);
      b.getPartitionedState(payload).update(`${k}@${round}:`.padEnd(20_000, '.'));
    };
    const all = (b: KeyedStateBackend, ks: readonly string[]) => {
      const out: Record<string, string | undefined> = {};
      for (const k of ks) {
        b.setCurrentKey(k);
        const v = b.getPartitionedState(payload).value();
        if (v !== undefined) out[k] = v.slice(0, v.indexOf(':'));
      }
      return out;
    };
    const streams = new GatedStreams();
    const a = backend(undefined, 2);
    for (const k of keys) write(a, k, 0);
    await a.snapshotKeyGroups(1, streams, 'op');
    for (const k of keys.slice(0, 100)) write(a, k, 1);
    await a.snapshotKeyGroups(2, streams, 'op');
    streams.hold();
    // Checkpoint 3 starts the materialization; until it has read every group, the task changes, removes and adds keys.
    await a.snapshotKeyGroups(3, streams, 'op');
    const late: string[] = [];
    for (let round = 2; !streams.waiting; round++) {
      // Among the first 100 keys: checkpoint 4's delta holds fewer than half the records (else it is full).
      for (let i = 0; i < 10; i++) write(a, keys[(round * 10 + i) % 100]!, round);
      a.setCurrentKey(keys[(round * 7) % 100]!);
      a.getPartitionedState(payload).clear();
      late.push(`late-${round}`);
      write(a, `late-${round}`, round);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(late.length, 'rounds of writes while the materialization read').toBeGreaterThan(3);
    streams.release();
    await a.materialized();
    const fourth = await a.snapshotKeyGroups(4, streams, 'op');
    expect(fourth.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-full-3', 'memory://shared/op-4']);
    const everyKey = [...keys, ...late];
    expect(all(await restoredFrom(fourth.handles, streams), everyKey)).toEqual(all(a, everyKey));
    // The materialization saw writes made after checkpoint 3: its later groups were read in later transactions.
    const materialized = await restoredFrom([fourth.handles[0]!], streams);
    expect(Object.keys(all(materialized, late)).length).toBeGreaterThan(0);
  });

  it('a materialization that fails leaves the checkpoints on the chain before it, restoring right, and the next checkpoint starts another', async () => {
    const streams = new GatedStreams();
    const a = backend(undefined, 2);
    update(a, keys, 1);
    await a.snapshotKeyGroups(1, streams, 'op');
    streams.failing = true;
    update(a, keys.slice(0, 50), 2);
    await a.snapshotKeyGroups(2, streams, 'op');
    update(a, keys.slice(50, 100), 3);
    const third = await a.snapshotKeyGroups(3, streams, 'op');
    await a.materialized();
    expect(a.materializationError?.message).toBe('storage refused op-full-3');
    expect(third.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-1', 'memory://shared/op-2', 'memory://shared/op-3']);
    expect(contents(await restoredFrom(third.handles, streams), keys)).toEqual(contents(a, keys));

    streams.failing = false;
    update(a, keys.slice(10, 30), 4);
    const fourth = await a.snapshotKeyGroups(4, streams, 'op');
    expect(fourth.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-1', 'memory://shared/op-2', 'memory://shared/op-3', 'memory://shared/op-4']);
    await a.materialized();
    expect(a.materializationError).toBeUndefined();
    const fifth = await a.snapshotKeyGroups(5, streams, 'op');
    expect(fifth.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-full-4', 'memory://shared/op-5']);
    expect(contents(await restoredFrom(fifth.handles, streams), keys)).toEqual(contents(a, keys));
  });

  it('materializations that keep failing decline a checkpoint with the reason after three in a row, and the changes of the declined one go into the next', async () => {
    const streams = new GatedStreams();
    const a = backend(undefined, 2);
    update(a, keys, 1);
    await a.snapshotKeyGroups(1, streams, 'op');
    streams.failing = true;
    // Checkpoints 3, 4 and 5 each start a materialization (2 or more after the last, which never lands).
    for (const id of [2, 3, 4, 5]) {
      update(a, keys.slice(id * 10, id * 10 + 10), id);
      await a.snapshotKeyGroups(id, streams, 'op');
      await a.materialized();
    }
    update(a, keys.slice(200, 210), 6);
    await expect(a.snapshotKeyGroups(6, streams, 'op')).rejects.toThrow(
      'lmdb state: 3 materializations in a row failed, checkpoint 6 declined; the last failure: storage refused op-full-5',
    );
    streams.failing = false;
    const seventh = await a.snapshotKeyGroups(7, streams, 'op');
    expect(seventh.handles.map((h) => h.handle.uri)).toEqual(['1', '2', '3', '4', '5', '7'].map((id) => `memory://shared/op-${id}`));
    expect(contents(await restoredFrom(seventh.handles, streams), keys)).toEqual(contents(a, keys));
    await a.materialized();
    expect(a.materializationError).toBeUndefined();
  });

  it("a checkpoint begun while the one before writes, or after it failed, holds that one's changes too", async () => {
    const streams = new GatedStreams();
    const a = backend();
    update(a, keys, 1);
    await a.snapshotKeyGroups(1, streams, 'op');
    // Checkpoint 2's write waits; checkpoint 3 is taken meanwhile (2 was aborted, say) and builds on 1.
    streams.hold((name) => name === 'op-2');
    update(a, keys.slice(0, 60), 2);
    const second = a.snapshotKeyGroups(2, streams, 'op');
    const atTwo = contents(a, keys);
    update(a, keys.slice(200, 230), 3);
    const third = await a.snapshotKeyGroups(3, streams, 'op');
    expect(third.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-1', 'memory://shared/op-3']);
    expect(contents(await restoredFrom(third.handles, streams), keys)).toEqual(contents(a, keys));
    streams.release();
    expect(contents(await restoredFrom((await second).handles, streams), keys)).toEqual(atTwo);

    // Checkpoint 4's write fails: checkpoint 5 builds on 3 and holds 4's changes.
    streams.failing = true;
    streams.failingName = (name) => name === 'op-4';
    update(a, keys.slice(300, 340), 4);
    await expect(a.snapshotKeyGroups(4, streams, 'op')).rejects.toThrow('storage refused op-4');
    update(a, keys.slice(0, 5), 5);
    const fifth = await a.snapshotKeyGroups(5, streams, 'op');
    expect(fifth.handles.map((h) => h.handle.uri)).toEqual(['memory://shared/op-1', 'memory://shared/op-3', 'memory://shared/op-5']);
    expect(contents(await restoredFrom(fifth.handles, streams), keys)).toEqual(contents(a, keys));
  });

  it('a delta without the full snapshot it builds on fails the restore and says so', async () => {
    const streams = new GatedStreams();
    const a = backend();
    update(a, keys, 1);
    await a.snapshotKeyGroups(1, streams, 'op');
    update(a, keys.slice(0, 10), 2);
    const second = await a.snapshotKeyGroups(2, streams, 'op');
    const b = backend();
    await expect(b.restoreKeyGroups(second.handles.slice(1), streams)).rejects.toThrow(/no full snapshot of that group comes before it/);
  });

  it("a materialization goes to the storage's file as its groups are read, not held whole, and restores exactly", async () => {
    const storage = checkpointStorageFor(join(root, `storage-${n++}`), 'job');
    const pieces: number[] = [];
    const streams = Object.assign(Object.create(storage) as typeof storage, {
      openParts: async (...args: Parameters<typeof storage.openParts>) => {
        const file = await storage.openParts(...args);
        return { ...file, append: (bytes: Uint8Array) => (pieces.push(bytes.length), file.append(bytes)) };
      },
    });
    const a = backend(undefined, 2);
    update(a, keys, 1);
    await a.snapshotKeyGroups(1, streams, 'op');
    update(a, keys.slice(0, 40), 2);
    await a.snapshotKeyGroups(2, streams, 'op');
    update(a, keys.slice(40, 80), 3);
    await a.snapshotKeyGroups(3, streams, 'op');
    await a.materialized();
    update(a, keys.slice(80, 120), 4);
    const fourth = await a.snapshotKeyGroups(4, streams, 'op');
    const [materialization] = fourth.handles;
    expect(materialization!.handle.uri).toMatch(/\/shared\/op-full-3$/);
    expect(pieces.length).toBeGreaterThan(20);
    expect(Math.max(...pieces)).toBeLessThan(materialization!.handle.size / 10);
    expect(pieces.reduce((x, y) => x + y, 0)).toBe(materialization!.handle.size);
    expect(contents(await restoredFrom(fourth.handles, streams), keys)).toEqual(contents(a, keys));
  });

  it("while a checkpoint's file is written, lmdb reuses the pages the task frees: the environment stays as large as its state", async () => {
    const streams = new GatedStreams();
    const a = backend();
    const dataFile = join(root, `b${n - 1}`, 'data.mdb');
    const value = a.getPartitionedState(new ValueStateDescriptor<string>('payload'));
    const rewrite = (round: number, ks = keys) => {
      for (const k of ks) {
        a.setCurrentKey(k);
        value.update(`${round}:${'v'.repeat(2000)}`);
      }
      a.flush();
    };
    rewrite(0);
    await a.snapshotKeyGroups(1, streams, 'op');
    rewrite(1, keys.slice(0, 40));
    streams.hold((name) => name === 'op-2');
    const second = a.snapshotKeyGroups(2, streams, 'op');
    await vi.waitFor(() => expect(streams.waiting).toBe(true));
    const before = statSync(dataFile).size;
    // 30 rounds of 400 values of 2 KB: 24 MB written over a state of under 1 MB.
    for (let round = 2; round < 32; round++) rewrite(round);
    expect(statSync(dataFile).size - before).toBeLessThan(4 * 1024 * 1024);
    streams.release();
    expect((await second).incremental).toBe(true);
  });
});
