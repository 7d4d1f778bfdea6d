// Keyed operators, union inputs, codec errors and empty input in the task runtime; a key selector that
// throws, through a real slot worker runtime with a bundled job library.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleJobFile } from '../../runtime/api/library.js';
import type { ErrorInfo } from '../../runtime/core/errors.js';
import { ExecutionAttemptId, JobId, ResourceId, ResultPartitionId } from '../../runtime/core/ids.js';
import type { KeyedEmit, OperatorSpec, Partitioner } from '../../runtime/jobgraph/jobgraph.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition } from '../../runtime/network/result-partition.js';
import { runOperatorChain, type TaskIo } from '../../runtime/task/operator-chain.js';
import { SlotWorkerRuntime } from '../../runtime/task/slot-worker-runtime.js';
import type { TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import type { WorkerToMain } from '../../runtime/task/worker-protocol.js';
import { taskDeployment } from '../support/task-deployment.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-keyed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NET = { segmentSizeBytes: 256, maxBacklogBuffers: 2, bufferTimeoutMs: 5 };
const fn = (operatorId: string, role?: string) => (role === undefined ? { export: 'default', operatorId } : { export: 'default', operatorId, role });

function tdd(operators: OperatorSpec[], extra: Partial<TaskDeploymentDescriptor> = {}): TaskDeploymentDescriptor {
  return taskDeployment(operators, { jobId: JobId.of('job-keyed'), taskName: 'keyed (1/1)', ...extra });
}

function io(t: TaskDeploymentDescriptor, fns: Record<string, Function>, more: Partial<TaskIo> = {}): TaskIo {
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

/** An input gate with one channel per list, each fed by its own upstream partition that writes the list and ends. */
function feed(...lists: unknown[][]): { gate: InputGate; done: Promise<void> } {
  const gate = new InputGate(
    lists.map((_, i) => `up-${i}`),
    2,
  );
  const writers = lists.map(async (records, i) => {
    const up = new ResultPartition(
      { edgeId: `e${i}`, partitionId: ResultPartitionId.of(`up-${i}`), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
      0,
      NET,
    );
    const [a, b] = createLocalPortPair();
    up.attach(0, a);
    gate.connect(i, b);
    for (const r of records) await up.emit(r);
    up.finish();
  });
  return { gate, done: Promise.all(writers).then(() => undefined) };
}

/** Runs one keyed operator (then a collect sink) over `records`; returns what it emitted. */
async function runKeyed(op: OperatorSpec, fns: Record<string, Function>, ...lists: unknown[][]): Promise<unknown[]> {
  const { gate, done } = feed(...lists);
  const result = await runOperatorChain(io(tdd([op, { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 1_000_000 }]), fns, { input: gate }));
  await done;
  return [...(result.collected ?? [])];
}

const words = ['b', 'a', 'c', 'a', 'b', 'a'];
const keyedSpec = (kind: 'keyed.reduce' | 'keyed.sum' | 'keyed.aggregate', emit: KeyedEmit, extra: object = {}): OperatorSpec =>
  ({ kind, id: 'k', name: 'agg', key: fn('k', 'key'), emit, ...extra }) as OperatorSpec;

describe('keyed operators', () => {
  it('sum of numbers: one final value per key at end of input, or a running update per record', async () => {
    const records = words.map((w, i) => ({ w, n: i + 1 }));
    const fns = { 'k.key': (r: { w: string }) => r.w, 'k.selector': (r: { n: number }) => r.n };
    const final = await runKeyed(keyedSpec('keyed.sum', 'final', { selector: fn('k', 'selector') }), fns, records);
    expect(final).toEqual([
      ['b', 1 + 5],
      ['a', 2 + 4 + 6],
      ['c', 3],
    ]);
    const updates = await runKeyed(keyedSpec('keyed.sum', 'updates', { selector: fn('k', 'selector') }), fns, records);
    expect(updates).toEqual([
      ['b', 1],
      ['a', 2],
      ['c', 3],
      ['a', 6],
      ['b', 6],
      ['a', 12],
    ]);
  });

  it('sum of plain numbers, and of a tuple index or object field (the first record with the sum in that field)', async () => {
    expect(await runKeyed(keyedSpec('keyed.sum', 'final'), { 'k.key': (n: number) => n % 2 }, [1, 2, 3, 4, 5])).toEqual([9, 6]);
    const tuples = words.map((w): [string, number, string] => [w, 1, `first-${w}`]);
    expect(await runKeyed(keyedSpec('keyed.sum', 'final', { field: 1 }), { 'k.key': (t: unknown[]) => t[0] }, tuples)).toEqual([
      ['b', 2, 'first-b'],
      ['a', 3, 'first-a'],
      ['c', 1, 'first-c'],
    ]);
    const objects = words.map((w, i) => ({ w, count: 2, i }));
    expect(await runKeyed(keyedSpec('keyed.sum', 'updates', { field: 'count' }), { 'k.key': (o: { w: string }) => o.w }, objects.slice(0, 4))).toEqual([
      { w: 'b', count: 2, i: 0 },
      { w: 'a', count: 2, i: 1 },
      { w: 'c', count: 2, i: 2 },
      { w: 'a', count: 4, i: 1 },
    ]);
  });

  it('reduce and aggregate, keyed by composite keys whatever their field order', async () => {
    const records = [
      { k: { x: 1, y: 'a' }, v: 1 },
      { k: { y: 'a', x: 1 }, v: 10 },
      { k: { x: 2, y: 'a' }, v: 100 },
    ];
    const key = (r: { k: unknown }) => r.k;
    const reduced = await runKeyed(
      { kind: 'keyed.reduce', id: 'k', name: 'r', key: fn('k', 'key'), fn: fn('k'), emit: 'final' },
      {
        'k.key': key,
        k: (a: { v: number }, b: { v: number }) => ({ ...a, v: a.v + b.v }),
      },
      records,
    );
    expect(reduced).toEqual([
      { k: { x: 1, y: 'a' }, v: 11 },
      { k: { x: 2, y: 'a' }, v: 100 },
    ]);
    const averaged = await runKeyed(
      {
        kind: 'keyed.aggregate',
        id: 'k',
        name: 'avg',
        key: fn('k', 'key'),
        createAccumulator: fn('k', 'createAccumulator'),
        add: fn('k', 'add'),
        getResult: fn('k', 'getResult'),
        emit: 'updates',
      },
      {
        'k.key': key,
        'k.createAccumulator': () => ({ s: 0, n: 0 }),
        'k.add': (r: { v: number }, acc: { s: number; n: number }) => ({ s: acc.s + r.v, n: acc.n + 1 }),
        'k.getResult': (acc: { s: number; n: number }) => acc.s / acc.n,
      },
      records,
    );
    expect(averaged).toEqual([1, 5.5, 100]);
  });

  it('fails with a message naming the operator, key and type when a sum meets a non-number', async () => {
    await expect(runKeyed(keyedSpec('keyed.sum', 'final', { field: 'n' }), { 'k.key': () => 'the-key' }, [{ n: 1 }, { n: '2' }])).rejects.toThrow(
      /sum 'agg' adds numbers, but field "n" of a record for key "the-key" is string/,
    );
    await expect(runKeyed(keyedSpec('keyed.sum', 'final'), { 'k.key': () => 1 }, [1, 'x'])).rejects.toThrow(
      /sum 'agg' adds numbers, but a record for key 1 is string/,
    );
    await expect(runKeyed(keyedSpec('keyed.sum', 'final'), { 'k.key': (r: unknown) => new Map([[r, 1]]) }, [1])).rejects.toThrow(
      /the key selector of keyed.sum 'agg' returned an unusable key: the key contains a Map, which has no stable value/,
    );
  });

  it('reads several input edges (a union) through one combined input', async () => {
    const left = Array.from({ length: 500 }, (_, i) => `l${i % 10}`);
    const right = Array.from({ length: 300 }, (_, i) => `l${i % 5}`);
    const counts = await runKeyed(
      keyedSpec('keyed.sum', 'final', { selector: fn('k', 'selector') }),
      { 'k.key': (w: string) => w, 'k.selector': () => 1 },
      left,
      right,
    );
    expect(new Map(counts as [string, number][])).toEqual(new Map(Array.from({ length: 10 }, (_, i) => [`l${i}`, 50 + (i < 5 ? 60 : 0)])));
  });

  it('an empty input gives no output, an empty part file, and the task finishes', async () => {
    const { gate, done } = feed([], []);
    const staging = join(dir, 'empty-staging');
    const result = await runOperatorChain(
      io(
        tdd([keyedSpec('keyed.sum', 'final'), { kind: 'sink.textFile', id: 'w', name: 'write', path: '/ignored' }], { sinkStagingDir: staging }),
        { 'k.key': (n: number) => n },
        { input: gate },
      ),
    );
    await done;
    expect(result).toMatchObject({ recordsIn: 0, recordsOut: 0 });
    expect(readFileSync(join(staging, 'part-0'), 'utf8')).toBe('');
  });
});

describe('generated source', () => {
  it('gives subtask i of p the indexes i, i + p, … below count, and stops an unbounded one on cancel', async () => {
    const collect: OperatorSpec = { kind: 'sink.collect', id: 'c', name: 'collect', maxRecords: 100 };
    const gen = (extra: object): OperatorSpec => ({ kind: 'source.generate', id: 'g', name: 'gen', fn: fn('g'), ...extra }) as OperatorSpec;
    const bounded = await runOperatorChain(io(tdd([gen({ count: 10 }), collect], { subtaskIndex: 1, parallelism: 3 }), { g: (i: number) => `r${i}` }));
    expect(bounded.collected).toEqual(['r1', 'r4', 'r7']);
    const abort = new AbortController();
    let made = 0;
    const endless = runOperatorChain(
      io(tdd([gen({ ratePerSecond: 2000 }), collect]), { g: (i: number) => (++made === 50 ? abort.abort() : i) }, { signal: abort.signal }),
    );
    await expect(endless).rejects.toMatchObject({ code: 'TASK_CANCELED' });
    expect(made).toBeGreaterThanOrEqual(50);
  });
});

describe('records the codec cannot carry', () => {
  class Celsius {
    constructor(readonly degrees: number) {}
  }
  const cyclic: Record<string, unknown> = { name: 'loop' };
  cyclic['self'] = cyclic;
  const cases: [string, unknown, RegExp][] = [
    ['a function', () => 1, /a function at the record itself \(it would arrive as undefined\)/],
    ['a function inside', { a: [1, function f() {}] }, /a function at record\.a\[1\]/],
    ['a symbol', Symbol('s'), /a symbol at the record itself/],
    ['a symbol-keyed property', { [Symbol('k')]: 1, a: 2 }, /a symbol-keyed property on the record itself \(it would be dropped\)/],
    ['a cycle', cyclic, /a cycle: record\.self refers back to one of its own containers/],
    ['a Map', { m: new Map([[1, 2]]) }, /a Map at record\.m \(it would arrive as a plain object; send \[\.\.\.map\.entries\(\)\] instead\)/],
    ['a Set', [new Set([1])], /a Set at record\[0\] \(it would arrive as an array/],
    ['a class instance', new Celsius(21), /a Celsius at the record itself \(only plain objects keep their shape/],
    ['an Error', { e: new Error('x') }, /an? Error at record\.e/],
  ];
  for (const [what, value, message] of cases) {
    it(`fails the task naming the operator and ${what}`, async () => {
      const out = new ResultPartition(
        { edgeId: 'o', partitionId: ResultPartitionId.of('out'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
        0,
        NET,
      );
      const run = runOperatorChain(
        io(
          tdd([
            { kind: 'source.sequence', id: 's', name: 'seq', from: 1, to: 3 },
            { kind: 'map', id: 'm', name: 'make value', fn: fn('op-1') },
          ]),
          { 'op-1': (n: number) => (n === 2 ? value : n) },
          { outputs: [out] },
        ),
      );
      await expect(run).rejects.toThrow(/operator 'make value' \(map\) emitted a record that cannot be sent to the next task/);
      await expect(run).rejects.toThrow(message);
      await expect(run).rejects.toMatchObject({ code: 'RECORD_ENCODING' });
    });
  }

  it('fails the task on symbol-keyed properties that appear only after many good records', async () => {
    const out = new ResultPartition(
      { edgeId: 'o', partitionId: ResultPartitionId.of('out'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
      0,
      { ...NET, maxBacklogBuffers: 1_000_000 },
    );
    const tag = Symbol('tag');
    const run = runOperatorChain(
      io(
        tdd([
          { kind: 'source.sequence', id: 's', name: 'seq', from: 1, to: 20_000 },
          { kind: 'map', id: 'm', name: 'make value', fn: fn('op-1') },
        ]),
        { 'op-1': (n: number) => (n > 5_000 ? { n, [tag]: true } : { n }) },
        { outputs: [out] },
      ),
    );
    await expect(run).rejects.toThrow(
      /operator 'make value' \(map\) emitted a record that cannot be sent to the next task: a symbol-keyed property on the record itself/,
    );
  });

  it('carries BigInts (of any size), Dates, Uint8Arrays, undefined and NaN faithfully', async () => {
    const values = [12345678901234567890123n, -5n, new Date(86_400_000), new Uint8Array([1, 2, 3]), { u: undefined, n: null }, [undefined, 0.5, NaN]];
    const gate = new InputGate(['out'], 2);
    const out = new ResultPartition(
      { edgeId: 'o', partitionId: ResultPartitionId.of('out'), partitionType: 'pipelined', partitioner: 'forward', numberOfSubpartitions: 1 },
      0,
      NET,
    );
    const [a, b] = createLocalPortPair();
    out.attach(0, a);
    gate.connect(0, b);
    await runOperatorChain(io(tdd([{ kind: 'source.collection', id: 's', name: 'values', fn: fn('op-1') }]), { 'op-1': () => values }, { outputs: [out] }));
    const received: unknown[] = [];
    for (let buf = await gate.next(); buf !== undefined; buf = await gate.next()) {
      received.push(...buf.records);
      buf.ack();
    }
    expect(received).toEqual(values);
    expect(received[3]).toBeInstanceOf(Uint8Array);
  });

  it('refuses in a collect sink what cannot travel as JSON to the client', async () => {
    const run = runOperatorChain(
      io(
        tdd([
          { kind: 'source.collection', id: 's', name: 'values', fn: fn('op-1') },
          { kind: 'sink.collect', id: 'c', name: 'results', maxRecords: 10 },
        ]),
        { 'op-1': () => [1, { big: 10n }] },
      ),
    );
    await expect(run).rejects.toThrow(/collect sink 'results' received a record it cannot return to the client: a bigint at record\.big/);
  });
});

describe('a key selector that throws, in the slot worker runtime', () => {
  it('fails the task with the user message and stack, and names the operator for an unusable key', async () => {
    const jobFile = join(dir, 'keyjob.ts');
    writeFileSync(
      jobFile,
      `import { defineJob } from 'floe';
export default defineJob('keys', (env, args) => {
  env.fromCollection([1, 2, 3]).keyBy(function pickKey(n) {
    if (args[0] === 'throw' && n === 2) throw new Error('cannot key record 2');
    return args[0] === 'map' ? new Map() : n;
  }).sum().collect();
});
`,
    );
    const { code, sha256 } = await bundleJobFile(jobFile);
    const run = async (arg: string, partitioner: Partitioner = 'hash'): Promise<{ state: string; error?: ErrorInfo }> => {
      const { port1, port2 } = new MessageChannel();
      new SlotWorkerRuntime(port1);
      const attemptId = ExecutionAttemptId.random();
      const terminal = new Promise<{ state: string; error?: ErrorInfo }>((resolve) => {
        port2.on('message', (m: WorkerToMain) => {
          if (m.type === 'state' && (m.state === 'FAILED' || m.state === 'FINISHED' || m.state === 'CANCELED'))
            resolve({ state: m.state, ...(m.error ? { error: m.error } : {}) });
        });
      });
      const descriptor = tdd([{ kind: 'source.collection', id: 'op-1', name: 'fromCollection', fn: fn('op-1') }], {
        attemptId,
        library: { sha256 },
        program: { export: 'default', args: [arg] },
        outputs: [
          {
            edgeId: 'e-1',
            partitionId: ResultPartitionId.of(`p-${arg}`),
            partitionType: 'pipelined',
            partitioner,
            numberOfSubpartitions: 2,
            keySelector: fn('op-2', 'key'),
            keyGroups: 128,
          },
        ],
      });
      port2.postMessage({
        type: 'deploy',
        tdd: descriptor,
        library: code,
        settings: { segmentSizeBytes: 1024, buffersPerChannel: 2, bufferTimeoutMs: 5, resourceId: ResourceId.of('te'), libraryCacheDir: join(dir, 'cache') },
      });
      try {
        return await terminal;
      } finally {
        port1.close();
        port2.close();
      }
    };
    const thrown = await run('throw');
    expect(thrown.state).toBe('FAILED');
    expect(thrown.error).toMatchObject({ code: 'USER_CODE', message: 'cannot key record 2' });
    expect(thrown.error?.stack).toMatch(/pickKey/);
    const badKey = await run('map');
    expect(badKey.state).toBe('FAILED');
    expect(badKey.error?.message).toMatch(
      /the key selector after operator 'fromCollection' \(source.collection\) returned an unusable key: the key contains a Map/,
    );
    expect(existsSync(join(dir, 'cache'))).toBe(true);
  });
});
