// "Did you mean …": the edit distance between two names, and the known names nearest a mistyped one.

/**
 * Edit distance between two strings: insertions, deletions, substitutions, and two neighbours swapped
 * ('lsit' for 'list'), each one edit.
 */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The known names nearest `name` (case ignored), all those at the least distance; none when even the
 * nearest is more than 2 edits (or a quarter of the name) away, as then it is no typo of any.
 */
export function nearestNames(name: string, known: readonly string[]): string[] {
  const wanted = name.toLowerCase();
  const scored = known.map((k) => ({ name: k, distance: editDistance(wanted, k.toLowerCase()) }));
  const best = Math.min(...scored.map((s) => s.distance));
  if (best > Math.max(2, Math.floor(wanted.length / 4))) return [];
  return scored.filter((s) => s.distance === best).map((s) => s.name);
}
