// The task runtime inside a slot worker: turns a vertex's operator chain into one fused function
// (source first, then map / flatMap / filter, ending in a sink or the task's output partitions) and
// drives it from its source or its input channels.
import { systemClock } from '../core/clock.js';
import { CONFIG_OPTIONS } from '../core/config.js';
import { functionKey, type FunctionRef, type OperatorSpec } from '../jobgraph/jobgraph.js';
import { keyGroupRange } from '../network/key-groups.js';
import type { TaskResult } from '../protocol/task-deployment.js';
import { keyedStep, type KeyedOperatorSpec, type KeyedStep } from './keyed-operators.js';
import { Mailbox } from './mailbox.js';
import { ONE_INPUT_OPERATORS, TWO_INPUT_OPERATORS, type OperatorFactory } from './operator-factories.js';
import { outputWriter, sideOutputWriter, type OutputWriter } from './output-writer.js';
import { openSink, type Sink } from './sinks.js';
import { runSource } from './sources.js';
import { SourceSplitState } from './source-state.js';
import { createKeyedStateBackend } from './state/state-backends.js';
import type { KeyedStateBackend } from './state/keyed-state-backend.js';
import { defaultMaxParallelism } from './state/keyed-state-backend.js';
import { branchingChain, allOf, type ChainLink } from './chain-branches.js';
import { processInputs } from './stream-input-processor.js';
import type { CheckpointedOperator, KeyedOperatorContext, OneInputOperator, Output, StreamOperatorContext, TwoInputOperator } from './stream-operator.js';
import { operatorIdOf, SourceStoppedError, SubtaskCheckpointCoordinator, type ChainOperatorCheckpoint } from './checkpointing.js';
import { readChannelState, restoreOutputBuffers, takeOvertakenBuffers, type ChannelState } from './channel-state.js';
import { mailboxProcessingTimeService } from './timer-service.js';
import type { SplitListener } from './timestamps-operator.js';
import { newChainCounters, type ChainCounters } from './task-io-metrics.js';
import {
  checkCanceled,
  functionOf,
  isThenable,
  keyedFunctions,
  noteErrors,
  raisedBy,
  TaskCanceledError,
  TaskSetupError,
  userFunction,
  type Emit,
  type TaskIo,
} from './task-io.js';

export { TaskCanceledError, TaskSetupError, keySelectorOf, type Emit, type TaskIo } from './task-io.js';
export { sequenceRange } from './sources.js';

function keyedOperator(io: TaskIo, op: KeyedOperatorSpec, next: Emit): KeyedStep {
  return keyedStep(op, keyedFunctions(io, op, `operator '${op.name}' (${op.kind})`), next, io.signal);
}

/** The user function of `op`, and what marks an error it throws (or its promise rejects with) as raised in `op`. */
function userStepParts(
  io: TaskIo,
  op: OperatorSpec & { fn: FunctionRef },
): { fn: (r: unknown) => unknown; raised: (e: unknown) => unknown; rejected: (e: unknown) => never } {
  const fn = functionOf(io.userFunctions, `operator '${op.name}' (${op.kind})`, op.fn) as (r: unknown) => unknown;
  const name = op.name;
  const raised = (e: unknown): unknown => raisedBy(e, name);
  return {
    fn,
    raised,
    rejected: (e) => {
      throw raised(e);
    },
  };
}

// A map and a filter call their user function themselves (not through noteErrors): one call and one
// promise check per record.
function mapStep(io: TaskIo, op: OperatorSpec & { fn: FunctionRef }, next: Emit): Emit {
  const { fn, raised, rejected } = userStepParts(io, op);
  return (r, ts) => {
    let out: unknown;
    try {
      out = fn(r);
    } catch (e) {
      throw raised(e);
    }
    return isThenable(out) ? Promise.resolve(out).then((o) => next(o, ts), rejected) : next(out, ts);
  };
}

function filterStep(io: TaskIo, op: OperatorSpec & { fn: FunctionRef }, next: Emit): Emit {
  const { fn, raised, rejected } = userStepParts(io, op);
  return (r, ts) => {
    let keep: unknown;
    try {
      keep = fn(r);
    } catch (e) {
      throw raised(e);
    }
    if (isThenable(keep)) return Promise.resolve(keep).then((k) => (k ? next(r, ts) : undefined), rejected);
    return keep ? next(r, ts) : undefined;
  };
}

