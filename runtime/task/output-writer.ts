// Where a task's records leave it: its output partitions, checked against the codec first, some
// through a combiner that pre-aggregates per key.
import type { OperatorSpec } from '../jobgraph/jobgraph.js';
import { InvalidKeyError } from '../network/key-groups.js';
import { CODEC_HINT, networkRecordChecker, RecordEncodingError } from '../network/record-check.js';
import type { ResultPartition } from '../network/result-partition.js';
import { keyedCombiner, type KeyedCombiner } from './keyed-operators.js';
import { functionOf, keyedFunctions, keySelectorOf, noteErrors, type Emit, type TaskIo } from './task-io.js';
import { PARTIAL_BATCH, windowCombiner, windowFoldOf, type SendWindowPartials } from './window-combiner.js';
import type { WindowOperatorSpec } from './window-operator.js';
import type { FunctionRef } from '../jobgraph/jobgraph.js';
import type { TaskSignal } from '../core/cancellation.js';

/** A combiner before an exchange: per key (keyed operators) or per key and pane (windows). */
interface Combiner extends KeyedCombiner {
  add(record: unknown, timestamp?: number): Promise<void> | void;
  advanceWatermark?(watermark: number): Promise<void> | void;
}

/** Resolves the window's user functions for its combiner; errors they raise name the window operator. */
function windowFunctionOf(io: TaskIo, op: WindowOperatorSpec, owner: string) {
  return (ref: FunctionRef | undefined, role: string): ((a?: unknown, b?: unknown) => unknown) => {
    if (ref === undefined) throw new TypeError(`${owner}: the window operator names no ${role} function`);
    return noteErrors(functionOf(io.userFunctions, owner, ref) as (a?: unknown, b?: unknown) => unknown, op.name);
  };
}

/** What a task writes its records to: its output partitions, some through a combiner. */
export interface OutputWriter {
  /** A record of the main output, with its event timestamp if it has one. */
  readonly emit: Emit;
  /** End of input: sends what the combiners hold. */
  endOfInput(): Promise<void>;
  /** A checkpoint barrier follows: sends what the combiners hold (it belongs before the barrier). */
  prepareSnapshotPreBarrier(): Promise<void>;
  /** A watermark to every output partition (main and side outputs), after the records before it. */
  emitWatermark(watermark: number): Promise<void> | void;
  /** The task's output went idle or active again: told to every output partition. */
  emitWatermarkStatus(idle: boolean): Promise<void> | void;
}

/** Waits for every promise of `results`, if any; one alone is returned as it is (a wait for room stays one). */
function all(results: readonly (Promise<void> | undefined)[]): Promise<void> | undefined {
  let waits: Promise<void>[] | undefined;
  for (const p of results) if (p !== undefined) (waits ??= []).push(p);
  if (waits === undefined) return undefined;
  return waits.length === 1 ? waits[0] : Promise.all(waits).then(() => undefined);
}

/**
 * Writes a chain's side-output records to the output partitions of their tag (none reads it: dropped, as in
 * Flink), checking first that the codec can carry them. `producer` is the chain's last operator.
 */
export function sideOutputWriter(
  io: TaskIo,
  producer: OperatorSpec,
  counters: { recordsOut: number },
): (tag: string, record: unknown, timestamp?: number) => Promise<void> | void {
  const byTag = new Map<string, ResultPartition[]>();
  io.outputs.forEach((partition, i) => {
    const tag = io.tdd.outputs[i]?.sideOutputTag;
    if (tag === undefined) return;
    const list = byTag.get(tag) ?? [];
    list.push(partition);
    byTag.set(tag, list);
  });
  const findUnencodable = networkRecordChecker();
  return (tag, record, timestamp) => {
    const partitions = byTag.get(tag);
    if (partitions === undefined) return;
    const bad = findUnencodable(record);
    if (bad !== undefined)
      throw new RecordEncodingError(
        `a side output ('${tag}') of task ${io.tdd.taskName} got a record that cannot be sent to the next task: ${bad}; ${CODEC_HINT}`,
      );
    counters.recordsOut++;
    if (partitions.length === 1) return partitions[0]!.emit(record, timestamp);
    return all(partitions.map((p) => p.emit(record, timestamp)));
  };
}

