// The functions a job hands to the DataStream API (Flink's org.apache.flink.api.common.functions), and
// the types that check a key and a field at compile time.

export type MapFunction<T, R> = (value: T) => R;
/** Returns the records to emit for one input record: an array, a Set, a generator… */
export type FlatMapFunction<T, R> = (value: T) => Iterable<R>;
export type FilterFunction<T> = (value: T) => boolean;
/** Gives a record its key: a string, number, boolean, bigint or null, or an array / plain object of them. */
export type KeySelector<T, K> = (value: T) => K;

/** The values a key is made of: records with equal keys (by value) meet at one subtask of a keyed operator. */
export type KeyPrimitive = string | number | bigint | boolean | null;
/**
 * `K` where it can be a key, and where it cannot, a type that names the part that cannot (so the
 * compiler's error points at it): functions, Maps, Sets, Dates, class instances with methods, undefined
 * and symbols have no stable value to route and compare by.
 */
export type EncodableKey<K> = K extends KeyPrimitive
  ? K
  : K extends undefined | symbol | ((...args: never[]) => unknown)
    ? 'a key cannot hold undefined, a symbol or a function'
    : K extends ReadonlyMap<unknown, unknown> | ReadonlySet<unknown> | Date | RegExp | Promise<unknown> | ArrayBufferView | ArrayBuffer
      ? 'a key cannot hold a Map, Set, Date, RegExp, Promise or binary buffer: use a string, number, bigint, boolean, null, or an array / plain object of them'
      : K extends object
        ? { [P in keyof K]: EncodableKey<K[P]> }
        : 'a key must be a string, number, bigint, boolean, null, or an array / plain object of them';

/**
 * The fields of `T` whose values are `V`: an object's property names, a tuple's indexes, and any index
 * of an array whose elements may be `V` (an array's type does not say what each index holds).
 */
export type FieldOf<T, V> = T extends readonly unknown[]
  ? number extends T['length']
    ? [Extract<T[number], V>] extends [never]
      ? never
      : number
    : TupleIndex<{ [I in keyof T]-?: T[I] extends V ? I : never }[number]>
  : T extends object
    ? { [P in keyof T]-?: T[P] extends V ? P : never }[keyof T] & (string | number)
    : never;
type TupleIndex<S> = S extends `${infer N extends number}` ? N : never;
/** Fields holding numbers: what sum adds. */
export type NumericField<T> = FieldOf<T, number>;
/** Fields holding numbers, bigints or strings: what min, max, minBy and maxBy compare. */
export type ComparableField<T> = FieldOf<T, number | bigint | string>;
/** Combines a key's value so far with its next record. */
export type ReduceFunction<T> = (accumulated: T, value: T) => T;
/** Folds a key's records into an accumulator and turns it into the result, as Flink's AggregateFunction. */
export interface AggregateFunction<T, A, R> {
  createAccumulator(): A;
  add(value: T, accumulator: A): A;
  getResult(accumulator: A): R;
  /**
   * Merges two accumulators of one key. With it, on bounded input, each producer folds its records per key
   * before they cross the network and the keyed operator merges the partial accumulators (which must be
   * plain data the network can carry). Without it, every record crosses.
   */
  merge?(a: A, b: A): A;
}
/** Makes the record with index `index` (0, 1, 2, …) of a generated source. */
/** May return a promise: the source waits for it (idle meanwhile). */
export type GeneratorFunction<T> = (index: number) => T | PromiseLike<T>;
export type UserFunction = (...args: any[]) => unknown;