function flatMapStep(fn: Function, name: string, next: Emit): Emit {
  const drain = async (it: Iterator<unknown>, ts: number | undefined): Promise<void> => {
    for (;;) {
      const step = it.next();
      if (step.done === true) return;
      await next(step.value, ts);
    }
  };
  const drainArray = async (out: readonly unknown[], from: number, ts: number | undefined): Promise<void> => {
    for (let i = from; i < out.length; i++) await next(out[i], ts);
  };
  const iterate = (out: unknown, ts: number | undefined): Promise<void> | void => {
    if (Array.isArray(out)) {
      for (let i = 0; i < out.length; i++) {
        const p = next(out[i], ts);
        if (p !== undefined) return p.then(() => drainArray(out, i + 1, ts));
      }
      return;
    }
    if (out === null || out === undefined || typeof (out as Iterable<unknown>)[Symbol.iterator] !== 'function') {
      throw new TypeError(`flatMap '${name}' must return an iterable (array, Set, generator…), returned ${out === null ? 'null' : typeof out}`);
    }
    const it = (out as Iterable<unknown>)[Symbol.iterator]();
    for (;;) {
      const step = it.next();
      if (step.done === true) return;
      const p = next(step.value, ts);
      if (p !== undefined) return p.then(() => drain(it, ts));
    }
  };
  return (r, ts) => {
    const out: unknown = fn(r);
    return isThenable(out) ? Promise.resolve(out).then((o) => iterate(o, ts)) : iterate(out, ts);
  };
}

const passWatermark =
  (next: ChainLink) =>
  (watermark: number): Promise<void> | void =>
    next.processWatermark(watermark);

/** `fn` with what it throws (or rejects with) noted as raised in operator `name`. */
function noted<A extends unknown[]>(fn: (...args: A) => Promise<void> | void, name: string): (...args: A) => Promise<void> | void {
  return (...args) => {
    let out: Promise<void> | void;
    try {
      out = fn(...args);
    } catch (e) {
      throw raisedBy(e, name);
    }
    return out === undefined ? undefined : out.catch((e: unknown) => Promise.reject(raisedBy(e, name)));
  };
}

/**
 * Runs one task's chain to the end of its input. Throws what a user function threw. `checkpointCoordinator`
 * takes the chain's checkpoints (triggered in a source task, on aligned barriers in others) and reports them.
 */
