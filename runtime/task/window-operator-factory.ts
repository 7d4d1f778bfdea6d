// How a task makes the window operator of a keyed.window spec: its user functions resolved (errors they
// raise name the operator), pre-aggregated input (pairs and batches of partials) merged as partials, and the operator chosen — the slicing
// one (slicing-window-operator.ts) where its windows allow it, the general WindowOperator for the rest.
import type { FunctionRef } from '../jobgraph/jobgraph.js';
import type { KeyedOperatorContext, OneInputOperator } from './stream-operator.js';
import { isThenable, noteErrors, raisedBy, TaskSetupError, type Emit } from './task-io.js';
import { isPartialBatch } from './window-combiner.js';
import { SlicingWindowOperator, slicingWindowProblem } from './slicing-window-operator.js';
import type { ProcessWindowCall, WindowFunctions } from './window-contents.js';
import { WindowOperator, type WindowOperatorConfig, type WindowOperatorSpec } from './window-operator.js';

/** The slicing window operator when `config`'s windows allow it, else the general one. */
export function windowOperatorFor(context: KeyedOperatorContext, config: WindowOperatorConfig): OneInputOperator {
  return slicingWindowProblem(config) === undefined ? new SlicingWindowOperator(context, config) : new WindowOperator(context, config);
}

/** The window operator of `op`, its user functions looked up by `userObject`; errors they raise name the operator. */
export function createWindowOperator(op: WindowOperatorSpec, context: KeyedOperatorContext, userObject: (ref: FunctionRef) => unknown): OneInputOperator {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each role has its own parameter types
  const fn = <F extends (a?: any, b?: any) => unknown>(ref: FunctionRef | undefined, role: string): F => {
    const f = ref === undefined ? undefined : userObject(ref);
    if (typeof f !== 'function') throw new TaskSetupError(`window operator '${op.name}' (${op.windowFunction}) has no ${role} function in the job library`);
    return noteErrors(f as F, op.name);
  };
  let process: ProcessWindowCall | undefined;
  if (op.process !== undefined) {
    // Called with four arguments: not through noteErrors, which passes two.
    const p = userObject(op.process);
    if (typeof p !== 'function') throw new TaskSetupError(`window operator '${op.name}' has no process function in the job library`);
    const rethrow = (e: unknown): never => {
      throw raisedBy(e, op.name);
    };
    process = (key, ctx, elements, out) => {
      try {
        const r = (p as ProcessWindowCall)(key, ctx, elements, out);
        return isThenable(r) ? Promise.resolve(r).then(undefined, rethrow) : r;
      } catch (e) {
        return rethrow(e);
      }
    };
  }
  const withProcess = process === undefined ? {} : { process };
  let functions: WindowFunctions;
  switch (op.windowFunction) {
    case 'reduce':
      functions = { kind: 'reduce', reduce: fn(op.reduce, 'reduce'), ...withProcess };
      break;
    case 'aggregate':
      functions = {
        kind: 'aggregate',
        createAccumulator: fn(op.createAccumulator, 'createAccumulator'),
        add: fn(op.add, 'add'),
        getResult: fn(op.getResult, 'getResult'),
        ...(op.merge !== undefined ? { merge: fn(op.merge, 'merge') } : {}),
        ...withProcess,
      };
      break;
    case 'process':
      if (process === undefined) throw new TaskSetupError(`window operator '${op.name}' has no process function in the job library`);
      functions = { kind: 'process', process };
      break;
    default:
      return op.windowFunction satisfies never;
  }
  if (op.preAggregate === true) {
    functions = mergingPartials(op, functions);
    // Each input record is a [key, partial] pair: the key travels with its partial (window-combiner.ts).
    context = { ...context, keySelector: (pair) => (pair as [unknown, unknown])[0] };
  }
  const operator = windowOperatorFor(context, {
    assigner: op.window,
    trigger: op.trigger,
    allowedLateness: op.allowedLateness,
    ...(op.lateDataTag !== undefined ? { lateDataTag: op.lateDataTag } : {}),
    functions,
  });
  return op.preAggregate === true ? takingBatches(operator) : operator;
}

/**
 * `operator`, its processElement also taking batches of partials `[PARTIAL_BATCH, keys, partials]`
 * (window-combiner.ts): each pair in turn, as if it had come alone, waiting where the operator asks.
 */
function takingBatches(operator: OneInputOperator): OneInputOperator {
  const one = operator.processElement;
  const from = (keys: unknown[], partials: unknown[], start: number, timestamp: number | undefined): Promise<void> | void => {
    for (let i = start; i < keys.length; i++) {
      const wait = one([keys[i], partials[i]], timestamp);
      if (isThenable(wait)) return Promise.resolve(wait).then(() => from(keys, partials, i + 1, timestamp));
    }
  };
  (operator as { processElement: Emit }).processElement = (element, timestamp) =>
    isPartialBatch(element) ? from(element[1], element[2], 0, timestamp) : one(element, timestamp);
  return operator;
}

const NO_VALUE = Symbol('no value yet');

/**
 * The window functions over pre-aggregated input: each element is a `[key, partial]` pair, merged into
 * the pane's accumulator (an aggregate's merge; a reduce of the reduced values).
 */
function mergingPartials(op: WindowOperatorSpec, functions: WindowFunctions): WindowFunctions {
  const partial = (pair: unknown): unknown => (pair as [unknown, unknown])[1];
  if (functions.kind === 'aggregate' && functions.merge !== undefined) {
    const merge = functions.merge;
    return { ...functions, add: (pair, acc) => merge(acc, partial(pair)) };
  }
  if (functions.kind === 'reduce') {
    const reduce = functions.reduce;
    const both = (a: unknown, b: unknown): unknown => (a === NO_VALUE ? b : b === NO_VALUE ? a : reduce(a, b));
    return {
      kind: 'aggregate',
      createAccumulator: () => NO_VALUE,
      add: (pair, acc) => both(acc, partial(pair)),
      getResult: (acc) => acc,
      merge: both,
      ...(functions.process !== undefined ? { process: functions.process } : {}),
    };
  }
  throw new TaskSetupError(`window operator '${op.name}' takes pre-aggregated input but has neither a reduce nor an aggregate with merge`);
}
