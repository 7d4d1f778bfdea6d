// How numbers, times and durations read across the dashboard.
import { decodeWatermark, type WatermarkJson } from '../../core/watermark-json';
export { formatBytes } from '../../core/format-bytes';

const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
const whole = new Intl.NumberFormat();
const time = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const dateTime = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });

/** "850 ms", "12.3 s", "4m 05s", "2h 03m", "3d 04h". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const s = Math.floor(ms / 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86_400)}d ${pad(Math.floor((s % 86_400) / 3600))}h`;
}

/** The time of day for today's moments, the date too for older ones. */
export function formatTimestamp(ms: number, now = Date.now()): string {
  const d = new Date(ms);
  return new Date(now).toDateString() === d.toDateString() ? time.format(d) : dateTime.format(d);
}

export function formatFullTimestamp(ms: number): string {
  return dateTime.format(new Date(ms));
}

export function formatCount(n: number): string {
  return n < 10_000 ? whole.format(n) : compact.format(n);
}

export function formatExact(n: number): string {
  return whole.format(n);
}

export function formatRate(perSecond: number | undefined): string {
  if (perSecond === undefined || !Number.isFinite(perSecond)) return '–';
  if (perSecond === 0) return '0/s';
  if (perSecond < 10) return `${perSecond.toFixed(1)}/s`;
  return `${compact.format(Math.round(perSecond))}/s`;
}

/** Milliseconds of each second as a share: 850 → "85%". */
export function formatMsPerSecond(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '–';
  return `${Math.round(ms / 10)}%`;
}

/** A watermark: "none" before the first, "end of input" after the last, a time for event time of this era, else the number. */
export function formatWatermark(w: WatermarkJson | undefined): string {
  if (w === undefined) return '–';
  const ms = decodeWatermark(w);
  if (ms === Number.NEGATIVE_INFINITY) return 'none';
  if (ms === Number.POSITIVE_INFINITY) return 'end of input';
  return ms >= 946_684_800_000 && ms < 4_102_444_800_000 ? formatFullTimestamp(ms) : whole.format(ms);
}
