// The task runtime without worker threads: text-file splits, sources, fused chains and sinks.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ExecutionAttemptId, JobId, ResultPartitionId } from '../../runtime/core/ids.js';
import type { OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition } from '../../runtime/network/result-partition.js';
import { runOperatorChain, sequenceRange, type TaskIo } from '../../runtime/task/operator-chain.js';
import type { InputSplit, TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { readSplitLines } from '../../runtime/task/text-file-reader.js';
import { taskDeployment } from '../support/task-deployment.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-operators-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function splitsOf(path: string, size: number, splitSize: number): InputSplit[] {
  const out: InputSplit[] = [];
  for (let start = 0; start < size; start += splitSize)
    out.push({ splitId: `${path}@${start}`, splitNumber: out.length, path, start, length: Math.min(splitSize, size - start) });
  return out;
}

async function readAll(splits: InputSplit[], chunk: number): Promise<string[]> {
  const lines: string[] = [];
  for (const s of splits) for await (const l of readSplitLines(s, { chunkSizeBytes: chunk })) lines.push(l);
  return lines;
}

describe('text file splits', () => {
  // Lines of varied length, empty ones, multi-byte characters, both line endings.
  const lines = Array.from({ length: 60 }, (_, i) => (i % 17 === 0 ? '' : `${i}:${'é'.repeat(i % 5)}${'x'.repeat((i * 7) % 23)}`));
  const cases: [string, string, string[]][] = [
    ['\\n', lines.join('\n') + '\n', lines],
    ['\\r\\n', lines.join('\r\n') + '\r\n', lines],
    ['no final newline', lines.join('\n'), lines],
    ['mixed endings', lines.map((l, i) => l + (i % 2 ? '\r\n' : '\n')).join(''), lines],
  ];
  for (const [name, text, expected] of cases) {
    it(`read every line exactly once across split sizes (${name})`, async () => {
      const path = join(dir, `f-${name.replace(/\W/g, '_')}.txt`);
      writeFileSync(path, text);
      const size = Buffer.byteLength(text);
      for (const splitSize of [1, 2, 3, 7, 16, 61, 100, size, size + 10]) {
        for (const chunk of [5, 64 * 1024]) {
          expect(await readAll(splitsOf(path, size, splitSize), chunk), `split ${splitSize}, chunk ${chunk}`).toEqual(expected);
        }
      }
    });
  }

  it('reads a line longer than any chunk whole, and only in the split it starts in', async () => {
    const long = 'L'.repeat(200_000);
    const path = join(dir, 'long.txt');
    writeFileSync(path, `a\n${long}\nb`);
    const size = 2 + long.length + 2;
    expect(await readAll(splitsOf(path, size, 50_000), 4096)).toEqual(['a', long, 'b']);
  });
});

const attempt = ExecutionAttemptId.random();
function tdd(operators: OperatorSpec[], extra: Partial<TaskDeploymentDescriptor> = {}): TaskDeploymentDescriptor {
  return taskDeployment(operators, { jobId: JobId.of('job-ops'), attemptId: attempt, ...extra });
}

function io(t: TaskDeploymentDescriptor, fns: Record<string, Function> = {}, more: Partial<TaskIo> = {}): TaskIo {
  return {
    tdd: t,
    userFunctions: new Map(Object.entries(fns)),
    signal: new AbortController().signal,
    outputs: [],
    input: undefined,
    requestSplit: async () => null,
    ...more,
  };
}

const fn = (operatorId: string) => ({ export: 'default', operatorId });

