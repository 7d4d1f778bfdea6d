// Records per second per vertex over time, drawn by uPlot.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { formatCount, formatRate } from '../format';

export interface RateSeries {
  readonly label: string;
  /** Records per second at each time; null where no rate can be told. */
  readonly values: readonly (number | null)[];
}

const HEIGHT = 240;
/** Tableau 10: tells up to ten vertices apart, light or dark. */
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

export function ThroughputChart({ times, series }: { times: readonly number[]; series: readonly RateSeries[] }) {
  const host = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const dark = useMediaQuery('(prefers-color-scheme: dark)');
  const seriesKey = series.map((s) => s.label).join('\u0000');
  const data: uPlot.AlignedData = [times as number[], ...series.map((s) => s.values as (number | null)[])];

  // A new chart when the series or the colour scheme change; new data alone only redraws.
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const css = getComputedStyle(document.documentElement);
    const ink = css.getPropertyValue('--text-muted').trim() || '#666';
    const grid = css.getPropertyValue('--border').trim() || '#ddd';
    const axis = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const u = new uPlot(
      {
        width: Math.max(280, el.clientWidth),
        height: HEIGHT,
        series: [
          { label: 'Time' },
          ...series.map((s, i) => ({
            label: s.label,
            stroke: PALETTE[i % PALETTE.length]!,
            width: 2,
            points: { show: false },
            value: (_u: uPlot, v: number | null) => (v == null ? '–' : formatRate(v)),
          })),
        ],
        axes: [axis, { ...axis, size: 56, values: (_u: uPlot, splits: number[]) => splits.map((v) => formatCount(v)) }],
        scales: { y: { range: (_u: uPlot, _min: number, max: number) => [0, max > 0 ? max * 1.1 : 1] } },
        cursor: { drag: { x: false, y: false, setScale: false } },
        legend: { live: true },
      },
      data,
      el,
    );
    chart.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(280, el.clientWidth), height: HEIGHT }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      chart.current = null;
    };
  }, [seriesKey, dark]);

  useEffect(() => {
    chart.current?.setData(data);
  }, [times, series]);

  return <div ref={host} class="chart" />;
}

function useMediaQuery(query: string): boolean {
  const [matches, setMatches] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const list = window.matchMedia(query);
    const onChange = () => setMatches(list.matches);
    list.addEventListener('change', onChange);
    return () => list.removeEventListener('change', onChange);
  }, [query]);
  return matches;
}
