// Event-time windows: TimeWindow, window starts with offsets and negative timestamps, the tumbling, sliding
// and session assigners, and session merging.
import { describe, expect, it } from 'vitest';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { EventTimeSessionWindows, SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows } from '../../runtime/api/windowing.js';

const w = (start: number, end: number): TimeWindow => new TimeWindow(start, end);
const spans = (ws: TimeWindow[]): [number, number][] => ws.map((x) => [x.start, x.end]);

describe('TimeWindow', () => {
  it('maxTimestamp is end - 1; intersects counts touching windows; cover spans both', () => {
    expect(w(0, 10).maxTimestamp()).toBe(9);
    expect(w(0, 10).intersects(w(10, 20))).toBe(true);
    expect(w(0, 10).intersects(w(11, 20))).toBe(false);
    expect(w(5, 8).intersects(w(0, 10))).toBe(true);
    expect(w(0, 10).cover(w(5, 30)).equals(w(0, 30))).toBe(true);
  });

  it('getWindowStartWithOffset handles offsets and negative timestamps', () => {
    expect(TimeWindow.getWindowStartWithOffset(7, 0, 5)).toBe(5);
    expect(TimeWindow.getWindowStartWithOffset(5, 0, 5)).toBe(5);
    expect(TimeWindow.getWindowStartWithOffset(4, 0, 5)).toBe(0);
    expect(TimeWindow.getWindowStartWithOffset(-1, 0, 5)).toBe(-5);
    expect(TimeWindow.getWindowStartWithOffset(-5, 0, 5)).toBe(-5);
    expect(TimeWindow.getWindowStartWithOffset(-6, 0, 5)).toBe(-10);
    expect(TimeWindow.getWindowStartWithOffset(7, 2, 5)).toBe(7);
    expect(TimeWindow.getWindowStartWithOffset(6, 2, 5)).toBe(2);
    expect(TimeWindow.getWindowStartWithOffset(1, 2, 5)).toBe(-3);
    expect(TimeWindow.getWindowStartWithOffset(1, -2, 5)).toBe(-2);
  });

  it('mergeWindows merges intersecting windows, in any input order, and keeps what each replaces', () => {
    const merged = TimeWindow.mergeWindows([w(20, 25), w(0, 5), w(3, 8), w(8, 12), w(30, 35)]);
    expect(merged.map((m) => [m.window.start, m.window.end])).toEqual([
      [0, 12],
      [20, 25],
      [30, 35],
    ]);
    expect(spans(merged[0]!.merged)).toEqual([
      [0, 5],
      [3, 8],
      [8, 12],
    ]);
    expect(spans(merged[1]!.merged)).toEqual([[20, 25]]);
    expect(TimeWindow.mergeWindows([])).toEqual([]);
  });
});

describe('TumblingEventTimeWindows', () => {
  it('puts each timestamp in the one window [start, start + size)', () => {
    const t = TumblingEventTimeWindows.of(1_000);
    expect(spans(t.assignWindows('x', 0))).toEqual([[0, 1_000]]);
    expect(spans(t.assignWindows('x', 999))).toEqual([[0, 1_000]]);
    expect(spans(t.assignWindows('x', 1_000))).toEqual([[1_000, 2_000]]);
    expect(spans(t.assignWindows('x', -1))).toEqual([[-1_000, 0]]);
    expect(t.isEventTime()).toBe(true);
    expect(t.isMergeable()).toBe(false);
  });

  it('shifts windows by the offset', () => {
    const t = TumblingEventTimeWindows.of(1_000, 100);
    expect(spans(t.assignWindows('x', 99))).toEqual([[-900, 100]]);
    expect(spans(t.assignWindows('x', 100))).toEqual([[100, 1_100]]);
    expect(spans(TumblingEventTimeWindows.of(1_000, -100).assignWindows('x', 950))).toEqual([[900, 1_900]]);
  });

  it('argument errors say what was expected and found', () => {
    expect(() => TumblingEventTimeWindows.of(0)).toThrow(InvalidJobDefinitionError);
    expect(() => TumblingEventTimeWindows.of(0)).toThrow(/the size as an integer number of milliseconds > 0, found 0/);
    expect(() => TumblingEventTimeWindows.of(1_000, 1_000)).toThrow(/\|offset\| < the size \(1000 ms\), found offset 1000 ms/);
    expect(() => TumblingEventTimeWindows.of(10).assignWindows('x', NaN)).toThrow(/finite number of milliseconds, found NaN/);
  });
});

describe('SlidingEventTimeWindows', () => {
  it('puts each timestamp in size / slide windows, latest start first', () => {
    const s = SlidingEventTimeWindows.of(1_000, 250);
    expect(spans(s.assignWindows('x', 1_100))).toEqual([
      [1_000, 2_000],
      [750, 1_750],
      [500, 1_500],
      [250, 1_250],
    ]);
    expect(spans(s.assignWindows('x', 1_000))).toEqual([
      [1_000, 2_000],
      [750, 1_750],
      [500, 1_500],
      [250, 1_250],
    ]);
    expect(spans(s.assignWindows('x', 999))).toEqual([
      [750, 1_750],
      [500, 1_500],
      [250, 1_250],
      [0, 1_000],
    ]);
  });

  it('rounds up when the slide does not divide the size; handles negative timestamps and offsets', () => {
    expect(spans(SlidingEventTimeWindows.of(10, 4).assignWindows('x', 9))).toEqual([
      [8, 18],
      [4, 14],
      [0, 10],
    ]);
    expect(spans(SlidingEventTimeWindows.of(10, 5).assignWindows('x', -1))).toEqual([
      [-5, 5],
      [-10, 0],
    ]);
    expect(spans(SlidingEventTimeWindows.of(10, 5, 2).assignWindows('x', 3))).toEqual([
      [2, 12],
      [-3, 7],
    ]);
    expect(() => SlidingEventTimeWindows.of(10, 0)).toThrow(/the slide as an integer number of milliseconds > 0, found 0/);
    expect(() => SlidingEventTimeWindows.of(10, 5, 5)).toThrow(/\|offset\| < the slide \(5 ms\), found offset 5 ms/);
  });
});

describe('EventTimeSessionWindows', () => {
  it('opens [t, t + gap) per element and merges sessions within the gap', () => {
    const s = EventTimeSessionWindows.withGap(100);
    expect(s.isMergeable()).toBe(true);
    const windows = [0, 50, 150, 400, -30].flatMap((t) => s.assignWindows('x', t));
    expect(spans(windows)).toEqual([
      [0, 100],
      [50, 150],
      [150, 250],
      [400, 500],
      [-30, 70],
    ]);
    expect(s.mergeWindows(windows).map((m) => [m.window.start, m.window.end, m.merged.length])).toEqual([
      [-30, 250, 4],
      [400, 500, 1],
    ]);
    expect(() => EventTimeSessionWindows.withGap(-5)).toThrow(/the gap as an integer number of milliseconds > 0, found -5/);
  });
});
