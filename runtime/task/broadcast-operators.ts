// Broadcast state (Flink's CoBroadcastWithNonKeyedOperator and CoBroadcastWithKeyedOperator): the second
// input is a broadcast stream every subtask receives whole; its records write maps of broadcast state
// that each subtask holds for itself (alike, when the function writes alike), and the first input's
// records read them. The keyed variant adds keyed state, timers, and applyToKeyedState.
import { canonicalKey } from '../network/key-groups.js';
import { CoFunctionError, EmitBuffer, UserTimers, closeFunction, methodOf, openFunction, optionalMethodOf } from './co-operators.js';
import type { KeyedOperatorContext, StreamOperatorContext, TwoInputOperator } from './stream-operator.js';
import type { InternalTimer } from './timer-service.js';
import { snapshotFileName } from './keyed-state-snapshots.js';
import { readOperatorState, snapshotOperatorState, type OperatorStateList } from './state/operator-state-snapshot.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';

/** The operator-state list of the broadcast state `name`. */
const broadcastList = (name: string): string => `broadcast-state:${name}`;

/** One broadcast state: a map whose keys compare by value, as MapState's. */
export class BroadcastMap {
  private readonly entriesByKey = new Map<string, [unknown, unknown]>();

  get(key: unknown): unknown {
    return this.entriesByKey.get(canonicalKey(key))?.[1];
  }

  contains(key: unknown): boolean {
    return this.entriesByKey.has(canonicalKey(key));
  }

  put(key: unknown, value: unknown): void {
    this.entriesByKey.set(canonicalKey(key), [key, value]);
  }

  putAll(entries: Iterable<readonly [unknown, unknown]>): void {
    for (const [k, v] of entries) this.put(k, v);
  }

  remove(key: unknown): void {
    this.entriesByKey.delete(canonicalKey(key));
  }

  clear(): void {
    this.entriesByKey.clear();
  }

  entries(): [unknown, unknown][] {
    return [...this.entriesByKey.values()].map(([k, v]) => [k, v]);
  }

  immutableEntries(): [unknown, unknown][] {
    return this.entries();
  }

  get size(): number {
    return this.entriesByKey.size;
  }

  /** The view the non-broadcast side gets: reads only. */
  readOnly(): Record<string, unknown> {
    return {
      get: (k: unknown) => this.get(k),
      contains: (k: unknown) => this.contains(k),
      immutableEntries: () => this.immutableEntries(),
    };
  }
}

/** The broadcast states of one operator subtask, by descriptor name; only the declared ones exist. */
export class BroadcastStates {
  private readonly maps = new Map<string, BroadcastMap>();

  constructor(
    names: readonly string[],
    private readonly operatorName: string,
  ) {
    for (const name of names) this.maps.set(name, new BroadcastMap());
  }

  get(descriptor: unknown): BroadcastMap {
    const name = (descriptor as { name?: unknown } | null)?.name;
    const map = typeof name === 'string' ? this.maps.get(name) : undefined;
    if (map === undefined) {
      throw new CoFunctionError(
        `operator '${this.operatorName}' asked for broadcast state ${JSON.stringify(name)}, but its broadcast stream declares ${[...this.maps.keys()].map((n) => `'${n}'`).join(', ') || 'none'}; ` +
          'name the MapStateDescriptor in stream.broadcast(descriptor) and use the same name in getBroadcastState',
      );
    }
    return map;
  }

  /** Every broadcast state as a union list of [key, value] entries (each subtask restores them all). */
  snapshotLists(): OperatorStateList[] {
    return [...this.maps].map(([name, map]) => ({ name: broadcastList(name), mode: 'union' as const, entries: map.entries() }));
  }

  /** Puts back the entries of the lists snapshotLists made (of one subtask or several: equal keys, one entry). */
  restore(lists: ReadonlyMap<string, readonly unknown[]>): void {
    for (const [name, map] of this.maps) {
      const entries = lists.get(broadcastList(name));
      if (entries !== undefined) map.putAll(entries as [unknown, unknown][]);
    }
  }
}

/**
 * The non-keyed operator: processElement(value, ReadOnlyContext, out) on the first input,
 * processBroadcastElement(value, Context, out) on the broadcast input.
 */
export class BroadcastProcessOperator implements TwoInputOperator {
  protected readonly buffer: EmitBuffer;
  protected readonly states: BroadcastStates;
  protected watermark = -Infinity;
  private readonly process: (...args: unknown[]) => unknown;
  private readonly processBroadcast: (...args: unknown[]) => unknown;
  protected readonly readOnlyCtx: Record<string, unknown>;
  protected readonly ctx: Record<string, unknown>;

  constructor(
    protected readonly context: StreamOperatorContext,
    stateNames: readonly string[],
    protected readonly fn: unknown,
    expected = 'BroadcastProcessFunction',
  ) {
    const name = context.operatorName;
    this.buffer = new EmitBuffer(context.output, name);
    this.states = new BroadcastStates(stateNames, name);
    this.process = methodOf(fn, 'processElement', name, expected);
    this.processBroadcast = methodOf(fn, 'processBroadcastElement', name, expected);
    const base = {
      timestamp: () => this.buffer.timestamp,
      output: (tag: unknown, value: unknown) => this.buffer.side(tag, value),
      currentProcessingTime: () => context.processingTime.getCurrentProcessingTime(),
      currentWatermark: () => this.watermark,
    };
    this.readOnlyCtx = { ...base, getBroadcastState: (d: unknown) => this.states.get(d).readOnly() };
    this.ctx = { ...base, getBroadcastState: (d: unknown) => this.states.get(d) };
  }

  open(): Promise<void> {
    return openFunction(this.fn, this.context, undefined);
  }

