import { describe, expect, it } from 'vitest';
import { WatermarkStrategy } from '../../runtime/api/watermark-strategy.js';
import { TimestampsAndWatermarksOperator } from '../../runtime/task/timestamps-operator.js';
import { OneInputHarness } from '../support/operator-harness.js';

interface Event {
  readonly t: number;
  readonly split?: string;
}

const harness = (strategy: WatermarkStrategy<Event>, intervalMs = 200): { h: OneInputHarness; op: () => TimestampsAndWatermarksOperator } => {
  let made: TimestampsAndWatermarksOperator | undefined;
  const h = new OneInputHarness((ctx) => (made = new TimestampsAndWatermarksOperator(strategy as never, ctx, intervalMs)));
  return { h, op: () => made! };
};

describe('assignTimestampsAndWatermarks in a task', () => {
  it('stamps each record with its event time and emits the watermark every interval, only when it rises', async () => {
    const { h } = harness(WatermarkStrategy.forBoundedOutOfOrderness<Event>(100).withTimestampAssigner((e) => e.t));
    await h.open();
    await h.processElement({ t: 1_000 });
    await h.processElement({ t: 900 });
    expect(h.records().map((r) => r.timestamp)).toEqual([1_000, 900]);
    expect(h.watermarks()).toEqual([]);
    await h.setProcessingTime(200);
    expect(h.watermarks()).toEqual([899]);
    await h.setProcessingTime(400);
    expect(h.watermarks()).toEqual([899]);
    await h.processElement({ t: 1_500 });
    await h.setProcessingTime(600);
    expect(h.watermarks()).toEqual([899, 1_399]);
    await h.endInput();
    expect(h.watermarks()).toEqual([899, 1_399, Infinity]);
  });

  it('after a source, keeps a watermark per split and emits the minimum over the splits still read', async () => {
    const { h, op } = harness(WatermarkStrategy.forMonotonousTimestamps<Event>().withTimestampAssigner((e) => e.t));
    await h.open();
    op().startSplit('a');
    await h.processElement({ t: 5_000 });
    op().startSplit('b');
    await h.processElement({ t: 1_000 });
    await h.setProcessingTime(200);
    expect(h.watermarks()).toEqual([999]);
    op().endSplit('b');
    await h.setProcessingTime(400);
    expect(h.watermarks()).toEqual([999, 4_999]);
  });

  it('goes idle when every split is idle, so downstream waits for nobody, and active again with the next record', async () => {
    const { h } = harness(
      WatermarkStrategy.forMonotonousTimestamps<Event>()
        .withTimestampAssigner((e) => e.t)
        .withIdleness(500),
    );
    await h.open();
    await h.processElement({ t: 1_000 });
    await h.setProcessingTime(200);
    expect(h.watermarks()).toEqual([999]);
    await h.setProcessingTime(800);
    expect(h.statuses()).toEqual([true]);
    await h.processElement({ t: 2_000 });
    await h.setProcessingTime(1_000);
    expect(h.statuses()).toEqual([true, false]);
    expect(h.watermarks()).toEqual([999, 1_999]);
  });

  it('fails naming the operator when the assigner returns no number', async () => {
    const { h } = harness(WatermarkStrategy.forMonotonousTimestamps<Event>().withTimestampAssigner(() => 'soon' as unknown as number));
    await h.open();
    await expect(h.processElement({ t: 1 })).rejects.toThrow(/timestamp assigner of 'test-operator' returned string/);
  });
});

describe('a punctuated watermark generator', () => {
  it('has the watermark it emits from an event sent right after that event, not at the next tick', async () => {
    const strategy = WatermarkStrategy.forGenerator<Event>(() => ({
      onEvent: (e, _ts, out) => {
        if (e.split === 'marker') out.emitWatermark(e.t);
      },
      onPeriodicEmit: () => undefined,
    })).withTimestampAssigner((e) => e.t);
    const { h } = harness(strategy);
    await h.open();
    await h.processElement({ t: 100 });
    await h.processElement({ t: 150, split: 'marker' });
    expect(h.output.emitted.map((e) => (e.kind === 'record' ? e.timestamp : e.kind === 'watermark' ? `wm ${e.watermark}` : e.kind))).toEqual([
      100,
      150,
      'wm 150',
    ]);
  });
});
