// What a job's builder reads beyond its arguments: on the client it is recorded while the builder runs,
// and shipped with the JobGraph; in a task the same reads are answered from the recording, so the
// builder makes the same operators with the same values as on the client (as Flink ships the client's
// closures). The builder is synchronous, so the hooks below are in place only while it runs and nothing
// else in the thread can meet them.
import fs from 'node:fs';
import os from 'node:os';
import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { resolve } from 'node:path';
import { FloeError } from '../core/errors.js';
import type { JobProgram } from '../jobgraph/jobgraph.js';
import { JOB_GRAPH_LIMITS } from '../jobgraph/limits.js';
import { InvalidJobDefinitionError } from './errors.js';

/** A recorded value: JSON data, bytes as base64, or what the call threw. */
type RecordedValue = unknown;

/**
 * The builder's reads, by what was read (`env:NAME`, `fs.readFileSync:<path>:<encoding>`, `Math.random`,
 * `Date.now`, …), each with the values its calls returned on the client, in order.
 */
export type BuilderReads = NonNullable<JobProgram['builderReads']>;

/** The most bytes of recorded reads one job carries (they travel with every task deployment). */
const MAX_BUILDER_READS_BYTES = JOB_GRAPH_LIMITS.maxBuilderReadsBytes;

/**
 * A task's builder read something the client's did not, or more often: the builder depends on something
 * the recording cannot give back (a module-level value, the thread it runs on), so its plan would differ.
 */
export class BuilderReadMismatchError extends FloeError {
  constructor(message: string) {
    super('PLAN_MISMATCH', message, { retryable: false });
  }
}

type Mode =
  | { readonly kind: 'record'; readonly reads: Record<string, RecordedValue[]> }
  | { readonly kind: 'replay'; readonly reads: BuilderReads; readonly next: Map<string, number> };

const BYTES = '__floeBytes';
const THROWN = '__floeThrown';

/**
 * Runs `build` while recording what it reads; returns its result and the reads. A recording over
 * MAX_BUILDER_READS_BYTES, or a read that cannot be recorded, refuses the job with a message naming it.
 */
export function recordBuilderReads<T>(jobName: string, build: () => T): { result: T; reads: BuilderReads } {
  const reads: Record<string, RecordedValue[]> = {};
  const result = withHooks({ kind: 'record', reads }, jobName, build);
  const size = Buffer.byteLength(JSON.stringify(reads));
  if (size > MAX_BUILDER_READS_BYTES) {
    const largest = Object.entries(reads)
      .map(([read, values]) => [read, Buffer.byteLength(JSON.stringify(values))] as const)
      .sort((a, b) => b[1] - a[1])[0]!;
    throw new InvalidJobDefinitionError(
      `the builder of job '${jobName}' read ${size} bytes beyond its arguments (most in ${describeRead(largest[0])}: ${largest[1]} bytes); ` +
        `what a builder reads is stored with the job and sent to every task, at most ${MAX_BUILDER_READS_BYTES} bytes: ` +
        `read large data inside the job instead (readTextFile as a source, or in an operator)`,
    );
  }
  return { result, reads };
}

/** Runs `build` answering its reads from `reads` (what the client's builder read); a read not recorded fails. */
export function replayBuilderReads<T>(jobName: string, reads: BuilderReads, build: () => T): T {
  return withHooks({ kind: 'replay', reads, next: new Map() }, jobName, build);
}

/** 'environment variable MIN_VALUE', 'file /a/conf.json', 'Math.random()'… for messages. */
export function describeRead(read: string): string {
  if (read.startsWith('env:')) return `environment variable ${read.slice(4)}`;
  const fsCall = /^fs\.(\w+):(.*):[^:]*$/.exec(read);
  if (fsCall !== null) return `${fsCall[1]}('${fsCall[2]}')`;
  return `${read}()`;
}

