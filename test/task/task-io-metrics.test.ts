// A task's time split into busy, idle and back-pressured, its rates over a window, and the watermark as
// JSON carries it, on a hand-moved clock.
import { describe, expect, it } from 'vitest';
import { decodeWatermark, encodeWatermark } from '../../runtime/core/watermark-json.js';
import { newChainCounters, TaskIoMetrics, TaskRates } from '../../runtime/task/task-io-metrics.js';
import { liveVertexMetrics } from '../../runtime/jobmaster/execution-graph-views.js';
import { ExecutionState } from '../../runtime/jobgraph/job-status.js';

function clock() {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

/** A wait that ends when `end` is called. */
function pending() {
  let end!: () => void;
  const wait = new Promise<void>((r) => (end = r));
  return { wait, end };
}

describe('TaskIoMetrics and TaskRates', () => {
  it('splits each second into idle, back-pressured and busy time', async () => {
    const c = clock();
    const io = new TaskIoMetrics(c.now);
    const counters = newChainCounters();
    const rates = new TaskRates(counters, io, c.now);
    // 300 ms waiting for input, 500 ms waiting for output, 200 ms working.
    const input = pending();
    const idle = io.idle(input.wait);
    c.advance(300);
    input.end();
    await idle;
    const output = pending();
    const blocked = io.backPressured(output.wait);
    c.advance(500);
    output.end();
    await blocked;
    c.advance(200);
    counters.recordsIn += 50;
    counters.recordsOut += 25;
    const r = rates.report();
    expect(r.idleTimeMsPerSecond).toBe(300);
    expect(r.backPressuredTimeMsPerSecond).toBe(500);
    expect(r.busyTimeMsPerSecond).toBe(200);
    expect(r.recordsInPerSecond).toBe(50);
    expect(r.recordsOutPerSecond).toBe(25);
    expect(r.watermark).toBe('-Infinity');
  });

  it('counts a wait under way, and overlapping waits once (as back-pressure)', () => {
    const c = clock();
    const io = new TaskIoMetrics(c.now);
    const rates = new TaskRates(newChainCounters(), io, c.now);
    void io.idle(pending().wait);
    c.advance(400);
    void io.backPressured(pending().wait);
    c.advance(600);
    const r = rates.report();
    expect(r.idleTimeMsPerSecond).toBe(400);
    expect(r.backPressuredTimeMsPerSecond).toBe(600);
    expect(r.busyTimeMsPerSecond).toBe(0);
  });

  it('takes its rates over the last window only', () => {
    const c = clock();
    const io = new TaskIoMetrics(c.now);
    const counters = newChainCounters();
    const rates = new TaskRates(counters, io, c.now, 2_000);
    // A fast first stretch, then a slow one: after a window has passed only the slow one counts.
    for (let i = 0; i < 4; i++) {
      c.advance(500);
      counters.recordsIn += 1_000;
      rates.report();
    }
    for (let i = 0; i < 8; i++) {
      c.advance(500);
      counters.recordsIn += 10;
      rates.report();
    }
    const r = rates.report();
    expect(r.recordsInPerSecond).toBeGreaterThan(0);
    expect(r.recordsInPerSecond).toBeLessThanOrEqual(20);
    expect(r.recordsIn).toBe(4_080);
  });

  it('has no rates before any time passed, and a finite watermark as a number', () => {
    const c = clock();
    const counters = newChainCounters();
    counters.watermark = 12_345;
    const r = new TaskRates(counters, new TaskIoMetrics(c.now), c.now).report();
    expect(r.busyTimeMsPerSecond).toBeUndefined();
    expect(r.watermark).toBe(12_345);
  });
});

describe('watermarks as JSON', () => {
  it('round-trips the ends of time through JSON, which has no Infinity', () => {
    for (const w of [Number.NEGATIVE_INFINITY, 0, 1_700_000_000_000, Number.POSITIVE_INFINITY]) {
      expect(decodeWatermark(JSON.parse(JSON.stringify({ w: encodeWatermark(w) })).w)).toBe(w);
    }
    expect(decodeWatermark(undefined)).toBe(Number.NEGATIVE_INFINITY);
  });
});

describe('liveVertexMetrics', () => {
  const running = (live: object) => ({ state: ExecutionState.RUNNING, live: { recordsIn: 0, recordsOut: 0, ...live } });
  it('sums rates, takes the maximum of busy / idle / back-pressured time and the minimum watermark', () => {
    const v = liveVertexMetrics([
      running({ recordsInPerSecond: 10, busyTimeMsPerSecond: 100, idleTimeMsPerSecond: 850, backPressuredTimeMsPerSecond: 50, watermark: 5_000 }),
      running({ recordsInPerSecond: 30, busyTimeMsPerSecond: 300, idleTimeMsPerSecond: 100, backPressuredTimeMsPerSecond: 600, watermark: 4_000 }),
      // An ended attempt's last report is not live.
      { state: ExecutionState.FINISHED, live: { recordsIn: 0, recordsOut: 0, busyTimeMsPerSecond: 1000, watermark: 1 } },
    ]);
    expect(v).toEqual({
      recordsInPerSecond: 40,
      busyTimeMsPerSecond: 300,
      idleTimeMsPerSecond: 850,
      backPressuredTimeMsPerSecond: 600,
      watermark: 4_000,
    });
  });

  it("is '-Infinity' while one subtask has no watermark yet, and empty without running subtasks", () => {
    expect(liveVertexMetrics([running({ watermark: 5_000 }), running({ watermark: '-Infinity' })]).watermark).toBe('-Infinity');
    expect(liveVertexMetrics([{ state: ExecutionState.DEPLOYING, live: undefined }])).toEqual({});
  });
});
