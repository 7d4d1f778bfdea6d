// Byte counts as people read them, in the CLI and the dashboard alike.

/** "640 B", "1.5 KB", "3.2 MB": bytes in powers of 1000; "–" for what is not a count. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '–';
  if (bytes < 1000) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = bytes / 1000;
  let unit = 0;
  while (v >= 1000 && unit < units.length - 1) {
    v /= 1000;
    unit++;
  }
  return `${v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[unit]}`;
}
