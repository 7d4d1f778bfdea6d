// Blocking partitions on disk without worker threads: the file writer behind a result partition, the
// file reader behind a consumer's credits, and the TaskExecutor's partition table that releases them.
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId, ResultPartitionId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { BlockingPartitionWriter } from '../../runtime/network/blocking-partition.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition } from '../../runtime/network/result-partition.js';
import { BlockingPartitionTable } from '../../runtime/taskexecutor/blocking-partitions.js';

const CREDITS = 2;
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

function partition(id: string, n: number): ResultPartition {
  return new ResultPartition(
    { edgeId: 'e', partitionId: ResultPartitionId.of(id), partitionType: 'blocking', partitioner: 'rebalance', numberOfSubpartitions: n },
    0,
    { segmentSizeBytes: 256, maxBacklogBuffers: CREDITS, bufferTimeoutMs: 5 },
  );
}

/** Reads one subpartition from the table through an input gate, acknowledging after `pauseMs`. */
async function read(table: BlockingPartitionTable, id: ResultPartitionId, index: number, pauseMs = 0): Promise<{ records: unknown[]; maxUnacked: number }> {
  const gate = new InputGate([`sub ${index}`], CREDITS);
  const [producerEnd, consumerEnd] = createLocalPortPair();
  table.serve(id, index, producerEnd);
  gate.connect(0, consumerEnd);
  const records: unknown[] = [];
  for (;;) {
    const b = await gate.next();
    if (b === undefined) break;
    records.push(...b.records);
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    b.ack();
  }
  return { records, maxUnacked: gate.stats()[0]!.maxUnacked };
}

describe('blocking partitions on disk', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const tempDir = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'floe-blocking-'));
    dirs.push(d);
    return d;
  };

  it('writes each subpartition to a file with bounded backlog, then serves it as often as asked, with credits', async () => {
    const root = tempDir();
    const p = partition('bp-1', 2);
    const writer = await BlockingPartitionWriter.attach(p, join(root, 'bp-1'), CREDITS);
    for (const i of range(5000)) {
      const wait = p.emit({ i, pad: 'x'.repeat(20) });
      if (wait !== undefined) await wait;
    }
    p.finish();
    const files = await writer.done;
    expect(files.subpartitions).toHaveLength(2);
    for (const f of files.subpartitions) expect(statSync(f.path).size).toBe(f.bytes);
    // The writer is a consumer with CREDITS credits; the producer waits once its backlog is full (the
    // record that fills it may complete one buffer more).
    for (const s of p.stats()) {
      expect(s.maxBacklog).toBeLessThanOrEqual(CREDITS + 1);
      expect(s.maxBuffersInFlight).toBeLessThanOrEqual(CREDITS);
    }

    const table = new BlockingPartitionTable(systemClock, silentLogger);
    table.add(JobId.of('j'), ExecutionAttemptId.of('att'), files);
    expect(table.list()[0]).toMatchObject({ partitionId: 'bp-1', consumed: false, consumedSubpartitions: 0, subpartitions: 2 });
    const first = await read(table, files.partitionId, 0, 1);
    const second = await read(table, files.partitionId, 1);
    expect(first.maxUnacked).toBeLessThanOrEqual(CREDITS);
    const all = [...first.records, ...second.records] as { i: number }[];
    expect(all.map((r) => r.i).sort((a, b) => a - b)).toEqual(range(5000));
    // Rebalance from subtask 0 starts at subpartition 0: even records there, odd ones in 1, in order.
    expect((first.records as { i: number }[]).map((r) => r.i)).toEqual(range(2500).map((i) => 2 * i));
    expect(table.list()[0]).toMatchObject({ consumed: true, consumedSubpartitions: 2, activeReaders: 0 });
    // A second read of the same subpartition (a restarted consumer) sees the same data.
    expect((await read(table, files.partitionId, 0)).records).toEqual(first.records);

    expect(await table.release([files.partitionId], 'test')).toEqual([files.partitionId]);
    expect(existsSync(files.dir)).toBe(false);
    expect(table.size).toBe(0);
    expect(table.released).toBe(1);
  });

  it('removes the files of a producer that failed, and the consumer of a released partition gets an error', async () => {
    const root = tempDir();
    const p = partition('bp-2', 1);
    const writer = await BlockingPartitionWriter.attach(p, join(root, 'bp-2'), CREDITS);
    p.emit('a');
    p.flushAll();
    p.fail('producer task failed: boom');
    await expect(writer.done).rejects.toThrow(/boom/);
    expect(readdirSync(root)).toEqual([]);

    const table = new BlockingPartitionTable(systemClock, silentLogger);
    await expect(read(table, ResultPartitionId.of('bp-2'), 0)).rejects.toThrow(/not held here/);
  });
});