/**
 * Writes to the task's output partitions, checking first that the codec can carry the record (msgpackr
 * drops or reshapes some values silently). `producer` names the operator whose records these are. An
 * output into a keyed operator that takes pre-aggregated input (its descriptor's `combiner`) folds the
 * records per key instead and sends `[key, partial]` pairs, in batches of at most
 * 'execution.combiner.max-keys' keys and at end of input.
 */
export function outputWriter(io: TaskIo, producer: OperatorSpec, combinerMaxKeys: number): OutputWriter {
  const outputs = io.outputs;
  const keyProblem = (e: unknown): never => {
    if (e instanceof InvalidKeyError)
      throw new InvalidKeyError(`the key selector after operator '${producer.name}' (${producer.kind}) returned an unusable key: ${e.message}`);
    throw e;
  };
  const combiners: Combiner[] = [];
  const plain: ResultPartition[] = [];
  outputs.forEach((partition, i) => {
    const d = io.tdd.outputs[i];
    // A side output's partition takes only what the chain's operators send to its tag.
    if (d?.sideOutputTag !== undefined) return;
    if (d?.combiner === undefined || d.keySelector === undefined) {
      plain.push(partition);
      return;
    }
    const op = d.combiner;
    const owner = `the pre-aggregation of ${op.kind.slice('keyed.'.length)} '${op.name}' after operator '${producer.name}'`;
    const findUnencodable = networkRecordChecker();
    const check = (pair: [key: unknown, partial: unknown]): void => {
      const bad = findUnencodable(pair);
      if (bad !== undefined) {
        throw new RecordEncodingError(
          `${owner} made a partial result that cannot be sent to the next task: ${bad.replace(/record\[1\]/g, 'partial').replace(/record\[0\]/g, 'key')}; ` +
            `accumulators and reduced values that cross the network may hold strings, numbers, booleans, null, undefined, bigints, Dates, Uint8Arrays, and arrays / plain objects of them`,
        );
      }
    };
    const send = (canonical: string, pair: [key: unknown, partial: unknown], timestamp?: number): Promise<void> | void => {
      check(pair);
      return partition.emitToKey(canonical, pair, timestamp);
    };
    const producerName = `operator '${producer.name}' (${producer.kind})`;
    const keySelector = keySelectorOf(io.tdd, io.userFunctions, d.keySelector);
    const options = { signal: io.signal, producer: producerName };
    const sendPartials = windowPartialsSender(partition, check, io.signal);
    // A combiner's failure (its key selector's included) is its keyed operator's, which runs here, in its
    // producer's task.
    const combiner: Combiner =
      op.kind === 'keyed.window'
        ? windowCombiner(op, windowFoldOf(op, windowFunctionOf(io, op, owner)), keySelector, sendPartials, combinerMaxKeys, options)
        : keyedCombiner(op, keyedFunctions(io, op, owner), keySelector, send, combinerMaxKeys, options);
    combiners.push({
      add: noteErrors(combiner.add, op.name),
      flush: noteErrors(combiner.flush, op.name),
      ...(combiner.advanceWatermark !== undefined ? { advanceWatermark: noteErrors(combiner.advanceWatermark, op.name) } : {}),
      get size() {
        return combiner.size;
      },
    });
  });
  const endOfInput = async (): Promise<void> => {
    for (const c of combiners) await c.flush();
  };
  // Pre-aggregated windows: the partials of the panes the watermark passes go first, then the watermark.
  const windowCombiners = combiners.filter((c) => c.advanceWatermark !== undefined);
  const forwardWatermark = (watermark: number): Promise<void> | undefined => all(outputs.map((o) => o.emitWatermark(watermark)));
  const emitWatermark =
    windowCombiners.length === 0
      ? forwardWatermark
      : async (watermark: number): Promise<void> => {
          for (const c of windowCombiners) await c.advanceWatermark!(watermark);
          await forwardWatermark(watermark);
        };
  const emitWatermarkStatus = (idle: boolean): Promise<void> | undefined => all(outputs.map((o) => o.emitWatermarkStatus(idle)));
  const events = { endOfInput, prepareSnapshotPreBarrier: endOfInput, emitWatermark, emitWatermarkStatus };
  const plainEmit = plainPartitionsEmit(plain, producer, keyProblem);
  const toPlain = plainEmit === undefined ? undefined : noteErrors(plainEmit, producer.name);
  if (combiners.length === 0) return { emit: toPlain ?? (() => undefined), ...events };
  // A combiner names the producer itself when a key is unusable.
  const combine: Emit =
    combiners.length === 1
      ? combiners[0]!.add
      : (r, ts) => {
          let waits: Promise<void>[] | undefined;
          for (const c of combiners) {
            const p = c.add(r, ts);
            if (p !== undefined) (waits ??= []).push(p);
          }
          if (waits !== undefined) return Promise.all(waits).then(() => undefined);
        };
  if (toPlain === undefined) return { emit: combine, ...events };
  return {
    emit: (r, ts) => {
      const a = toPlain(r, ts);
      const b = combine(r, ts);
      if (a === undefined) return b;
      if (b === undefined) return a;
      return Promise.all([a, b]).then(() => undefined);
    },
    ...events,
  };
}