  /** Restores the broadcast states (operator state, mode union) before open. */
  async initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    if (restored === undefined || restored.operator.length === 0) return;
    this.states.restore(await readOperatorState(restored.operator, access));
  }

  /** The broadcast states, encoded at the barrier. */
  async snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const name = snapshotFileName(this.context.operatorName, this.context.subtaskIndex, 'broadcast');
    return { keyed: [], operator: [await snapshotOperatorState(checkpointId, access, this.states.snapshotLists(), name)] };
  }

  readonly processElement1 = (value: unknown, timestamp?: number): Promise<void> | void => {
    this.beforeElement(value);
    this.buffer.timestamp = timestamp;
    return this.buffer.call(() => this.process(value, this.readOnlyCtx, this.buffer.collector));
  };

  readonly processElement2 = (value: unknown, timestamp?: number): Promise<void> | void => {
    this.buffer.timestamp = timestamp;
    return this.buffer.call(() => this.processBroadcast(value, this.ctx, this.buffer.collector));
  };

  /** Sets what processing `value` of the first input needs (the keyed operator: its key). */
  protected beforeElement(_value: unknown): void {}

  async processWatermark(watermark: number): Promise<void> {
    this.watermark = Math.max(this.watermark, watermark);
    await this.advanceTimers(watermark);
    await this.context.output.emitWatermark(watermark);
  }

  protected advanceTimers(_watermark: number): Promise<void> | void {}

  async endInput(): Promise<void> {
    await this.advanceTimers(Infinity);
  }

  close(): Promise<void> {
    return closeFunction(this.fn, this.context);
  }
}

/**
 * The keyed operator: the first input is keyed (keyed state, timers, getCurrentKey() in processElement
 * and onTimer); processBroadcastElement may apply a function to one keyed state of every key held here.
 */
export class KeyedBroadcastProcessOperator extends BroadcastProcessOperator {
  private readonly timers: UserTimers;
  private readonly onTimer: ((...args: unknown[]) => unknown) | undefined;

  constructor(
    private readonly keyed: KeyedOperatorContext,
    stateNames: readonly string[],
    fn: unknown,
  ) {
    super(keyed, stateNames, fn, 'KeyedBroadcastProcessFunction');
    this.onTimer = optionalMethodOf(fn, 'onTimer');
    this.timers = new UserTimers(keyed, (timer, domain) => this.fire(timer, domain));
    Object.assign(this.readOnlyCtx, {
      timerService: () => this.timers.timerService,
      getCurrentKey: () => keyed.stateBackend.getCurrentKey(),
      timeDomain: () => this.timers.domain,
    });
    Object.assign(this.ctx, { applyToKeyedState: (descriptor: unknown, apply: unknown) => this.applyToKeyedState(descriptor, apply) });
  }

  override open(): Promise<void> {
    return openFunction(this.fn, this.keyed, this.keyed);
  }

  /** Restores the broadcast states, and the keyed state and timers of the key groups this subtask owns. */
  override async initializeState(restored: OperatorSubtaskState | undefined, access: CheckpointStreamFactory): Promise<void> {
    await super.initializeState(restored, access);
    await this.timers.restore(this.keyed, restored, access);
  }

  /** The broadcast states, the keyed state and the timers, all encoded at the barrier. */
  override async snapshotState(checkpointId: number, access: CheckpointStreamFactory): Promise<OperatorSubtaskState> {
    const broadcast = super.snapshotState(checkpointId, access);
    const keyed = this.timers.snapshot(this.keyed, checkpointId, access);
    const [b, k] = await Promise.all([broadcast, keyed]);
    return { keyed: k.keyed, operator: b.operator };
  }

  protected override beforeElement(value: unknown): void {
    this.keyed.stateBackend.setCurrentKey(this.keyed.keySelector(value));
  }

  protected override advanceTimers(watermark: number): Promise<void> {
    return this.timers.advanceWatermark(watermark);
  }

  private fire(timer: InternalTimer<undefined>, domain: 'EVENT_TIME' | 'PROCESSING_TIME'): Promise<void> | void {
    const onTimer = this.onTimer;
    if (onTimer === undefined) {
      throw new CoFunctionError(`operator '${this.keyed.operatorName}' set a timer but its KeyedBroadcastProcessFunction has no onTimer(timestamp, ctx, out)`);
    }
    this.timers.domain = domain;
    this.buffer.timestamp = domain === 'EVENT_TIME' ? timer.timestamp : undefined;
    return this.buffer.call(() => onTimer(timer.timestamp, this.readOnlyCtx, this.buffer.collector));
  }

  /** Calls apply(key, state) for every key of this subtask that holds an entry of the state `descriptor` names. */
  private applyToKeyedState(descriptor: unknown, apply: unknown): void {
    const name = (descriptor as { name?: unknown } | null)?.name;
    if (typeof apply !== 'function' || typeof name !== 'string') {
      throw new CoFunctionError(
        `applyToKeyedState(descriptor, fn) in operator '${this.keyed.operatorName}' needs a state descriptor and a function (key, state) => void`,
      );
    }
    const backend = this.keyed.stateBackend;
    const state = backend.getPartitionedState(descriptor as Parameters<typeof backend.getPartitionedState>[0]);
    const keys: unknown[] = [];
    for (let group = backend.keyGroupRange.start; group <= backend.keyGroupRange.end; group++) {
      for (const entry of backend.keyGroupEntries(group)) if (entry.stateName === name) keys.push(entry.key);
    }
    for (const key of keys) {
      backend.setCurrentKey(key);
      (apply as (key: unknown, state: unknown) => void)(key, state);
    }
  }

  override async close(): Promise<void> {
    this.timers.service.dispose();
    await super.close();
  }
}
