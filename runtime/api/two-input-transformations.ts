// What the job API records for two-input operators (connected streams, joins, broadcast state), and how
// each becomes its JobGraph operator (translate.ts) and names its user functions and objects (program.ts).
import type { FunctionRef } from '../jobgraph/jobgraph.js';
import type { JoinWindowSpec, TwoInputOperatorSpec } from '../jobgraph/two-input-operator-specs.js';
import type { UserFunction } from './functions.js';

export type TwoInputTransformationSpec =
  /** `key` / `key2`: the key selectors of keyed inputs, which route records to subtasks (the operator itself is not keyed). */
  | { readonly kind: 'co.map' | 'co.flatMap' | 'co.process'; readonly fn: object; readonly key?: UserFunction; readonly key2?: UserFunction }
  | { readonly kind: 'keyed.coProcess'; readonly key: UserFunction; readonly key2: UserFunction; readonly fn: object }
  | {
      readonly kind: 'keyed.intervalJoin';
      readonly key: UserFunction;
      readonly key2: UserFunction;
      readonly fn: object;
      readonly lowerMs: number;
      readonly upperMs: number;
      readonly lowerBoundExclusive: boolean;
      readonly upperBoundExclusive: boolean;
    }
  | {
      readonly kind: 'keyed.windowJoin';
      readonly key: UserFunction;
      readonly key2: UserFunction;
      readonly fn: UserFunction;
      readonly assigner: object;
      readonly mode: 'join' | 'coGroup';
      readonly window: JoinWindowSpec;
    }
  | { readonly kind: 'broadcast.process'; readonly fn: object; readonly broadcastStates: readonly string[] }
  | { readonly kind: 'keyed.broadcastProcess'; readonly key: UserFunction; readonly fn: object; readonly broadcastStates: readonly string[] };

/** The names two-input operators get until the user names them: the method that made them. */
export const TWO_INPUT_DEFAULT_NAMES: Record<TwoInputTransformationSpec['kind'], string> = {
  'co.map': 'Co-Map',
  'co.flatMap': 'Co-Flat Map',
  'co.process': 'Co-Process',
  'keyed.coProcess': 'KeyedCoProcess',
  'keyed.intervalJoin': 'IntervalJoin',
  'keyed.windowJoin': 'WindowJoin',
  'broadcast.process': 'Co-Process-Broadcast',
  'keyed.broadcastProcess': 'Co-Process-Broadcast-Keyed',
};

/** The JobGraph operator of a two-input transformation; `ref(role)` names one of its user functions. */
export function twoInputOperatorOf(
  spec: TwoInputTransformationSpec,
  base: { readonly id: string; readonly name: string; readonly uid?: string },
  ref: (role?: string) => FunctionRef,
): TwoInputOperatorSpec<FunctionRef> {
  switch (spec.kind) {
    case 'co.map':
    case 'co.flatMap':
    case 'co.process':
      return { kind: spec.kind, ...base, fn: ref() };
    case 'keyed.coProcess':
      return { kind: spec.kind, ...base, key: ref('key'), key2: ref('key2'), fn: ref() };
    case 'keyed.intervalJoin':
      return {
        kind: spec.kind,
        ...base,
        key: ref('key'),
        key2: ref('key2'),
        fn: ref(),
        lowerMs: spec.lowerMs,
        upperMs: spec.upperMs,
        lowerBoundExclusive: spec.lowerBoundExclusive,
        upperBoundExclusive: spec.upperBoundExclusive,
      };
    case 'keyed.windowJoin':
      return { kind: spec.kind, ...base, key: ref('key'), key2: ref('key2'), fn: ref(), assigner: ref('assigner'), mode: spec.mode, window: spec.window };
    case 'broadcast.process':
      return { kind: spec.kind, ...base, fn: ref(), broadcastStates: [...spec.broadcastStates] };
    case 'keyed.broadcastProcess':
      return { kind: spec.kind, ...base, key: ref('key'), fn: ref(), broadcastStates: [...spec.broadcastStates] };
    default:
      return spec satisfies never;
  }
}

/**
 * The user functions and objects of a two-input transformation by role ('' for the function object,
 * 'key' / 'key2' for the key selectors, 'assigner' for a window join's assigner). Objects are kept as
 * they are: the task calls their methods by name.
 */
export function twoInputUserFunctions(spec: TwoInputTransformationSpec): [role: string, fn: UserFunction][] {
  const fn = spec.fn as UserFunction;
  switch (spec.kind) {
    case 'co.map':
    case 'co.flatMap':
    case 'co.process':
      return [
        ...(spec.key !== undefined ? [['key', spec.key] as [string, UserFunction]] : []),
        ...(spec.key2 !== undefined ? [['key2', spec.key2] as [string, UserFunction]] : []),
        ['', fn],
      ];
    case 'broadcast.process':
      return [['', fn]];
    case 'keyed.coProcess':
    case 'keyed.intervalJoin':
      return [
        ['key', spec.key],
        ['key2', spec.key2],
        ['', fn],
      ];
    case 'keyed.windowJoin':
      return [
        ['key', spec.key],
        ['key2', spec.key2],
        ['', fn],
        ['assigner', spec.assigner as UserFunction],
      ];
    case 'keyed.broadcastProcess':
      return [
        ['key', spec.key],
        ['', fn],
      ];
    default:
      return spec satisfies never;
  }
}
