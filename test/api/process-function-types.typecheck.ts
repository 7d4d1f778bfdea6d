// Compile-time checks of process functions and keyed state (this file is no vitest suite; `tsc --noEmit`
// checks it): each `@ts-expect-error` line must fail to type-check — a timer outside a keyed function,
// state used with a value of the wrong type, a keyed function on a non-keyed stream. The other lines must compile.
import { KeyedProcessFunction, ListStateDescriptor, MapStateDescriptor, OutputTag, ProcessFunction, ValueStateDescriptor } from 'floe';
import { RichMapFunction } from 'floe';
import type { Collector, KeyedContext, OnTimerContext, ProcessContext, StreamEnvironment } from 'floe';

export class Keyed extends KeyedProcessFunction<string, number, string> {
  processElement(value: number, ctx: KeyedContext<string>, out: Collector<string>): void {
    const count = this.getRuntimeContext().getState(new ValueStateDescriptor<number>('n'));
    count.update((count.value() ?? 0) + value);
    // @ts-expect-error the state holds numbers
    count.update('x');
    const items = this.getRuntimeContext().getListState(new ListStateDescriptor<string>('items'));
    items.add(ctx.getCurrentKey());
    // @ts-expect-error the list holds strings
    items.add(value);
    const map = this.getRuntimeContext().getMapState(new MapStateDescriptor<string, number>('m'));
    map.put('a', 1);
    // @ts-expect-error the map's values are numbers
    map.put('a', 'one');
    // @ts-expect-error getState takes a ValueStateDescriptor, not a ListStateDescriptor
    this.getRuntimeContext().getState(new ListStateDescriptor<number>('l'));
    ctx.timerService().registerEventTimeTimer(ctx.timestamp()! + 1000);
    ctx.timerService().registerProcessingTimeTimer(ctx.timerService().currentProcessingTime() + 1000);
    ctx.output(new OutputTag<number>('numbers'), value);
    // @ts-expect-error the side output holds numbers
    ctx.output(new OutputTag<number>('numbers'), 'x');
    out.collect(ctx.getCurrentKey());
    // @ts-expect-error the function emits strings
    out.collect(value);
    // @ts-expect-error the key is a string
    const k: number = ctx.getCurrentKey();
    void k;
  }

  override onTimer(timestamp: number, ctx: OnTimerContext<string>, out: Collector<string>): void {
    out.collect(`${ctx.getCurrentKey()} ${ctx.timeDomain()} ${timestamp}`);
  }
}

export class NotKeyed extends ProcessFunction<number, number> {
  processElement(value: number, ctx: ProcessContext, out: Collector<number>): void {
    out.collect(value + ctx.timerService().currentWatermark() + ctx.timerService().currentProcessingTime());
    // @ts-expect-error timers need a keyed stream: a ProcessFunction's timer service only reads the time
    ctx.timerService().registerEventTimeTimer(5);
    // @ts-expect-error timers need a keyed stream
    ctx.timerService().registerProcessingTimeTimer(5);
    // @ts-expect-error there is no current key without keyBy
    ctx.getCurrentKey();
  }
}

class Half extends RichMapFunction<number, number> {
  map(value: number): number {
    return value / 2 + this.getRuntimeContext().getIndexOfThisSubtask();
  }
}

export function streams(env: StreamEnvironment): void {
  const numbers = env.fromCollection([1, 2, 3]);
  const strings = env.fromCollection(['a', 'b']);
  numbers.keyBy((n) => String(n)).process(new Keyed());
  numbers.process(new NotKeyed()).map((n: number) => n + 1);
  numbers.map(new Half()).map((n: number) => n);
  // @ts-expect-error a KeyedProcessFunction needs a keyed stream: keyBy first
  numbers.process(new Keyed());
  // @ts-expect-error a ProcessFunction on a keyed stream: use a KeyedProcessFunction
  numbers.keyBy((n) => n).process(new NotKeyed());
  // @ts-expect-error the function takes numbers, the stream has strings
  strings.process(new NotKeyed());
  // @ts-expect-error the keys are numbers, the function expects string keys
  numbers.keyBy((n) => n).process(new Keyed());
  // @ts-expect-error the rich map takes numbers
  strings.map(new Half());
}
