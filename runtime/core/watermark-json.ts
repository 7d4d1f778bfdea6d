// A watermark as JSON carries it: a number of ms, or the strings '-Infinity' (none yet) and 'Infinity'
// (the end of input), which JSON has no number for (JSON.stringify writes them as null).

/** A watermark (ms) as REST, RPC and the job record carry it. */
export type WatermarkJson = number | '-Infinity' | 'Infinity';

export function encodeWatermark(ms: number): WatermarkJson {
  if (ms === Number.NEGATIVE_INFINITY) return '-Infinity';
  if (ms === Number.POSITIVE_INFINITY) return 'Infinity';
  return ms;
}

/** The watermark a WatermarkJson encodes; anything else (a missing field, null) is -Infinity: no watermark. */
export function decodeWatermark(w: unknown): number {
  if (typeof w === 'number' && !Number.isNaN(w)) return w;
  if (w === 'Infinity') return Number.POSITIVE_INFINITY;
  return Number.NEGATIVE_INFINITY;
}