export async function runOperatorChain(taskIo: TaskIo, checkpointCoordinator?: SubtaskCheckpointCoordinator): Promise<TaskResult> {
  const { tdd } = taskIo;
  const ops = tdd.operators;
  if (ops.length === 0) throw new TaskSetupError(`task ${tdd.taskName} has an empty operator chain`);
  const head = ops[0]!;
  const hasSource = head.kind.startsWith('source.');
  for (let i = 1; i < ops.length; i++) {
    if (ops[i]!.kind.startsWith('source.'))
      throw new TaskSetupError(`task ${tdd.taskName}: source '${ops[i]!.name}' must be the first operator of its chain, found at position ${i}`);
  }
  for (let i = 0; i < ops.length - 1; i++) {
    if (ops[i]!.kind.startsWith('sink.'))
      throw new TaskSetupError(`task ${tdd.taskName}: sink '${ops[i]!.name}' must be the last operator of its chain, found at position ${i}`);
  }
  if (!hasSource && taskIo.input === undefined) throw new TaskSetupError(`task ${tdd.taskName} has neither a source operator nor inputs`);

  const counters: ChainCounters = taskIo.counters ?? newChainCounters();
  const clock = taskIo.clock ?? systemClock;
  const mailbox = new Mailbox();
  const checkpoints = checkpointCoordinator ?? new SubtaskCheckpointCoordinator(tdd.taskName, () => undefined, { clock });
  // An action that failed while the task waited for input fails the task at once.
  mailbox.onFailure((e) => taskIo.input?.fail(e instanceof Error ? e : new Error(String(e))));
  // A source of a checkpointing job keeps its splits' positions as operator state (a cost per record otherwise saved).
  const sourceState =
    taskIo.sourceState ??
    (hasSource && tdd.checkpointing !== undefined
      ? new SourceSplitState(head.name, { subtaskIndex: tdd.subtaskIndex, parallelism: tdd.parallelism })
      : undefined);
  const io: TaskIo = { ...taskIo, mailbox, ...(sourceState !== undefined ? { sourceState } : {}) };
  const processingTime = mailboxProcessingTimeService(clock, mailbox);
  const last = ops[ops.length - 1]!;
  let sink: Sink | undefined = await openSink(tdd, last, io.fileOpenTimeoutMs ?? CONFIG_OPTIONS.fileOpenTimeoutMs.default, io.userFunctions, processingTime);
  const links: ChainLink[] = [];
  let opened = 0;
  let result: TaskResult;
  let closeError: { error: unknown } | undefined;

  try {
    const combinerMaxKeys = io.combinerMaxKeys ?? CONFIG_OPTIONS.combinerMaxKeys.default;
    const side = sideOutputWriter(io, last, counters);
    const writers: OutputWriter[] = [];
    const tailOf = (writer: OutputWriter, out: Emit): ChainLink => {
      writers.push(writer);
      return {
        processElement: (r, ts) => {
          counters.recordsOut++;
          return out(r, ts);
        },
        processWatermark: (w) => {
          counters.watermark = w;
          return writer.emitWatermark(w);
        },
        endInput: () => writer.endOfInput(),
      };
    };
    const emitWatermarkStatus = (idle: boolean): Promise<void> | void => allOf(writers.map((w) => w.emitWatermarkStatus(idle)));
    const baseContext = (op: OperatorSpec, next: ChainLink): StreamOperatorContext => {
      const output: Output = {
        emit: next.processElement,
        emitSide: side,
        emitWatermark: passWatermark(next),
        emitWatermarkStatus,
      };
      return {
        taskName: tdd.taskName,
        operatorName: op.name,
        subtaskIndex: tdd.subtaskIndex,
        parallelism: tdd.parallelism,
        maxParallelism: tdd.maxParallelism ?? defaultMaxParallelism(tdd.parallelism),
        output,
        processingTime,
        mailbox,
        clock,
      };
    };

    let first: ChainLink;
    if (tdd.chainInputs === undefined) {
      const writer = outputWriter(io, last, combinerMaxKeys);
      // What fails in a sink is the sink's; the writer notes its combiners' and its producer's failures itself.
      links.push(tailOf(writer, sink !== undefined ? noteErrors(sink.emit, last.name) : writer.emit));
      const middle = ops.slice(hasSource ? 1 : 0, sink !== undefined ? ops.length - 1 : ops.length);
      for (let i = middle.length - 1; i >= 0; i--) {
        const op = middle[i]!;
        const readsInput = i === 0 && !hasSource;
        links.unshift(chainLink(io, op, links[0]!, readsInput, baseContext));
      }
      first = links[0]!;
    } else {
      const tailFor = (producer: OperatorSpec, outputs: TaskIo): ChainLink => {
        const writer = outputWriter(outputs, producer, combinerMaxKeys);
        return tailOf(writer, writer.emit);
      };
      first = branchingChain(io, tdd.chainInputs, hasSource, links, tailFor, (op, next, readsInput) => chainLink(io, op, next, readsInput, baseContext));
    }
    // The chain's operators as checkpoints see them, by their uid or place in the chain; the links of the
    // operators after a source come first, in chain order.
    const checkpointed: ChainOperatorCheckpoint[] = ops.map((op, i) => ({ operatorId: operatorIdOf(op, tdd.vertexId, i), name: op.name, hooks: undefined }));
    const firstLinked = hasSource ? 1 : 0;
    for (let i = 0; i < links.length && firstLinked + i < ops.length; i++) checkpointed[firstLinked + i]!.hooks = links[i]!.checkpointed;
    if (hasSource) checkpointed[0]!.hooks = sourceState;
    // A sink's two-phase commit (the file sink of a checkpointing job).
    if (sink?.checkpointed !== undefined) checkpointed[ops.length - 1]!.hooks = sink.checkpointed;
    // Restored state (or none) before open, as Flink's initializeState.
    for (const op of checkpointed) {
      const init = op.hooks?.initializeState;
      if (init === undefined) continue;
      try {
        await init.call(op.hooks, tdd.restore?.state.operators[op.operatorId], checkpoints.streamFactory);
      } catch (e) {
        throw raisedBy(e, op.name);
      }
    }
    // An unaligned checkpoint's in-flight data (Flink's SequentialChannelStateReader): the output goes out
    // first, the input is processed before the channels.
    const inFlight = tdd.restore?.state.operators[checkpointed[0]!.operatorId]?.inFlight;
    let restoredChannels: ChannelState | undefined;
    if (inFlight !== undefined && inFlight.length > 0) {
      restoredChannels = await readChannelState(inFlight, checkpoints.streamFactory);
      restoreOutputBuffers(io.outputs, restoredChannels.output, tdd.taskName);
    }
    // Tail first, so every operator's output is ready before its input.
    for (let i = links.length - 1; i >= 0; i--) {
      await links[i]!.open?.();
      opened++;
    }
    checkpoints.start({
      mailbox,
      operators: checkpointed,
      isSource: hasSource,
      prepareSnapshotPreBarrier: () => allOf(writers.map((w) => w.prepareSnapshotPreBarrier())),
      broadcastBarrier: (barrier) => allOf(io.outputs.map((o) => o.broadcastBarrier(barrier))),
      takeOvertakenBuffers: (checkpointId) => takeOvertakenBuffers(io.outputs, checkpointId),
    });
    // Restored and open: the task runs from here.
    io.onRunning?.();

    // A checkpointing job's task waits for a final checkpoint at its end, unless a savepoint stopped the job.
    const waitsForFinalCheckpoint = (): boolean =>
      checkpointCoordinator !== undefined && tdd.checkpointing !== undefined && checkpoints.stopMode() === undefined;
    let dataEnded: Promise<void> | undefined;
    /**
     * The end of the task's input (once): its source read everything, or its input channels all brought end
     * of data or ended. What the mailbox holds comes first (a connector source's last records); then each
     * operator, head to tail, fires what it holds (as at the end of time) into the next — after a savepoint
     * that suspends the job they keep it (it is in the savepoint). A task that waits for a final checkpoint
     * then sends end of data (FLIP-147) before any barrier of a checkpoint taken after its end: one
     * checkpoint, triggered at the sources, then ends every stage. Its channels stay open for that barrier.
     */
    const endData = (): Promise<void> =>
      (dataEnded ??= (async () => {
        checkpoints.endingInputs();
        const held = mailbox.drain();
        if (held !== undefined) await held;
        for (const link of checkpoints.stopMode() === 'suspend' ? [] : links) {
          await link.endInput();
          const pending = mailbox.drain();
          if (pending !== undefined) await pending;
          checkCanceled(io);
        }
        const finalCheckpoint = waitsForFinalCheckpoint();
        if (finalCheckpoint) await allOf(io.outputs.map((o) => o.emitEndOfData()));
        checkpoints.endOfInputs();
        if (finalCheckpoint) checkpoints.reportEndOfData();
      })());

    if (hasSource) {
      const counted: Emit = (r, ts) => {
        // A savepoint that stops the job holds records back from its barrier on, and ends the source.
        const gate = checkpoints.beforeSourceRecord();
        if (gate !== undefined) {
          return gate.then(() => {
            counters.recordsIn++;
            return first.processElement(r, ts);
          });
        }
        counters.recordsIn++;
        return first.processElement(r, ts);
      };
      try {
        await runSource(io, head, counted, first.splitListener);
        // Ended by itself while a savepoint that stops the job is under way: it ends as that one says.
        if (checkpoints.stopMode() !== undefined) await checkpoints.savepointOutcome();
      } catch (e) {
        if (!(e instanceof SourceStoppedError)) throw raisedBy(e, head.name);
      }
      await endData();
    } else {
      await processInputs(
        io,
        {
          inputs: first.processElement2 !== undefined ? [first.processElement, first.processElement2] : [first.processElement],
          processWatermark: (w) => first.processWatermark(w),
          processWatermarkStatus: emitWatermarkStatus,
          checkpoints,
          stopMode: () => checkpoints.stopMode(),
          ...(restoredChannels !== undefined ? { restoredInput: restoredChannels.input } : {}),
          endOfData: endData,
        },
        mailbox,
        counters,
      );
      await endData();
    }
    // The final checkpoint (FLIP-147): before its end of partition, a checkpointing job's task waits for a
    // checkpoint taken after its last record to complete, so its sinks (and those downstream) commit everything.
    // A savepoint that stopped the job took that place (no checkpoint follows it).
    if (waitsForFinalCheckpoint()) {
      mailbox.enterIdle();
      try {
        await checkpoints.awaitFinalCheckpoint(
          io.signal,
          () => new TaskCanceledError(tdd.taskName),
          (listener) => mailbox.onFailure(listener),
        );
      } finally {
        await mailbox.leaveIdle();
      }
    }

    for (const o of io.outputs) o.finish();
    const closing = sink;
    sink = undefined;
    await closing?.close().catch((e: unknown) => {
      throw raisedBy(e, last.name);
    });
    result = { recordsIn: counters.recordsIn, recordsOut: counters.recordsOut, ...(closing?.result?.() ?? {}) };
  } finally {
    checkpoints.stop();
    // Operators close head first (Flink's order), also after a failure; a close error fails the task only
    // when nothing failed before.
    for (let i = links.length - opened; i < links.length; i++) {
      try {
        await links[i]!.close?.();
      } catch (error) {
        closeError ??= { error };
      }
    }
    if (sink !== undefined) await sink.abort();
  }
  if (closeError !== undefined && !io.signal.aborted) throw closeError.error;
  return result;
}