/** Pairs of one subtask in a batch of partials at most: a batch stays a small part of a network buffer. */
const PARTIALS_PER_BATCH = 256;

/**
 * Sends a window combiner's partials into hash partition `partition` in batches `[PARTIAL_BATCH, keys,
 * partials]`, each of keys one subtask owns (routed by its first key's canonical form), waiting where the
 * partition asks. `check` refuses a pair the codec cannot carry.
 */
export function windowPartialsSender(
  partition: ResultPartition,
  check: (pair: [key: unknown, partial: unknown]) => void,
  signal: TaskSignal,
): SendWindowPartials {
  const n = partition.numberOfSubpartitions;
  return (canonicals, keys, partials, timestamp) => {
    const batchKeys: unknown[][] = Array.from({ length: n }, () => []);
    const batchPartials: unknown[][] = Array.from({ length: n }, () => []);
    const firsts: string[] = new Array<string>(n);
    const emit = (s: number): Promise<void> | undefined => {
      const record = [PARTIAL_BATCH, batchKeys[s]!, batchPartials[s]!];
      batchKeys[s] = [];
      batchPartials[s] = [];
      return partition.emitToKey(firsts[s]!, record, timestamp);
    };
    const from = (start: number): Promise<void> | undefined => {
      for (let i = start; i < canonicals.length; i++) {
        const key = keys[i];
        const partial = partials[i];
        check([key, partial]);
        const canonical = canonicals[i]!;
        const s = n === 1 ? 0 : partition.subpartitionOfKey(canonical);
        const ks = batchKeys[s]!;
        if (ks.length === 0) firsts[s] = canonical;
        ks.push(key);
        batchPartials[s]!.push(partial);
        if (ks.length === PARTIALS_PER_BATCH) {
          const wait = emit(s);
          if (wait !== undefined)
            return wait.then(() => {
              if (signal.aborted) throw signal.reason;
              return from(i + 1);
            });
        }
      }
      return rest(0);
    };
    const rest = (s: number): Promise<void> | undefined => {
      for (; s < n; s++) {
        if (batchKeys[s]!.length === 0) continue;
        const wait = emit(s);
        if (wait !== undefined) return wait.then(() => rest(s + 1));
      }
      return undefined;
    };
    return from(0);
  };
}

function plainPartitionsEmit(outputs: readonly ResultPartition[], producer: OperatorSpec, keyProblem: (e: unknown) => never): Emit | undefined {
  if (outputs.length === 0) return undefined;
  const findUnencodable = networkRecordChecker();
  const check = (r: unknown): void => {
    const bad = findUnencodable(r);
    if (bad !== undefined)
      throw new RecordEncodingError(
        `operator '${producer.name}' (${producer.kind}) emitted a record that cannot be sent to the next task: ${bad}; ${CODEC_HINT}`,
      );
  };
  if (outputs.length === 1) {
    const only = outputs[0]!;
    return (r, ts) => {
      check(r);
      try {
        return only.emit(r, ts);
      } catch (e) {
        return keyProblem(e);
      }
    };
  }
  return (r, ts) => {
    check(r);
    let waits: Promise<void>[] | undefined;
    try {
      for (const o of outputs) {
        const p = o.emit(r, ts);
        if (p !== undefined) (waits ??= []).push(p);
      }
    } catch (e) {
      keyProblem(e);
    }
    if (waits !== undefined) return Promise.all(waits).then(() => undefined);
  };
}
