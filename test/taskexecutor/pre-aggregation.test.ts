// Pre-aggregation (the combiner) in the task runtime: producers fold records per key before a hash
// exchange and send [key, partial] pairs, which the keyed operator merges. Every case runs the same
// input through real producer and consumer chains twice — with pre-aggregation and without — and the
// results must be the same; partials never have the key selector applied to them; the key budget
// bounds what a producer holds.
import { describe, expect, it } from 'vitest';
import { JobId, ResultPartitionId } from '../../runtime/core/ids.js';
import type { FunctionRef, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { createLocalPortPair } from '../../runtime/network/channel-port.js';
import { InputGate } from '../../runtime/network/input-gate.js';
import { ResultPartition } from '../../runtime/network/result-partition.js';
import { keyedCombiner, keyedStep, type KeyedOperatorSpec } from '../../runtime/task/keyed-operators.js';
import { runOperatorChain } from '../../runtime/task/operator-chain.js';
import type { ResultPartitionDescriptor, TaskDeploymentDescriptor, TaskResult } from '../../runtime/protocol/task-deployment.js';
import { taskDeployment } from '../support/task-deployment.js';

const NET = { segmentSizeBytes: 512, maxBacklogBuffers: 2, bufferTimeoutMs: 5 };
const KEY_GROUPS = 128;
const fn = (operatorId: string, role?: string): FunctionRef =>
  role === undefined ? { export: 'default', operatorId } : { export: 'default', operatorId, role };

function tdd(operators: OperatorSpec[], extra: Partial<TaskDeploymentDescriptor> = {}): TaskDeploymentDescriptor {
  return taskDeployment(operators, { jobId: JobId.of('job-pre'), vertexId: 'v', taskName: 'task (1/1)', ...extra });
}

interface Run {
  /** Every consumer subtask's output, in subtask order. */
  readonly outputs: unknown[][];
  readonly producers: TaskResult[];
  readonly consumers: TaskResult[];
}

/**
 * `inputs[i]` is what producer i emits (a collection source); a hash exchange routes by `keyed`'s key
 * selector to `consumers` subtasks running `keyed` then a collect sink. With `preAggregate` the
 * producers get the consumer operator as their partitions' combiner, as the JobMaster deploys them.
 */
async function run(
  keyed: KeyedOperatorSpec,
  fns: Record<string, Function>,
  inputs: unknown[][],
  options: { preAggregate: boolean; consumers?: number; maxKeys?: number },
): Promise<Run> {
  const consumers = options.consumers ?? 2;
  const op: KeyedOperatorSpec = options.preAggregate ? { ...keyed, preAggregate: true } : { ...keyed };
  if (!options.preAggregate) delete (op as { preAggregate?: boolean }).preAggregate;
  const userFunctions = new Map<string, Function>(Object.entries(fns));
  const gates = Array.from(
    { length: consumers },
    (_, c) =>
      new InputGate(
        inputs.map((_, p) => `p${p}-c${c}`),
        2,
      ),
  );
  const producerRuns = inputs.map((records, p) => {
    const descriptor: ResultPartitionDescriptor = {
      edgeId: 'e',
      partitionId: ResultPartitionId.of(`part-${p}`),
      partitionType: 'pipelined',
      partitioner: 'hash',
      numberOfSubpartitions: consumers,
      keySelector: op.key,
      keyGroups: KEY_GROUPS,
      ...(options.preAggregate ? { combiner: op } : {}),
    };
    const partition = new ResultPartition(descriptor, p, { ...NET, keySelector: fns[`${op.id}.key`] as (r: unknown) => unknown });
    gates.forEach((gate, c) => {
      const [a, b] = createLocalPortPair();
      partition.attach(c, a);
      gate.connect(p, b);
    });
    const source: OperatorSpec = { kind: 'source.collection', id: `src${p}`, name: `source ${p}`, fn: fn(`src${p}`) };
    userFunctions.set(`src${p}`, () => records);
    return runOperatorChain({
      tdd: tdd([source], { outputs: [descriptor], subtaskIndex: 0, parallelism: 1 }),
      userFunctions,
      signal: new AbortController().signal,
      outputs: [partition],
      input: undefined,
      requestSplit: async () => null,
      ...(options.maxKeys !== undefined ? { combinerMaxKeys: options.maxKeys } : {}),
    });
  });
  const consumerRuns = gates.map((gate, c) =>
    runOperatorChain({
      tdd: tdd([op, { kind: 'sink.collect', id: 'out', name: 'collect', maxRecords: 1_000_000 }], { subtaskIndex: c, parallelism: consumers }),
      userFunctions,
      signal: new AbortController().signal,
      outputs: [],
      input: gate,
      requestSplit: async () => null,
    }),
  );
  const [producers, consumerResults] = await Promise.all([Promise.all(producerRuns), Promise.all(consumerRuns)]);
  return { outputs: consumerResults.map((r) => [...(r.collected ?? [])]), producers, consumers: consumerResults };
}

const sorted = (xs: unknown[]): unknown[] => [...xs].sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
const received = (r: Run): number => r.consumers.reduce((n, c) => n + c.recordsIn, 0);

/** Runs with and without pre-aggregation; asserts equal outputs per consumer subtask and returns both. */
async function both(keyed: KeyedOperatorSpec, fns: Record<string, Function>, inputs: unknown[][], maxKeys?: number): Promise<{ combined: Run; plain: Run }> {
  const combined = await run(keyed, fns, inputs, { preAggregate: true, ...(maxKeys !== undefined ? { maxKeys } : {}) });
  const plain = await run(keyed, fns, inputs, { preAggregate: false });
  expect(combined.outputs.map(sorted)).toEqual(plain.outputs.map(sorted));
  return { combined, plain };
}

const words = (n: number, seed: number): string[] => Array.from({ length: n }, (_, i) => `w${(i * 7 + seed * 13) % 23}`);

describe('pre-aggregation before a hash exchange', () => {
  it('sum of a tuple field (wordcount): the same counts, and one partial per key per producer crosses', async () => {
    const inputs = [words(400, 1), words(300, 2), words(250, 3)].map((ws) => ws.map((w) => [w, 1]));
    const { combined, plain } = await both(
      { kind: 'keyed.sum', id: 'k', name: 'count', key: fn('k', 'key'), field: 1, emit: 'final' },
      { 'k.key': ([w]: [string]) => w },
      inputs,
    );
    const counts = new Map<string, number>();
    for (const [w] of inputs.flat() as [string][]) counts.set(w, (counts.get(w) ?? 0) + 1);
    expect(new Map(combined.outputs.flat() as [string, number][])).toEqual(counts);
    expect(received(plain)).toBe(950);
    expect(received(combined)).toBe(inputs.reduce((n, recs) => n + new Set(recs.map((r) => r[0])).size, 0));
    // The producers count the records they emitted, not the partials.
    expect(combined.producers.map((p) => p.recordsOut)).toEqual([400, 300, 250]);
  });

  it('keeps the key with its partial: keyBy(n => n % 10).sum() of 1..2000 sums per residue, never re-keying a partial sum', async () => {
    const numbers = Array.from({ length: 2000 }, (_, i) => i + 1);
    const inputs = [numbers.slice(0, 900), numbers.slice(900)];
    const { combined } = await both(
      { kind: 'keyed.sum', id: 'k', name: 'sum', key: fn('k', 'key'), emit: 'final' },
      { 'k.key': (n: number) => n % 10 },
      inputs,
    );
    const expected = Array.from({ length: 10 }, (_, r) => numbers.filter((n) => n % 10 === r).reduce((s, n) => s + n, 0));
    expect(sorted(combined.outputs.flat())).toEqual(sorted(expected));
    // A partial sum's own residue is not its key's: the producers' partials for residue 1 are 89,200 and 111,100.
    expect(received(combined)).toBe(20);
  });

  it('sum by a selector gives [key, sum] with the key as the selector returned it (composite keys in any field order)', async () => {
    const rec = (i: number) => ({ k: i % 2 === 0 ? { a: i % 3, b: 'x' } : { b: 'x', a: i % 3 }, v: i });
    const inputs = [Array.from({ length: 60 }, (_, i) => rec(i)), Array.from({ length: 40 }, (_, i) => rec(i + 60))];
    const { combined } = await both(
      { kind: 'keyed.sum', id: 'k', name: 'sum', key: fn('k', 'key'), selector: fn('k', 'selector'), emit: 'final' },
      { 'k.key': (r: { k: unknown }) => r.k, 'k.selector': (r: { v: number }) => r.v },
      inputs,
    );
    const sums = new Map<number, number>();
    for (let i = 0; i < 100; i++) sums.set(i % 3, (sums.get(i % 3) ?? 0) + i);
    expect(new Map((combined.outputs.flat() as [{ a: number }, number][]).map(([k, s]) => [k.a, s]))).toEqual(sums);
  });

  it('reduce (associative) and aggregate with merge: the same results; aggregate accumulators cross as plain data', async () => {
    const inputs = [Array.from({ length: 300 }, (_, i) => ({ k: `k${i % 7}`, v: i })), Array.from({ length: 200 }, (_, i) => ({ k: `k${i % 5}`, v: -i }))];
    const key = (r: { k: string }) => r.k;
    await both(
      { kind: 'keyed.reduce', id: 'k', name: 'max', key: fn('k', 'key'), fn: fn('k'), emit: 'final' },
      { 'k.key': key, k: (a: { v: number }, b: { v: number }) => (b.v > a.v ? b : a) },
      inputs,
    );
    const avg = {
      'k.key': key,
      'k.createAccumulator': () => ({ sum: 0, n: 0 }),
      'k.add': (r: { v: number }, acc: { sum: number; n: number }) => ({ sum: acc.sum + r.v, n: acc.n + 1 }),
      'k.merge': (a: { sum: number; n: number }, b: { sum: number; n: number }) => ({ sum: a.sum + b.sum, n: a.n + b.n }),
      'k.getResult': (acc: { sum: number; n: number }) => [acc.sum, acc.n],
    };
    const aggregate: KeyedOperatorSpec = {
      kind: 'keyed.aggregate',
      id: 'k',
      name: 'avg',
      key: fn('k', 'key'),
      createAccumulator: fn('k', 'createAccumulator'),
      add: fn('k', 'add'),
      getResult: fn('k', 'getResult'),
      merge: fn('k', 'merge'),
      emit: 'final',
    };
    const { combined } = await both(aggregate, avg, inputs);
    expect(received(combined)).toBe(7 + 5);
    const k0 = inputs.flat().filter((r) => r.k === 'k0');
    expect(combined.outputs.flat()).toContainEqual([k0.reduce((s, r) => s + r.v, 0), k0.length]);
  });

  it('sends its partials and starts over past the key budget: more partials cross, the result is the same', async () => {
    // Skewed, as words are: three keys make most records, twenty more turn up now and then.
    const skewed = (seed: number): [string, number][] => Array.from({ length: 500 }, (_, i) => [`w${i % 5 === 0 ? (i * 7 + seed) % 23 : i % 3}`, 1]);
    const inputs = [skewed(1), skewed(4)];
    const sum: KeyedOperatorSpec = { kind: 'keyed.sum', id: 'k', name: 'count', key: fn('k', 'key'), field: 1, emit: 'final' };
    const fns = { 'k.key': ([w]: [string]) => w };
    const roomy = await both(sum, fns, inputs);
    const tight = await both(sum, fns, inputs, 3);
    const none = await both(sum, fns, inputs, 0);
    expect(received(roomy.combined)).toBe(new Set(inputs[0]!.map((r) => r[0])).size + new Set(inputs[1]!.map((r) => r[0])).size);
    expect(received(tight.combined)).toBeGreaterThan(46);
    expect(received(tight.combined)).toBeLessThan(1000);
    // A budget of 0 sends every record on as its own partial.
    expect(received(none.combined)).toBe(1000);
  });

  it('never holds more keys than the budget, and flushes what it holds at the end', async () => {
    const sent: [string, [unknown, unknown]][] = [];
    const sum: KeyedOperatorSpec = { kind: 'keyed.sum', id: 'k', name: 'count', key: fn('k', 'key'), emit: 'final', preAggregate: true };
    const combiner = keyedCombiner(
      sum,
      { key: (n: number) => `k${n % 10}` },
      (n) => `k${(n as number) % 10}`,
      (canonical, pair) => void sent.push([canonical, pair]),
      4,
    );
    let most = 0;
    for (let i = 0; i < 100; i++) {
      await combiner.add(i);
      most = Math.max(most, combiner.size);
    }
    expect(most).toBeLessThanOrEqual(4);
    await combiner.flush();
    expect(combiner.size).toBe(0);
    const totals = new Map<string, number>();
    for (const [canonical, [key, partial]] of sent) {
      expect(canonical).toBe(key);
      totals.set(key as string, (totals.get(key as string) ?? 0) + (partial as number));
    }
    expect(totals).toEqual(
      new Map(Array.from({ length: 10 }, (_, r) => [`k${r}`, Array.from({ length: 10 }, (_, j) => r + 10 * j).reduce((s, n) => s + n, 0)])),
    );
  });

  it('merges pre-aggregated pairs only for final results: running updates apply the key selector to every record', async () => {
    const seen: unknown[] = [];
    const op: KeyedOperatorSpec = { kind: 'keyed.sum', id: 'k', name: 'sum', key: fn('k', 'key'), emit: 'updates', preAggregate: true };
    const step = keyedStep(op, { key: (n: number) => n % 2 }, (r) => void seen.push(r));
    for (const n of [1, 2, 3, 4]) await step.emit(n);
    expect(seen).toEqual([1, 2, 4, 6]);
  });

  it('fails the producer, naming the operator, when an accumulator cannot cross the network', async () => {
    const aggregate: KeyedOperatorSpec = {
      kind: 'keyed.aggregate',
      id: 'k',
      name: 'distinct',
      key: fn('k', 'key'),
      createAccumulator: fn('k', 'createAccumulator'),
      add: fn('k', 'add'),
      getResult: fn('k', 'getResult'),
      merge: fn('k', 'merge'),
      emit: 'final',
    };
    const fns = {
      'k.key': (w: string) => w,
      'k.createAccumulator': () => new Set<string>(),
      'k.add': (w: string, acc: Set<string>) => acc.add(w),
      'k.merge': (a: Set<string>, b: Set<string>) => new Set([...a, ...b]),
      'k.getResult': (acc: Set<string>) => acc.size,
    };
    await expect(run(aggregate, fns, [['a', 'b', 'a']], { preAggregate: true, consumers: 1 })).rejects.toThrow(
      /the pre-aggregation of aggregate 'distinct' after operator 'source 0' made a partial result that cannot be sent to the next task: a Set at partial/,
    );
  });
});