/** Makes the chain link of `op`, whose output is `next`. Keyed and two-input operators must read the task's input. */
function chainLink(
  io: TaskIo,
  op: OperatorSpec,
  next: ChainLink,
  readsInput: boolean,
  baseContext: (op: OperatorSpec, next: ChainLink) => StreamOperatorContext,
): ChainLink {
  const { tdd } = io;
  const mustHead = (what: string): void => {
    if (!readsInput) throw new TaskSetupError(`task ${tdd.taskName}: ${what} '${op.name}' must head its chain (it reads hash-partitioned input)`);
  };
  switch (op.kind) {
    case 'map':
      return { processElement: mapStep(io, op, next.processElement), processWatermark: passWatermark(next), endInput: () => undefined };
    case 'filter':
      return { processElement: filterStep(io, op, next.processElement), processWatermark: passWatermark(next), endInput: () => undefined };
    case 'flatMap':
      return {
        processElement: flatMapStep(userFunction(io, op), op.name, next.processElement),
        processWatermark: passWatermark(next),
        endInput: () => undefined,
      };
    case 'keyed.reduce':
    case 'keyed.sum':
    case 'keyed.aggregate':
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy': {
      mustHead('keyed operator');
      const keyed = keyedOperator(io, op, next.processElement);
      return {
        processElement: noteErrors(keyed.emit, op.name),
        processWatermark: passWatermark(next),
        endInput: () =>
          keyed.finish().catch((e: unknown) => {
            throw raisedBy(e, op.name);
          }),
      };
    }
    case 'source.sequence':
    case 'source.textFile':
    case 'source.connector':
    case 'source.generate':
    case 'source.collection':
    case 'sink.textFile':
    case 'sink.collect':
    case 'sink.connector':
      throw new TaskSetupError(`task ${tdd.taskName}: operator '${op.name}' (${op.kind}) cannot sit in the middle of a chain`);
    default:
      return factoryLink(io, op, next, readsInput, baseContext, mustHead);
  }
}