function withHooks<T>(mode: Mode, jobName: string, build: () => T): T {
  const take = (read: string, live: () => RecordedValue): RecordedValue => {
    if (mode.kind === 'record') {
      let value: RecordedValue;
      try {
        value = live();
      } catch (e) {
        value = { [THROWN]: { message: (e as Error).message ?? String(e), code: ((e as NodeJS.ErrnoException).code ?? null) as string | null } };
      }
      (mode.reads[read] ??= []).push(value);
      return value;
    }
    const values = mode.reads[read];
    const i = mode.next.get(read) ?? 0;
    if (values === undefined || i >= values.length) {
      throw new BuilderReadMismatchError(
        `the builder of job '${jobName}' read ${describeRead(read)} in a task ${values === undefined ? 'but not on the client' : `${i + 1} times, on the client ${values.length}`}, ` +
          `so it would not make the client's job: it depends on something that differs between the client and the task ` +
          `(a module-level variable, the thread it runs on). Make the builder depend only on its arguments and on what it reads from the environment, files, the clock and random numbers`,
      );
    }
    mode.next.set(read, i + 1);
    return values[i]!;
  };
  const value = (read: string, live: () => RecordedValue): RecordedValue => {
    const v = take(read, live);
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && THROWN in v) {
      const thrown = (v as Record<string, { message: string; code: string | null }>)[THROWN]!;
      throw Object.assign(new Error(thrown.message), thrown.code === null ? {} : { code: thrown.code });
    }
    return v;
  };

  const saved = {
    env: process.env,
    cwd: process.cwd,
    random: Math.random,
    Date: globalThis.Date,
    performanceNow: performance.now,
    webRandomUUID: globalThis.crypto?.randomUUID,
    webGetRandomValues: globalThis.crypto?.getRandomValues,
    fs: { readFileSync: fs.readFileSync, existsSync: fs.existsSync, readdirSync: fs.readdirSync, statSync: fs.statSync },
    os: {
      hostname: os.hostname,
      homedir: os.homedir,
      tmpdir: os.tmpdir,
      cpus: os.cpus,
      availableParallelism: os.availableParallelism,
      totalmem: os.totalmem,
      freemem: os.freemem,
      userInfo: os.userInfo,
    },
    crypto: { randomUUID: crypto.randomUUID, randomBytes: crypto.randomBytes, randomInt: crypto.randomInt },
  };
  const realEnv = saved.env;
  const written = new Map<string, string | undefined>();
  const cwd = (): string => value('process.cwd', () => saved.cwd.call(process)) as string;
  const abs = (p: unknown): string => resolve(cwd(), p instanceof URL ? p.pathname : String(p));
  const encodingOf = (o: unknown): string => (typeof o === 'string' ? o : ((o as { encoding?: string } | undefined)?.encoding ?? ''));
  const refuse = (what: string, how: string): never => {
    throw new InvalidJobDefinitionError(`the builder of job '${jobName}' ${what}, which cannot be recorded for its tasks: ${how}`);
  };

  const envValue = (name: string): string | undefined => {
    if (written.has(name)) return written.get(name);
    const v = value(`env:${name}`, () => realEnv[name] ?? null);
    return v === null ? undefined : (v as string);
  };
  process.env = new Proxy(realEnv, {
    get(target, name) {
      return typeof name === 'string' ? envValue(name) : Reflect.get(target, name);
    },
    has(target, name) {
      return typeof name === 'string' ? envValue(name) !== undefined : Reflect.has(target, name);
    },
    // A variable the builder sets is set for real (its functions may read it when they run, in the
    // task's thread as on the client) and read back from what it set, which needs no recording.
    set(target, name, v) {
      if (typeof name === 'string') written.set(name, String(v));
      return Reflect.set(target, name, v);
    },
    deleteProperty(target, name) {
      if (typeof name === 'string') written.set(name, undefined);
      return Reflect.deleteProperty(target, name);
    },
    ownKeys() {
      return refuse(
        'enumerates process.env (Object.keys, a spread, for…in)',
        'read the variables it needs by name, e.g. process.env.MIN_VALUE; each one read is stored with the job',
      );
    },
    getOwnPropertyDescriptor(target, name) {
      if (typeof name !== 'string') return Reflect.getOwnPropertyDescriptor(target, name);
      const v = envValue(name);
      return v === undefined ? undefined : { value: v, writable: true, enumerable: true, configurable: true };
    },
  });
  process.cwd = cwd;
  Math.random = () => value('Math.random', () => saved.random()) as number;
  const now = (): number => value('Date.now', () => saved.Date.now()) as number;
  const RealDate = saved.Date;
  // new Date() and Date() read the clock; Date with arguments does not.
  const RecordedDate = function (this: unknown, ...args: unknown[]): unknown {
    if (!new.target) return new RealDate(now()).toString();
    return args.length === 0 ? new RealDate(now()) : new (RealDate as unknown as new (...a: unknown[]) => Date)(...args);
  } as unknown as DateConstructor;
  Object.setPrototypeOf(RecordedDate, RealDate);
  Object.defineProperty(RecordedDate, 'prototype', { value: RealDate.prototype });
  Object.defineProperty(RecordedDate, 'now', { value: now, configurable: true, writable: true });
  globalThis.Date = RecordedDate;
  performance.now = () => value('performance.now', () => saved.performanceNow.call(performance)) as number;
  if (globalThis.crypto !== undefined) {
    globalThis.crypto.randomUUID = () =>
      value('crypto.randomUUID', () => saved.webRandomUUID!.call(globalThis.crypto)) as `${string}-${string}-${string}-${string}-${string}`;
    globalThis.crypto.getRandomValues = <V extends ArrayBufferView | null>(array: V): V => {
      if (array === null) return array;
      const bytes = value('crypto.getRandomValues', () =>
        bytesOf(saved.webGetRandomValues!.call(globalThis.crypto, new Uint8Array(array.byteLength)) as Uint8Array),
      );
      new Uint8Array(array.buffer, array.byteOffset, array.byteLength).set(fromBytes(bytes));
      return array;
    };
  }

  fs.readFileSync = ((path: unknown, options?: unknown) => {
    if (typeof path === 'number') return refuse('reads a file descriptor', 'read files by path');
    const encoding = encodingOf(options);
    const v = value(`fs.readFileSync:${abs(path)}:${encoding}`, () => {
      const content = saved.fs.readFileSync(abs(path), options as never) as string | Buffer;
      return typeof content === 'string' ? content : bytesOf(content);
    });
    return typeof v === 'string' ? v : Buffer.from(fromBytes(v));
  }) as typeof fs.readFileSync;
  fs.existsSync = ((path: unknown) => value(`fs.existsSync:${abs(path)}:`, () => saved.fs.existsSync(abs(path)))) as typeof fs.existsSync;
  fs.readdirSync = ((path: unknown, options?: unknown) => {
    if ((options as { withFileTypes?: boolean } | undefined)?.withFileTypes === true) {
      const entries = value(`fs.readdirSync:${abs(path)}:types`, () =>
        saved.fs.readdirSync(abs(path), { withFileTypes: true }).map((d) => ({ name: d.name, file: d.isFile(), dir: d.isDirectory() })),
      ) as { name: string; file: boolean; dir: boolean }[];
      return entries.map((e) => ({ name: e.name, isFile: () => e.file, isDirectory: () => e.dir, isSymbolicLink: () => false }));
    }
    return value(`fs.readdirSync:${abs(path)}:${encodingOf(options)}`, () => saved.fs.readdirSync(abs(path), options as never) as string[]);
  }) as typeof fs.readdirSync;
  (fs as { statSync: unknown }).statSync = ((path: unknown, options?: unknown) => {
    const s = value(`fs.statSync:${abs(path)}:`, () => {
      const st = saved.fs.statSync(abs(path), options as never);
      return st === undefined ? null : { size: Number(st.size), mtimeMs: Number(st.mtimeMs), file: st.isFile(), dir: st.isDirectory() };
    }) as { size: number; mtimeMs: number; file: boolean; dir: boolean } | null;
    if (s === null) return undefined;
    return { size: s.size, mtimeMs: s.mtimeMs, mtime: new RealDate(s.mtimeMs), isFile: () => s.file, isDirectory: () => s.dir, isSymbolicLink: () => false };
  }) as typeof fs.statSync;
  for (const name of Object.keys(saved.os) as (keyof typeof saved.os)[]) {
    const original = saved.os[name] as (...a: unknown[]) => RecordedValue;
    (os as Record<string, unknown>)[name] = (...args: unknown[]) =>
      value(`os.${name}`, () => JSON.parse(JSON.stringify(original.apply(os, args))) as RecordedValue);
  }
  crypto.randomUUID = (() => value('crypto.randomUUID', () => saved.crypto.randomUUID())) as typeof crypto.randomUUID;
  crypto.randomBytes = ((size: number, callback?: unknown) => {
    if (callback !== undefined) return refuse('calls crypto.randomBytes with a callback', 'builders are synchronous: call it without one');
    return Buffer.from(fromBytes(value('crypto.randomBytes', () => bytesOf(saved.crypto.randomBytes(size)))));
  }) as typeof crypto.randomBytes;
  crypto.randomInt = ((...args: unknown[]) => {
    if (typeof args[args.length - 1] === 'function') return refuse('calls crypto.randomInt with a callback', 'builders are synchronous: call it without one');
    return value('crypto.randomInt', () => (saved.crypto.randomInt as (...a: unknown[]) => number)(...args));
  }) as typeof crypto.randomInt;
  // The ES exports of node:fs, node:os and node:crypto follow their patched functions only once synced
  // (15 µs each time). A replay whose client read none of them skips it: a task's builder that reads
  // one through an ES import then meets the real function, and its plan is still checked.
  const syncModules = mode.kind === 'record' || Object.keys(mode.reads).some((read) => /^(fs|os|crypto)\./.test(read));
  if (syncModules) syncBuiltinESMExports();

  try {
    return build();
  } finally {
    process.env = realEnv;
    process.cwd = saved.cwd;
    Math.random = saved.random;
    globalThis.Date = saved.Date;
    performance.now = saved.performanceNow;
    if (globalThis.crypto !== undefined) {
      globalThis.crypto.randomUUID = saved.webRandomUUID!;
      globalThis.crypto.getRandomValues = saved.webGetRandomValues!;
    }
    Object.assign(fs, saved.fs);
    Object.assign(os, saved.os);
    Object.assign(crypto, saved.crypto);
    if (syncModules) syncBuiltinESMExports();
  }
}

function bytesOf(b: Uint8Array): RecordedValue {
  return { [BYTES]: Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64') };
}

function fromBytes(v: RecordedValue): Uint8Array {
  return Buffer.from((v as Record<string, string>)[BYTES]!, 'base64');
}
