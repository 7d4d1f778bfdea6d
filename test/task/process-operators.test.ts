import { describe, expect, it } from 'vitest';
import {
  KeyedProcessFunction,
  ProcessFunction,
  RichFilterFunction,
  RichFlatMapFunction,
  RichFunctionAdapter,
  RichMapFunction,
  type Collector,
  type KeyedContext,
  type OnTimerContext,
  type OpenContext,
  type ProcessContext,
} from '../../runtime/api/process-function.js';
import { OutputTag } from '../../runtime/api/output-tag.js';
import {
  AggregatingStateDescriptor,
  ListStateDescriptor,
  MapStateDescriptor,
  ReducingStateDescriptor,
  StateTtlConfig,
  ValueStateDescriptor,
  type ValueState,
} from '../../runtime/api/state.js';
import { operatorOf } from '../../runtime/task/task-io.js';
import { KeyedOnlyError, KeyedProcessOperator, ProcessOperator, StateDescriptorError } from '../../runtime/task/process-operators.js';
import { OneInputHarness, type HarnessOptions } from '../support/operator-harness.js';

type Event = { user: string; ts: number };

/** Counts each user's events; a timer at ts + 1000 of each event emits the user's count then. */
class CountWithTimeout extends KeyedProcessFunction<string, Event, [string, number, number]> {
  private count!: ValueState<number>;

  override open(_ctx: OpenContext): void {
    this.count = this.getRuntimeContext().getState(new ValueStateDescriptor<number>('count', 0));
  }

  processElement(value: Event, ctx: KeyedContext<string>, _out: Collector<[string, number, number]>): void {
    this.count.update(this.count.value()! + 1);
    ctx.timerService().registerEventTimeTimer(ctx.timestamp()! + 1000);
  }

  override onTimer(timestamp: number, ctx: OnTimerContext<string>, out: Collector<[string, number, number]>): void {
    out.collect([ctx.getCurrentKey(), this.count.value()!, timestamp]);
  }
}

const keyedHarness = (fn: unknown, options: HarnessOptions = {}) =>
  new OneInputHarness((ctx) => new KeyedProcessOperator(ctx, fn), { keySelector: (e) => (e as Event).user, ...options });

