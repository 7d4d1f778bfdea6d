// The JobGraph's two-input operators: connected streams, joins and broadcast state. Each heads its chain
// and reads two inputs; an edge says which one it feeds (JobEdge.targetInput: 0 the first, 1 the second).
// Keyed ones read their first input by `key` and their second by `key2` (hash edges), except the keyed
// broadcast operator, whose second input is a broadcast edge. `R` is jobgraph.ts's R (a type
// parameter here, so that file can include these specs without an import circle).

/** The window of a window join, as its assigner says it (tumbling: no slide). */
export interface JoinWindowSpec {
  readonly sizeMs: number;
  readonly slideMs?: number;
  readonly offsetMs: number;
}

export type TwoInputOperatorSpec<R> =
  /** `fn` is a CoMapFunction (map1/map2), a CoFlatMapFunction (flatMap1/flatMap2) or a CoProcessFunction. */
  | { readonly kind: 'co.map' | 'co.flatMap' | 'co.process'; readonly id: string; readonly name: string; readonly fn: R }
  /** `fn` is a KeyedCoProcessFunction. */
  | { readonly kind: 'keyed.coProcess'; readonly id: string; readonly name: string; readonly key: R; readonly key2: R; readonly fn: R }
  /** Pairs a left record at t with the right records at [t + lowerMs, t + upperMs] (bounds included unless exclusive); `fn` is a ProcessJoinFunction. */
  | {
      readonly kind: 'keyed.intervalJoin';
      readonly id: string;
      readonly name: string;
      readonly key: R;
      readonly key2: R;
      readonly fn: R;
      readonly lowerMs: number;
      readonly upperMs: number;
      readonly lowerBoundExclusive: boolean;
      readonly upperBoundExclusive: boolean;
    }
  /** Joins ('join': fn(l, r) per pair) or co-groups ('coGroup': fn(lefts, rights, out)) the records of a key in each window of `assigner`. */
  | {
      readonly kind: 'keyed.windowJoin';
      readonly id: string;
      readonly name: string;
      readonly key: R;
      readonly key2: R;
      readonly fn: R;
      readonly assigner: R;
      readonly mode: 'join' | 'coGroup';
      readonly window: JoinWindowSpec;
    }
  /** `fn` is a BroadcastProcessFunction; `broadcastStates` names the MapStateDescriptors of the broadcast stream. */
  | { readonly kind: 'broadcast.process'; readonly id: string; readonly name: string; readonly fn: R; readonly broadcastStates: readonly string[] }
  /** `fn` is a KeyedBroadcastProcessFunction. */
  | {
      readonly kind: 'keyed.broadcastProcess';
      readonly id: string;
      readonly name: string;
      readonly key: R;
      readonly fn: R;
      readonly broadcastStates: readonly string[];
    };

export type TwoInputOperatorKind = TwoInputOperatorSpec<unknown>['kind'];

export const TWO_INPUT_OPERATOR_KINDS: readonly TwoInputOperatorKind[] = [
  'co.map',
  'co.flatMap',
  'co.process',
  'keyed.coProcess',
  'keyed.intervalJoin',
  'keyed.windowJoin',
  'broadcast.process',
  'keyed.broadcastProcess',
];

/** The user functions and objects a two-input operator names, in a fixed order. */
export function twoInputFunctionRefs<R>(op: TwoInputOperatorSpec<R>): R[] {
  switch (op.kind) {
    case 'co.map':
    case 'co.flatMap':
    case 'co.process':
    case 'broadcast.process':
      return [op.fn];
    case 'keyed.coProcess':
    case 'keyed.intervalJoin':
      return [op.key, op.key2, op.fn];
    case 'keyed.windowJoin':
      return [op.key, op.key2, op.fn, op.assigner];
    case 'keyed.broadcastProcess':
      return [op.key, op.fn];
    default:
      return op satisfies never;
  }
}

/** The key-selector role the hash edges into input `targetInput` of `op` must carry, or undefined when that input is not hash-partitioned. */
export function keyRoleOfInput(op: TwoInputOperatorSpec<unknown>, targetInput: number): 'key' | 'key2' | undefined {
  if (!op.kind.startsWith('keyed.')) return undefined;
  if (targetInput === 0) return 'key';
  return op.kind === 'keyed.broadcastProcess' ? undefined : 'key2';
}

const TWO_INPUT_KIND_SET: ReadonlySet<string> = new Set(TWO_INPUT_OPERATOR_KINDS);

/** Whether `op` reads two inputs (it heads its chain; its edges say which input they feed). */
export const isTwoInputOperator = <O extends { readonly kind: string }>(op: O): op is Extract<O, { readonly kind: TwoInputOperatorKind }> =>
  TWO_INPUT_KIND_SET.has(op.kind);
