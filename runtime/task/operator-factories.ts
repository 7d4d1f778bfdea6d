// How a task makes the streaming operators of its chain, by operator kind: each entry says whether the
// operator is keyed (it heads its chain, reads hash-partitioned input, and gets a key selector and keyed
// state) and makes the operator from its spec, its context and the user objects the builder recorded.
import type { FunctionRef, OperatorKind, OperatorSpec } from '../jobgraph/jobgraph.js';
import type { KeyedOperatorContext, OneInputOperator, StreamOperatorContext, TwoInputOperator } from './stream-operator.js';
import { BroadcastProcessOperator, KeyedBroadcastProcessOperator } from './broadcast-operators.js';
import { CoStreamOperator, KeyedCoProcessOperator } from './co-operators.js';
import { IntervalJoinOperator, WindowJoinOperator } from './join-operators.js';
import { TimestampsAndWatermarksOperator, type WatermarkStrategyLike } from './timestamps-operator.js';
import { KeyedProcessOperator, ProcessOperator } from './process-operators.js';
import { createWindowOperator } from './window-operator-factory.js';

export interface OperatorSetup<C extends StreamOperatorContext = StreamOperatorContext> {
  readonly op: OperatorSpec;
  readonly context: C;
  /** The user function or object the builder recorded under `ref` (errors it throws name the operator). */
  userObject(ref: FunctionRef): unknown;
}

export type OperatorFactory<O> =
  { readonly keyed: false; create(setup: OperatorSetup): O } | { readonly keyed: true; create(setup: OperatorSetup<KeyedOperatorContext>): O };

export const ONE_INPUT_OPERATORS: Partial<Record<OperatorKind, OperatorFactory<OneInputOperator>>> = {
  process: {
    keyed: false,
    create: ({ op, context, userObject }) => new ProcessOperator(context, userObject((op as Extract<OperatorSpec, { kind: 'process' }>).fn)),
  },
  'keyed.process': {
    keyed: true,
    create: ({ op, context, userObject }) => new KeyedProcessOperator(context, userObject((op as Extract<OperatorSpec, { kind: 'keyed.process' }>).fn)),
  },
  timestampsAndWatermarks: {
    keyed: false,
    create: ({ op, context, userObject }) => {
      if (op.kind !== 'timestampsAndWatermarks') throw new TypeError(`not a timestampsAndWatermarks operator: ${op.kind}`);
      return new TimestampsAndWatermarksOperator(userObject(op.strategy) as WatermarkStrategyLike, context, op.watermarkIntervalMs);
    },
  },
  'keyed.window': {
    keyed: true,
    create: ({ op, context, userObject }) => {
      if (op.kind !== 'keyed.window') throw new TypeError(`not a window operator: ${op.kind}`);
      return createWindowOperator(op, context, userObject);
    },
  },
};

/** `op` as the spec of `kind` (the table's key says it is). */
function specOf<K extends OperatorKind>(op: OperatorSpec, kind: K): Extract<OperatorSpec, { kind: K }> {
  if (op.kind !== kind) throw new TypeError(`not a ${kind} operator: ${op.kind}`);
  return op as Extract<OperatorSpec, { kind: K }>;
}

/** A connected-streams operator that is not keyed (its inputs may be: they route, it keeps no keyed state). */
const coStream = (kind: 'co.map' | 'co.flatMap' | 'co.process'): OperatorFactory<TwoInputOperator> => ({
  keyed: false,
  create: ({ op, context, userObject }) => new CoStreamOperator(context, kind, userObject(specOf(op, kind).fn)),
});

export const TWO_INPUT_OPERATORS: Partial<Record<OperatorKind, OperatorFactory<TwoInputOperator>>> = {
  'co.map': coStream('co.map'),
  'co.flatMap': coStream('co.flatMap'),
  'co.process': coStream('co.process'),
  'keyed.coProcess': {
    keyed: true,
    create: ({ op, context, userObject }) => new KeyedCoProcessOperator(context, userObject(specOf(op, 'keyed.coProcess').fn)),
  },
  'keyed.intervalJoin': {
    keyed: true,
    create: ({ op, context, userObject }) => {
      const o = specOf(op, 'keyed.intervalJoin');
      return new IntervalJoinOperator(context, o, userObject(o.fn));
    },
  },
  'keyed.windowJoin': {
    keyed: true,
    create: ({ op, context, userObject }) => {
      const o = specOf(op, 'keyed.windowJoin');
      return new WindowJoinOperator(context, o.mode, userObject(o.assigner), userObject(o.fn) as (...args: unknown[]) => unknown);
    },
  },
  'broadcast.process': {
    keyed: false,
    create: ({ op, context, userObject }) => {
      const o = specOf(op, 'broadcast.process');
      return new BroadcastProcessOperator(context, o.broadcastStates, userObject(o.fn));
    },
  },
  'keyed.broadcastProcess': {
    keyed: true,
    create: ({ op, context, userObject }) => {
      const o = specOf(op, 'keyed.broadcastProcess');
      return new KeyedBroadcastProcessOperator(context, o.broadcastStates, userObject(o.fn));
    },
  },
};