describe('operator chains', () => {
  it('splits a sequence into contiguous near-equal ranges', () => {
    const parts = [0, 1, 2].map((i) => sequenceRange(1, 10, i, 3));
    expect(parts).toEqual([
      { from: 1, to: 4 },
      { from: 5, to: 7 },
      { from: 8, to: 10 },
    ]);
    expect(sequenceRange(5, 6, 3, 4)).toEqual({ from: 7, to: 6 });
  });

  it('fuses source → map → flatMap → filter → collect and counts records', async () => {
    const ops: OperatorSpec[] = [
      { kind: 'source.sequence', id: 's', name: 'seq', from: 1, to: 10 },
      { kind: 'map', id: 'm', name: 'double', fn: fn('op-1') },
      { kind: 'flatMap', id: 'f', name: 'twice', fn: fn('op-2') },
      { kind: 'filter', id: 'g', name: 'small', fn: fn('op-3') },
      { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 5 },
    ];
    const result = await runOperatorChain(
      io(tdd(ops), {
        'op-1': (x: number) => x * 2,
        'op-2': function* (x: number) {
          yield x;
          yield -x;
        },
        'op-3': (x: number) => x > 0,
      }),
    );
    expect(result.collected).toEqual([2, 4, 6, 8, 10]);
    expect(result.collectedTruncated).toBe(true);
    expect(result.recordsIn).toBe(10);
    expect(result.recordsOut).toBe(10);
  });

  it('reads text splits lazily and writes a text sink that is flushed before the end', async () => {
    const input = join(dir, 'in.txt');
    writeFileSync(input, 'one\r\ntwo\nthree\n');
    const staging = join(dir, 'staging');
    const splits = splitsOf(input, 15, 4);
    let asked = 0;
    const result = await runOperatorChain(
      io(
        tdd(
          [
            { kind: 'source.textFile', id: 's', name: 'read', path: input, splitSizeBytes: 4 },
            { kind: 'map', id: 'm', name: 'wrap', fn: fn('op-1') },
            { kind: 'sink.textFile', id: 'w', name: 'write', path: '/ignored' },
          ],
          { sinkStagingDir: staging },
        ),
        { 'op-1': (l: string) => (l === 'two' ? { l } : l.toUpperCase()) },
        { requestSplit: async () => splits[asked++] ?? null },
      ),
    );
    expect(asked).toBe(splits.length + 1);
    expect(readFileSync(join(staging, 'part-0'), 'utf8')).toBe('ONE\n{"l":"two"}\nTHREE\n');
    expect(result).toMatchObject({ recordsIn: 3, recordsOut: 3 });
  });

  it('passes records from inputs to outputs, acknowledging each buffer', async () => {
    const upstream = new ResultPartition(
      { edgeId: 'e0', partitionId: ResultPartitionId.of('up'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
      0,
      { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 5 },
    );
    const gate = new InputGate(['up'], 2);
    const [a, b] = createLocalPortPair();
    upstream.attach(0, a);
    gate.connect(0, b);
    const down = new ResultPartition(
      { edgeId: 'e1', partitionId: ResultPartitionId.of('down'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
      0,
      { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 5 },
    );
    const out = new InputGate(['down'], 2);
    const [c, d] = createLocalPortPair();
    down.attach(0, c);
    out.connect(0, d);
    const producing = (async () => {
      for (let i = 0; i < 1000; i++) await upstream.emit(i);
      upstream.finish();
    })();
    const collected: unknown[] = [];
    const consuming = (async () => {
      for (;;) {
        const buf = await out.next();
        if (buf === undefined) return;
        collected.push(...buf.records);
        buf.ack();
      }
    })();
    const result = await runOperatorChain(
      io(tdd([{ kind: 'map', id: 'm', name: 'inc', fn: fn('op-1') }]), { 'op-1': (x: number) => x + 1 }, { input: gate, outputs: [down] }),
    );
    await Promise.all([producing, consuming]);
    expect(collected).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    expect(result).toMatchObject({ recordsIn: 1000, recordsOut: 1000 });
  });

  it('lets what a user function throws through unchanged', async () => {
    const boom = new Error('user says no');
    await expect(
      runOperatorChain(
        io(
          tdd([
            { kind: 'source.sequence', id: 's', name: 'seq', from: 1, to: 3 },
            { kind: 'map', id: 'm', name: 'm', fn: fn('op-1') },
            { kind: 'sink.collect', id: 'c', name: 'c', maxRecords: 10 },
          ]),
          {
            'op-1': () => {
              throw boom;
            },
          },
        ),
      ),
    ).rejects.toBe(boom);
  });

  it('names a missing user function and the ids it found', async () => {
    await expect(
      runOperatorChain(
        io(
          tdd([
            { kind: 'source.sequence', id: 's', name: 'seq', from: 1, to: 3 },
            { kind: 'map', id: 'm', name: 'm', fn: fn('op-9') },
            { kind: 'sink.collect', id: 'c', name: 'c', maxRecords: 10 },
          ]),
          { 'op-1': () => 1 },
        ),
      ),
    ).rejects.toThrow(/user function op-9 .*found ids: op-1/);
  });
});