function factoryLink(
  io: TaskIo,
  op: OperatorSpec,
  next: ChainLink,
  readsInput: boolean,
  baseContext: (op: OperatorSpec, next: ChainLink) => StreamOperatorContext,
  mustHead: (what: string) => void,
): ChainLink {
  const { tdd } = io;
  const owner = `operator '${op.name}' (${op.kind})`;
  const userObject = (ref: FunctionRef): unknown => {
    const found = io.userFunctions.get(functionKey(ref));
    if (found === undefined) return functionOf(io.userFunctions, owner, ref);
    return found;
  };
  const oneInput = ONE_INPUT_OPERATORS[op.kind];
  const twoInput = TWO_INPUT_OPERATORS[op.kind];
  const factory: OperatorFactory<OneInputOperator | TwoInputOperator> | undefined = oneInput ?? twoInput;
  if (factory === undefined) throw new TaskSetupError(`task ${tdd.taskName}: operator '${op.name}' has kind ${op.kind}, which this runtime cannot run`);
  let operator: OneInputOperator | TwoInputOperator;
  let backend: KeyedStateBackend | undefined;
  const context = baseContext(op, next);
  if (factory.keyed) {
    mustHead('keyed operator');
    const maxParallelism = context.maxParallelism;
    const key = (role: string): ((r: unknown) => unknown) | undefined => {
      const fn = io.userFunctions.get(functionKey({ operatorId: op.id, role }));
      return fn === undefined ? undefined : (noteErrors(fn as (a?: unknown) => unknown, op.name) as (r: unknown) => unknown);
    };
    const keySelector = key('key');
    if (keySelector === undefined) throw new TaskSetupError(`task ${tdd.taskName}: keyed operator '${op.name}' has no key selector (role 'key')`);
    const keySelector2 = key('key2');
    const keyed: KeyedOperatorContext = {
      ...context,
      keySelector,
      ...(keySelector2 !== undefined ? { keySelector2 } : {}),
      stateBackend: createKeyedStateBackend(io.stateBackend, {
        maxParallelism,
        keyGroupRange: keyGroupRange(tdd.subtaskIndex, tdd.parallelism, maxParallelism),
        clock: context.clock,
        name: `${tdd.attemptId}-${op.id}`,
      }),
    };
    operator = factory.create({ op, context: keyed, userObject });
    backend = keyed.stateBackend;
  } else {
    if (twoInput !== undefined) mustHead('two-input operator');
    operator = factory.create({ op, context, userObject });
  }
  const name = op.name;
  const common = {
    processWatermark: noted((w: number) => operator.processWatermark(w), name),
    endInput: noted(() => operator.endInput(), name),
    ...(operator.open !== undefined ? { open: noted(() => operator.open!(), name) } : {}),
    ...(operator.close !== undefined || backend !== undefined ? { close: noted(closeThenDispose(operator, backend), name) } : {}),
  };
  const hooks = hasCheckpointHooks(operator) ? { checkpointed: withBackend(operator, backend) } : {};
  if ('processElement1' in operator) {
    if (!readsInput) throw new TaskSetupError(`task ${tdd.taskName}: two-input operator '${op.name}' must head its chain`);
    return { ...common, processElement: noteErrors(operator.processElement1, name), processElement2: noteErrors(operator.processElement2, name), ...hooks };
  }
  const link: ChainLink = { ...common, processElement: noteErrors(operator.processElement, name), ...hooks };
  return 'startSplit' in operator && typeof operator.startSplit === 'function' ? { ...link, splitListener: operator as unknown as SplitListener } : link;
}

