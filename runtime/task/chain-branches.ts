// A chain that branches (Flink chains a fan-out: one operator feeding several chained operators): each
// operator passes its records and watermarks by a function call to every operator that reads it and to
// the output partitions it produces (their descriptor's `producer`). A record goes to the branches in
// order. Without object reuse (the default) every branch but the last gets its own copy of the record,
// made by the record codec before any branch runs, so a branch that changes its input in place changes
// nothing another branch sees; with object reuse (ExecutionConfig.enableObjectReuse) all get the same object.
// Operators one after the other in a chain pass the same object on, either way.
import type { OperatorSpec } from '../jobgraph/jobgraph.js';
import { copyRecord } from '../network/record-buffer.js';
import type { Emit, TaskIo } from './task-io.js';
import { TaskSetupError } from './task-io.js';
import type { SplitListener } from './timestamps-operator.js';
import type { CheckpointedOperator } from './stream-operator.js';

/** One operator of a chain as the task drives it: records in, watermarks through, end of input, open and close. */
export interface ChainLink {
  readonly processElement: Emit;
  /** A two-input head's second input. */
  readonly processElement2?: Emit;
  processWatermark(watermark: number): Promise<void> | void;
  endInput(): Promise<void> | void;
  open?(): Promise<void> | void;
  close?(): Promise<void> | void;
  /** Set on a timestamps operator right after a source: the source tells it its splits. */
  readonly splitListener?: SplitListener;
  /** The operator's checkpoint hooks, when it has any. */
  readonly checkpointed?: CheckpointedOperator;
  /** A link that takes only watermarks: a branch needs no copy of a record for it. */
  readonly ignoresRecords?: boolean;
}

/** Waits for every promise of `results`, if any. */
export function allOf(results: readonly (Promise<void> | void)[]): Promise<void> | void {
  let waits: Promise<void>[] | undefined;
  for (const p of results) if (p !== undefined) (waits ??= []).push(p);
  return waits === undefined ? undefined : Promise.all(waits).then(() => undefined);
}

/**
 * One link that passes what it gets to each of `targets`, in order; the one target itself when there is one.
 * Without `objectReuse`, each target but the last that reads records gets a copy made before any runs.
 */
export function fanOut(targets: readonly ChainLink[], objectReuse = false): ChainLink {
  if (targets.length === 1) return targets[0]!;
  const readers = targets.filter((t) => t.ignoresRecords !== true);
  const copies = !objectReuse && readers.length > 1;
  const [a, b] = readers;
  if (readers.length === 2 && targets.length === 2) {
    return {
      processElement: (r, ts) => {
        const mine = copies ? copyRecord(r) : r;
        const p = a!.processElement(mine, ts);
        const q = b!.processElement(r, ts);
        if (p === undefined) return q;
        return q === undefined ? p : Promise.all([p, q]).then(() => undefined);
      },
      processWatermark: (w) => allOf([a!.processWatermark(w), b!.processWatermark(w)]),
      endInput: () => undefined,
    };
  }
  const last = readers.length - 1;
  return {
    processElement: copies
      ? (r, ts) => {
          const records = readers.map((_, i) => (i === last ? r : copyRecord(r)));
          return allOf(readers.map((t, i) => t.processElement(records[i], ts)));
        }
      : (r, ts) => allOf(readers.map((t) => t.processElement(r, ts))),
    processWatermark: (w) => allOf(targets.map((t) => t.processWatermark(w))),
    endInput: () => undefined,
  };
}

/**
 * Builds the links of a branching chain into `links` (operators first, in chain order, then the output
 * tails) and returns the link the task feeds: the first operator's, or, after a source, what the source's
 * output goes to. `tailFor(producer, io)` makes the tail writing to the partitions of `io` (those the
 * producer's output takes); a side output's partitions take the watermarks the chain passes on, each once.
 */
export function branchingChain(
  io: TaskIo,
  chainInputs: readonly number[],
  hasSource: boolean,
  links: ChainLink[],
  tailFor: (producer: OperatorSpec, io: TaskIo) => ChainLink,
  linkFor: (op: OperatorSpec, next: ChainLink, readsInput: boolean) => ChainLink,
): ChainLink {
  const { tdd } = io;
  const ops = tdd.operators;
  if (chainInputs.length !== ops.length)
    throw new TaskSetupError(`task ${tdd.taskName}: chainInputs has ${chainInputs.length} entries for ${ops.length} operators`);
  const lastIndex = ops.length - 1;
  const outputsOf = (k: number): number[] => {
    const found: number[] = [];
    tdd.outputs.forEach((d, i) => {
      if (d.sideOutputTag === undefined && (d.producer ?? lastIndex) === k) found.push(i);
    });
    return found;
  };
  const subset = (indexes: readonly number[]): TaskIo => ({
    ...io,
    outputs: indexes.map((i) => io.outputs[i]!),
    tdd: { ...tdd, outputs: indexes.map((i) => tdd.outputs[i]!) },
  });
  const tails: ChainLink[] = [];
  // Side outputs' partitions: the watermarks the chain's tails pass on, each advance once.
  const sideIndexes = tdd.outputs.flatMap((d, i) => (d.sideOutputTag !== undefined ? [i] : []));
  let sideWatermark = -Infinity;
  const sideTail: ChainLink | undefined =
    sideIndexes.length === 0
      ? undefined
      : (() => {
          const tail = tailFor(ops[lastIndex]!, subset(sideIndexes));
          return {
            ...tail,
            ignoresRecords: true,
            processElement: () => undefined,
            processWatermark: (w: number) => {
              if (w <= sideWatermark) return;
              sideWatermark = w;
              return tail.processWatermark(w);
            },
          };
        })();
  if (sideTail !== undefined) tails.push(sideTail);
  const made: (ChainLink | undefined)[] = new Array<ChainLink | undefined>(ops.length);
  const outOf = (k: number): ChainLink => {
    const targets: ChainLink[] = [];
    for (let j = k + 1; j < ops.length; j++) if (chainInputs[j] === k) targets.push(made[j]!);
    const outputs = outputsOf(k);
    if (outputs.length > 0) {
      const tail = tailFor(ops[k]!, subset(outputs));
      tails.push(tail);
      targets.push(tail);
    }
    if (sideTail !== undefined && targets.length === 0) targets.push(sideTail);
    if (targets.length === 0) throw new TaskSetupError(`task ${tdd.taskName}: operator '${ops[k]!.name}' feeds neither an operator nor an output`);
    if (sideTail !== undefined && !targets.includes(sideTail)) {
      // The side outputs' partitions follow the watermarks of every branch (each advance once).
      targets.push({
        ignoresRecords: true,
        processElement: () => undefined,
        processWatermark: (w) => sideTail.processWatermark(w),
        endInput: () => undefined,
      });
    }
    return fanOut(targets, tdd.objectReuse === true);
  };
  const start = hasSource ? 1 : 0;
  for (let k = ops.length - 1; k >= start; k--) made[k] = linkFor(ops[k]!, outOf(k), k === 0);
  const entry = hasSource ? outOf(0) : made[0]!;
  for (let k = start; k < ops.length; k++) links.push(made[k]!);
  links.push(...tails);
  return entry;
}