describe('KeyedProcessOperator', () => {
  it('fires event-time timers when the watermark reaches them, with the key current, before passing the watermark on', async () => {
    const h = keyedHarness(new CountWithTimeout());
    await h.open();
    await h.processElement({ user: 'a', ts: 100 }, 100);
    await h.processElement({ user: 'b', ts: 150 }, 150);
    await h.processElement({ user: 'a', ts: 400 }, 400);
    await h.processWatermark(1099);
    expect(h.values()).toEqual([]);
    expect(h.watermarks()).toEqual([1099]);
    await h.processWatermark(1150);
    // a's timer at 1100 and b's at 1150; a's count is 2 by then. Records carry the timer's time.
    expect(h.records()).toEqual([
      { value: ['a', 2, 1100], timestamp: 1100 },
      { value: ['b', 1, 1150], timestamp: 1150 },
    ]);
    expect(h.output.emitted.at(-1)).toEqual({ kind: 'watermark', watermark: 1150 });
    h.clear();
    await h.endInput();
    expect(h.values()).toEqual([['a', 2, 1400]]);
    expect(h.watermarks()).toEqual([Number.POSITIVE_INFINITY]);
    await h.close();
  });

  it('registers a timer once per key and time, deletes it, and gives records the input timestamp', async () => {
    class Fn extends KeyedProcessFunction<string, Event, string> {
      processElement(value: Event, ctx: KeyedContext<string>, out: Collector<string>): void {
        ctx.timerService().registerEventTimeTimer(500);
        ctx.timerService().registerEventTimeTimer(500);
        ctx.timerService().registerEventTimeTimer(600);
        if (value.ts > 10) ctx.timerService().deleteEventTimeTimer(600);
        out.collect(`${ctx.getCurrentKey()}@${ctx.timestamp()}`);
      }
      override onTimer(timestamp: number, ctx: OnTimerContext<string>, out: Collector<string>): void {
        out.collect(`timer ${ctx.getCurrentKey()} ${timestamp} ${ctx.timeDomain()} ${ctx.timestamp()}`);
      }
    }
    const h = keyedHarness(new Fn());
    await h.open();
    await h.processElement({ user: 'x', ts: 5 }, 5);
    await h.processElement({ user: 'x', ts: 20 }, 20);
    await h.processWatermark(1000);
    expect(h.records()).toEqual([
      { value: 'x@5', timestamp: 5 },
      { value: 'x@20', timestamp: 20 },
      { value: 'timer x 500 EVENT_TIME 500', timestamp: 500 },
    ]);
  });

  it('fires processing-time timers when the task clock reaches them; their records carry no timestamp', async () => {
    class Fn extends KeyedProcessFunction<string, Event, string> {
      processElement(_value: Event, ctx: KeyedContext<string>): void {
        ctx.timerService().registerProcessingTimeTimer(ctx.timerService().currentProcessingTime() + 300);
      }
      override onTimer(timestamp: number, ctx: OnTimerContext<string>, out: Collector<string>): void {
        out.collect(`${ctx.getCurrentKey()} ${timestamp} ${ctx.timeDomain()} ${ctx.timestamp()}`);
      }
    }
    const h = keyedHarness(new Fn(), { startMs: 10_000 });
    await h.open();
    await h.processElement({ user: 'p', ts: 1 }, 1);
    await h.setProcessingTime(10_200);
    await h.processElement({ user: 'q', ts: 2 }, 2);
    await h.setProcessingTime(10_299);
    expect(h.values()).toEqual([]);
    await h.setProcessingTime(10_300);
    expect(h.records()).toEqual([{ value: 'p 10300 PROCESSING_TIME 10300', timestamp: undefined }]);
    await h.setProcessingTime(10_500);
    expect(h.values()).toEqual(['p 10300 PROCESSING_TIME 10300', 'q 10500 PROCESSING_TIME 10500']);
    await h.close();
  });

  it('keeps each kind of state per key', async () => {
    class Fn extends KeyedProcessFunction<string, Event, unknown> {
      processElement(value: Event, _ctx: KeyedContext<string>, out: Collector<unknown>): void {
        const rc = this.getRuntimeContext();
        const list = rc.getListState(new ListStateDescriptor<number>('list'));
        const map = rc.getMapState(new MapStateDescriptor<number, string>('map'));
        const max = rc.getReducingState(new ReducingStateDescriptor<number>('max', (a, b) => Math.max(a, b)));
        const avg = rc.getAggregatingState(
          new AggregatingStateDescriptor<number, [number, number], number>('avg', {
            createAccumulator: () => [0, 0],
            add: (v, [s, n]) => [s + v, n + 1],
            getResult: ([s, n]) => s / n,
          }),
        );
        list.add(value.ts);
        map.put(value.ts, value.user);
        max.add(value.ts);
        avg.add(value.ts);
        out.collect({ user: value.user, list: list.get(), keys: map.keys(), max: max.get(), avg: avg.get() });
      }
    }
    const h = keyedHarness(new Fn());
    await h.open();
    await h.processElement({ user: 'a', ts: 4 });
    await h.processElement({ user: 'b', ts: 1 });
    await h.processElement({ user: 'a', ts: 2 });
    expect(h.values()).toEqual([
      { user: 'a', list: [4], keys: [4], max: 4, avg: 4 },
      { user: 'b', list: [1], keys: [1], max: 1, avg: 1 },
      { user: 'a', list: [4, 2], keys: [4, 2], max: 4, avg: 3 },
    ]);
  });

  it('expires state after its time-to-live on processing time', async () => {
    class Fn extends KeyedProcessFunction<string, Event, [string, number]> {
      private seen!: ValueState<number>;
      override open(): void {
        const d = new ValueStateDescriptor<number>('seen');
        d.enableTimeToLive(StateTtlConfig.newBuilder(1000).build());
        this.seen = this.getRuntimeContext().getState(d);
      }
      processElement(value: Event, _ctx: KeyedContext<string>, out: Collector<[string, number]>): void {
        const n = (this.seen.value() ?? 0) + 1;
        this.seen.update(n);
        out.collect([value.user, n]);
      }
    }
    const h = keyedHarness(new Fn(), { startMs: 0 });
    await h.open();
    await h.processElement({ user: 'a', ts: 0 });
    await h.setProcessingTime(999);
    await h.processElement({ user: 'a', ts: 0 });
    await h.setProcessingTime(1998);
    await h.processElement({ user: 'a', ts: 0 });
    await h.setProcessingTime(2998);
    await h.processElement({ user: 'a', ts: 0 });
    // Refreshed on each write: the third write is 999 ms after the second; the fourth comes 1000 ms after the third.
    expect(h.values()).toEqual([
      ['a', 1],
      ['a', 2],
      ['a', 3],
      ['a', 1],
    ]);
  });

  it('gives the runtime context of its subtask and calls open before the first record and close at the end', async () => {
    const calls: string[] = [];
    class Fn extends KeyedProcessFunction<number, number, string> {
      override open(): void {
        const rc = this.getRuntimeContext();
        calls.push(`open ${rc.getIndexOfThisSubtask()}/${rc.getNumberOfParallelSubtasks()} of ${rc.getMaxNumberOfParallelSubtasks()} in ${rc.getTaskName()}`);
      }
      processElement(value: number, _ctx: KeyedContext<number>, out: Collector<string>): void {
        out.collect(`${value} on ${this.getRuntimeContext().getIndexOfThisSubtask()}`);
      }
      override close(): void {
        calls.push('close');
      }
    }
    // Key 3's key group under 256 groups belongs to subtask 2 of 4 (checked by the backend, which refuses other keys).
    const h = new OneInputHarness((ctx) => new KeyedProcessOperator(ctx, new Fn()), {
      keySelector: (r) => r,
      subtaskIndex: 2,
      parallelism: 4,
      maxParallelism: 256,
    });
    await h.open();
    const { subtaskForKey } = await import('../../runtime/network/key-groups.js');
    const mine = [...Array(50).keys()].filter((k) => subtaskForKey(k, 4, 256) === 2).slice(0, 2);
    for (const k of mine) await h.processElement(k);
    await h.close();
    expect(calls).toEqual(['open 2/4 of 256 in test-task', 'close']);
    expect(h.values()).toEqual(mine.map((k) => `${k} on 2`));
  });

  it('sends side outputs in order with the record timestamp, after the call returns, also from async calls', async () => {
    const late = new OutputTag<string>('late');
    let sentDuringCall = -1;
    class Fn extends KeyedProcessFunction<string, Event, string> {
      async processElement(value: Event, ctx: KeyedContext<string>, out: Collector<string>): Promise<void> {
        out.collect(`first ${value.user}`);
        await Promise.resolve();
        if (value.ts < ctx.timerService().currentWatermark()) ctx.output(late, `late ${value.user}`);
        out.collect(`second ${value.user}`);
        sentDuringCall = h.output.emitted.length;
      }
    }
    const h = keyedHarness(new Fn());
    await h.open();
    await h.processWatermark(100);
    h.clear();
    await h.processElement({ user: 'a', ts: 50 }, 50);
    expect(sentDuringCall).toBe(0);
    expect(h.output.emitted).toEqual([
      { kind: 'record', value: 'first a', timestamp: 50 },
      { kind: 'side', tag: 'late', value: 'late a', timestamp: 50 },
      { kind: 'record', value: 'second a', timestamp: 50 },
    ]);
  });

  it('notes the operator in the errors its function throws or rejects with', async () => {
    class Throws extends KeyedProcessFunction<string, Event, string> {
      processElement(value: Event): void {
        if (value.user === 'bad') throw new Error('no bad users');
      }
    }
    class Rejects extends KeyedProcessFunction<string, Event, string> {
      async processElement(): Promise<void> {
        throw new Error('rejected');
      }
    }
    const h = keyedHarness(new Throws());
    const thrown = await h.processElement({ user: 'bad', ts: 0 }).catch((e: unknown) => e);
    expect(thrown).toMatchObject({ message: 'no bad users' });
    expect(operatorOf(thrown)).toBe('test-operator');
    const r = keyedHarness(new Rejects());
    const rejected = await r.processElement({ user: 'x', ts: 0 }).catch((e: unknown) => e);
    expect(operatorOf(rejected)).toBe('test-operator');
  });

  it('refuses a state asked for through the method of another kind, naming the right one', async () => {
    class Fn extends KeyedProcessFunction<string, Event, string> {
      processElement(): void {
        (this.getRuntimeContext().getState as (d: unknown) => unknown)(new ListStateDescriptor<number>('items'));
      }
    }
    const h = keyedHarness(new Fn());
    const e = await h.processElement({ user: 'a', ts: 0 }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(StateDescriptorError);
    expect((e as Error).message).toContain('getListState');
  });

  it('refuses an object without processElement when the task sets it up', () => {
    expect(() => keyedHarness({ process: () => undefined })).toThrow(/needs a process function .*KeyedProcessFunction/);
  });
});

describe('ProcessOperator', () => {
  it('processes each record with its timestamp and the current watermark, and passes watermarks on', async () => {
    class Fn extends ProcessFunction<number, string> {
      processElement(value: number, ctx: ProcessContext, out: Collector<string>): void {
        out.collect(`${value} at ${ctx.timestamp()} after ${ctx.timerService().currentWatermark()}`);
      }
    }
    const h = new OneInputHarness((ctx) => new ProcessOperator(ctx, new Fn()));
    await h.open();
    await h.processElement(1, 10);
    await h.processWatermark(20);
    await h.processElement(2);
    expect(h.output.emitted).toEqual([
      { kind: 'record', value: '1 at 10 after -Infinity', timestamp: 10 },
      { kind: 'watermark', watermark: 20 },
      { kind: 'record', value: '2 at undefined after 20', timestamp: undefined },
    ]);
  });

  it('fails timers and keyed state, which need a keyed stream, saying to key it', async () => {
    class Timer extends ProcessFunction<number, string> {
      processElement(_v: number, ctx: ProcessContext): void {
        (ctx.timerService() as unknown as { registerEventTimeTimer(t: number): void }).registerEventTimeTimer(5);
      }
    }
    class State extends ProcessFunction<number, string> {
      processElement(): void {
        this.getRuntimeContext().getState(new ValueStateDescriptor<number>('n'));
      }
    }
    for (const fn of [new Timer(), new State()]) {
      const h = new OneInputHarness((ctx) => new ProcessOperator(ctx, fn));
      const e = await h.processElement(1).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(KeyedOnlyError);
      expect((e as Error).message).toMatch(/keyBy\(…\)\.process/);
    }
  });
});

describe('rich map, flatMap and filter', () => {
  it('run as process functions: open with the runtime context, then per record, then close', async () => {
    const calls: string[] = [];
    class Scale extends RichMapFunction<number, number> {
      private factor = 0;
      override open(): void {
        this.factor = 10 ** this.getRuntimeContext().getIndexOfThisSubtask();
        calls.push(`open map on ${this.getRuntimeContext().getNumberOfParallelSubtasks()}`);
      }
      async map(value: number): Promise<number> {
        return value * this.factor;
      }
      override close(): void {
        calls.push('close map');
      }
    }
    class Words extends RichFlatMapFunction<string, string> {
      flatMap(value: string, out: Collector<string>): void {
        for (const w of value.split(' ')) out.collect(w);
      }
    }
    class Odd extends RichFilterFunction<number> {
      filter(value: number): boolean {
        return value % 2 === 1;
      }
    }
    const map = new OneInputHarness((ctx) => new ProcessOperator(ctx, new RichFunctionAdapter('map', new Scale())), { subtaskIndex: 2, parallelism: 3 });
    await map.open();
    await map.processElement(7, 70);
    await map.close();
    expect(map.records()).toEqual([{ value: 700, timestamp: 70 }]);
    expect(calls).toEqual(['open map on 3', 'close map']);

    const flat = new OneInputHarness((ctx) => new ProcessOperator(ctx, new RichFunctionAdapter('flatMap', new Words())));
    await flat.processElement('to be or');
    expect(flat.values()).toEqual(['to', 'be', 'or']);

    const odd = new OneInputHarness((ctx) => new ProcessOperator(ctx, new RichFunctionAdapter('filter', new Odd())));
    for (const n of [1, 2, 3, 4]) await odd.processElement(n);
    expect(odd.values()).toEqual([1, 3]);
  });
});