/**
 * Closes the operator, then drops its keyed state (an lmdb backend removes its environment) and waits for
 * what the backend still writes in the background: the task's end is reported after its last file.
 */
function closeThenDispose(operator: { close?(): Promise<void> | void }, backend: KeyedStateBackend | undefined): () => Promise<void> {
  return async () => {
    try {
      await operator.close?.();
    } finally {
      backend?.dispose();
      await backend?.settled?.();
    }
  };
}

/** The operator's checkpoint hooks, a completed checkpoint told to its keyed state backend too (incremental snapshots build on it). */
function withBackend(op: CheckpointedOperator, backend: KeyedStateBackend | undefined): CheckpointedOperator {
  const backendDone = backend?.notifyCheckpointComplete?.bind(backend);
  if (backendDone === undefined) return op;
  return {
    ...(op.initializeState !== undefined ? { initializeState: op.initializeState.bind(op) } : {}),
    ...(op.snapshotState !== undefined ? { snapshotState: op.snapshotState.bind(op) } : {}),
    ...(op.notifyCheckpointAborted !== undefined ? { notifyCheckpointAborted: op.notifyCheckpointAborted.bind(op) } : {}),
    notifyCheckpointComplete: async (checkpointId: number) => {
      backendDone(checkpointId);
      await op.notifyCheckpointComplete?.(checkpointId);
    },
  };
}

const hasCheckpointHooks = (op: CheckpointedOperator): boolean =>
  op.snapshotState !== undefined || op.initializeState !== undefined || op.notifyCheckpointComplete !== undefined || op.notifyCheckpointAborted !== undefined;
