// The job of bench/checkpoints.ts's state-size runs: an unbounded rate-limited generator over `keys` keys,
// each record replacing its key's ValueState with a payload of `payload` bytes, so the keyed state grows to
// keys × (payload + key) bytes and then stays there. Args: <keys> <payload bytes> <records/s> <parallelism>.
import { defineJob, DiscardingSink, KeyedProcessFunction, ValueStateDescriptor } from 'floe';
import type { Collector, KeyedContext, ValueState } from 'floe';

class KeepLatest extends KeyedProcessFunction<number, number, number> {
  private latest!: ValueState<string>;
  private readonly filler: string;

  constructor(payload: number) {
    super();
    this.filler = 'x'.repeat(payload);
  }

  override open(): void {
    this.latest = this.getRuntimeContext().getState(new ValueStateDescriptor<string>('latest'));
  }

  processElement(i: number, _ctx: KeyedContext<number>, _out: Collector<number>): void {
    this.latest.update(`${i}${this.filler}`);
  }
}

export default defineJob('keyed-state', (env, args) => {
  const [keys, payload, rate, parallelism] = [Number(args[0] ?? 100_000), Number(args[1] ?? 1000), Number(args[2] ?? 50_000), Number(args[3] ?? 2)];
  env
    .generate((i) => i, { ratePerSecond: rate })
    .setParallelism(parallelism)
    .uid('numbers')
    .keyBy((i) => i % keys)
    .process(new KeepLatest(payload))
    .setParallelism(parallelism)
    .uid('keep-latest')
    .sinkTo(new DiscardingSink());
});
