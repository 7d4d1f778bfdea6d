import { describe, expect, it } from 'vitest';
import type { VertexMetrics } from '../../runtime/ha/job-store.js';
import { ThroughputSeries } from '../../runtime/jobmaster/throughput.js';

const vertex = (id: string, recordsOut: number): VertexMetrics => ({
  id,
  name: id,
  parallelism: 1,
  region: 0,
  recordsIn: recordsOut,
  recordsOut,
  buffersSent: 0,
  maxBuffersInFlight: 0,
  tasks: { total: 1, scheduled: 0, deploying: 0, running: 1, finished: 0, canceled: 0, failed: 0 },
});

describe('ThroughputSeries', () => {
  it('samples at most once a second, and always takes the final write', () => {
    const series = new ThroughputSeries();
    series.record(0, [vertex('a', 0)]);
    series.record(400, [vertex('a', 40)]);
    series.record(1_000, [vertex('a', 100)]);
    expect(series.record(1_500, [vertex('a', 150)])!.map((s) => s.atMs)).toEqual([0, 1_000]);
    const last = series.record(1_600, [vertex('a', 160)], true)!;
    expect(last.map((s) => s.atMs)).toEqual([0, 1_000, 1_600]);
    expect(last.at(-1)!.vertices['a']).toEqual({ recordsIn: 160, recordsOut: 160 });
  });

  it('stays within its bound over a long job by thinning older samples, keeping the newest and the whole span', () => {
    const series = new ThroughputSeries([], 10);
    let samples: readonly { atMs: number }[] = [];
    for (let t = 0; t <= 100_000; t += 1_000) samples = series.record(t, [vertex('a', t)])!;
    expect(samples.length).toBeLessThanOrEqual(10);
    // The step doubled with each thinning: the newest sample is at most one step old.
    expect(samples.at(-1)!.atMs).toBeGreaterThan(100_000 - 16_000);
    expect(samples[0]!.atMs).toBeLessThan(20_000);
    const gaps = samples.slice(1).map((s, i) => s.atMs - samples[i]!.atMs);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(16_000);
  });

  it("goes on from a predecessor's series at its step, and keeps none for jobs of many vertices", () => {
    const previous = [0, 4_000, 8_000].map((atMs) => ({ atMs, vertices: {} }));
    const series = new ThroughputSeries(previous);
    expect(series.record(9_000, [vertex('a', 1)])!.map((s) => s.atMs)).toEqual([0, 4_000, 8_000]);
    expect(series.record(12_000, [vertex('a', 1)])!.map((s) => s.atMs)).toEqual([0, 4_000, 8_000, 12_000]);
    const many = Array.from({ length: 17 }, (_, i) => vertex(`v${i}`, 0));
    expect(new ThroughputSeries().record(0, many)).toBeUndefined();
  });
});
