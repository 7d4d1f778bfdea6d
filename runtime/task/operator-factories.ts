// How a task makes the streaming operators of its chain, by operator kind: each entry says whether the
// operator is keyed (it heads its chain, reads hash-partitioned input, and gets a key selector and keyed
// state) and makes the operator from its spec, its context and the user objects the builder recorded.
import type { FunctionRef, OperatorKind, OperatorSpec } from '../jobgraph/jobgraph.js';
import type { KeyedOperatorContext, OneInputOperator, StreamOperatorContext, TwoInputOperator } from './stream-operator.js';
import { TimestampsAndWatermarksOperator, type WatermarkStrategyLike } from './timestamps-operator.js';
import { KeyedProcessOperator, ProcessOperator } from './process-operators.js';

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
};

export const TWO_INPUT_OPERATORS: Partial<Record<OperatorKind, OperatorFactory<TwoInputOperator>>> = {};
