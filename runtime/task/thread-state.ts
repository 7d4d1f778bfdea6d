// What a job's code could leave behind in a slot's worker thread for the next job to find: globals,
// changed built-ins, environment variables, process listeners, timers and handles. A thread is kept for
// the next job only when none of this differs from what it was before its first job (see
// SlotWorkerRuntime.recycle); otherwise the TaskExecutor replaces it with a fresh one.
import { createRequire } from 'node:module';

/** Built-ins whose own properties a job might change (a polyfill, a patched prototype). */
const BUILT_INS: readonly (readonly [string, object])[] = [
  ['Object', Object],
  ['Object.prototype', Object.prototype],
  ['Function.prototype', Function.prototype],
  ['Array', Array],
  ['Array.prototype', Array.prototype],
  ['String', String],
  ['String.prototype', String.prototype],
  ['Number', Number],
  ['Number.prototype', Number.prototype],
  ['Boolean.prototype', Boolean.prototype],
  ['BigInt.prototype', BigInt.prototype],
  ['Symbol', Symbol],
  ['Symbol.prototype', Symbol.prototype],
  ['Math', Math],
  ['JSON', JSON],
  ['Reflect', Reflect],
  ['Date', Date],
  ['Date.prototype', Date.prototype],
  ['RegExp', RegExp],
  ['RegExp.prototype', RegExp.prototype],
  ['Error', Error],
  ['Error.prototype', Error.prototype],
  ['Promise', Promise],
  ['Promise.prototype', Promise.prototype],
  ['Map.prototype', Map.prototype],
  ['Set.prototype', Set.prototype],
  ['WeakMap.prototype', WeakMap.prototype],
  ['Uint8Array.prototype', Uint8Array.prototype],
  ['TypedArray.prototype', Object.getPrototypeOf(Uint8Array.prototype) as object],
  ['ArrayBuffer.prototype', ArrayBuffer.prototype],
  ['Buffer.prototype', Buffer.prototype],
  ['Iterator.prototype', Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())) as object],
  ['process', process],
];

/**
 * Node's modules a job might patch (`fs.readFile = …`): one object per thread, whichever module instance
 * imports them. Loading those not yet loaded costs the thread's start a few milliseconds, once.
 */
const NODE_MODULES = [
  'fs',
  'fs/promises',
  'path',
  'os',
  'util',
  'events',
  'stream',
  'buffer',
  'crypto',
  'timers',
  'url',
  'worker_threads',
  'net',
  'http',
  'https',
  'zlib',
  'child_process',
  'dns',
];
const requireBuiltin = createRequire(import.meta.url);

/** One property as it stands: the value of a data property, the getter and setter of an accessor. */
type Slot = readonly [kind: 'value' | 'accessor', a: unknown, b?: unknown];

export interface ThreadState {
  readonly properties: ReadonlyMap<string, ReadonlyMap<PropertyKey, Slot>>;
  readonly env: string;
  /** Listeners per process event. */
  readonly listeners: ReadonlyMap<string, number>;
  /** Active timers and handles per kind (process.getActiveResourcesInfo). */
  readonly resources: ReadonlyMap<string, number>;
}

function counts(names: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const n of names) out.set(n, (out.get(n) ?? 0) + 1);
  return out;
}

/** The kinds whose count grew from `before` to `after`, as `kind: before -> after`. */
function grown(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): string[] {
  return [...after].filter(([k, n]) => n > (before.get(k) ?? 0)).map(([k, n]) => `${k}: ${before.get(k) ?? 0} -> ${n}`);
}

function ownProperties(target: object): Map<PropertyKey, Slot> {
  const out = new Map<PropertyKey, Slot>();
  for (const key of Reflect.ownKeys(target)) {
    const d = Object.getOwnPropertyDescriptor(target, key);
    if (d === undefined) continue;
    out.set(key, 'value' in d ? ['value', d.value] : ['accessor', d.get, d.set]);
  }
  return out;
}

/** The thread's state now (globals and built-ins by identity, env, listeners, active timers and handles). */
export function captureThreadState(): ThreadState {
  // Loaded first: loading a module may itself change what is read below (it did `process.chdir`).
  const modules = NODE_MODULES.map((name) => [`node:${name}`, requireBuiltin(`node:${name}`) as object] as const);
  const properties = new Map<string, Map<PropertyKey, Slot>>([['globalThis', ownProperties(globalThis)]]);
  for (const [name, target] of [...BUILT_INS, ...modules]) properties.set(name, ownProperties(target));
  return {
    properties,
    env: JSON.stringify(Object.entries(process.env).sort(([a], [b]) => (a < b ? -1 : 1))),
    listeners: new Map(process.eventNames().map((e) => [String(e), process.listenerCount(e)])),
    resources: counts(process.getActiveResourcesInfo()),
  };
}

/**
 * What differs between two states, described (at most `limit` items); empty when the thread is as it
 * was. Listeners and active timers or handles count as changed only where there are more than before.
 * A global that Node defines lazily (an accessor that turns into a value when first read, such as
 * `fetch`) counts as unchanged when read; any other change of a value, getter or setter counts.
 */
export function threadStateChanges(before: ThreadState, after: ThreadState, limit = 5): string[] {
  const changes: string[] = [];
  const note = (what: string): boolean => changes.push(what) >= limit;
  for (const [name, was] of before.properties) {
    const now = after.properties.get(name)!;
    for (const [key, slot] of now) {
      const old = was.get(key);
      if (old === undefined) {
        if (note(`${name}.${String(key)} was added`)) return changes;
      } else if (old[0] === 'value' && (slot[0] !== 'value' || !Object.is(old[1], slot[1]))) {
        if (note(`${name}.${String(key)} was changed`)) return changes;
      } else if (old[0] === 'accessor' && slot[0] === 'accessor' && (old[1] !== slot[1] || old[2] !== slot[2])) {
        if (note(`${name}.${String(key)} was redefined`)) return changes;
      }
    }
    for (const key of was.keys()) if (!now.has(key) && note(`${name}.${String(key)} was deleted`)) return changes;
  }
  if (before.env !== after.env && note('process.env was changed')) return changes;
  const listeners = grown(before.listeners, after.listeners);
  if (listeners.length > 0 && note(`process listeners added (${listeners.join(', ')})`)) return changes;
  // Fewer than before is fine: the thread's own start still had files open when the first state was taken.
  const resources = grown(before.resources, after.resources);
  if (resources.length > 0) note(`timers or handles left active (${resources.join(', ')})`);
  return changes;
}
