// A key back from its canonical form (network/key-groups.ts canonicalKey): what a backend that stores only
// the canonical bytes of a key hands out as the entry's key in a snapshot.

/** The key whose canonical form is `canonical` (equal by value to the one canonicalKey was given). */
export function keyOfCanonical(canonical: string): unknown {
  const c = canonical.length > 0 ? canonical.charCodeAt(0) : 2;
  if (c > 1) return canonical;
  if (c === 0) return canonical.slice(1);
  const p = { s: canonical, i: 1 };
  const key = parseValue(p);
  if (p.i !== canonical.length) throw new Error(`canonical key ${JSON.stringify(canonical)} has trailing characters at ${p.i}`);
  return key;
}

interface Cursor {
  readonly s: string;
  i: number;
}

function parseValue(p: Cursor): unknown {
  const ch = p.s[p.i];
  if (ch === '"') return parseString(p);
  if (ch === '[') {
    p.i++;
    const out: unknown[] = [];
    if (p.s[p.i] === ']') {
      p.i++;
      return out;
    }
    for (;;) {
      out.push(parseValue(p));
      const next = p.s[p.i++];
      if (next === ']') return out;
      if (next !== ',') throw new Error(`canonical key: expected ',' or ']' at ${p.i - 1}`);
    }
  }
  if (ch === '{') {
    p.i++;
    const out: Record<string, unknown> = {};
    if (p.s[p.i] === '}') {
      p.i++;
      return out;
    }
    for (;;) {
      const field = parseString(p);
      if (p.s[p.i++] !== ':') throw new Error(`canonical key: expected ':' at ${p.i - 1}`);
      out[field] = parseValue(p);
      const next = p.s[p.i++];
      if (next === '}') return out;
      if (next !== ',') throw new Error(`canonical key: expected ',' or '}' at ${p.i - 1}`);
    }
  }
  let end = p.i;
  while (end < p.s.length && !',]}'.includes(p.s[end]!)) end++;
  const word = p.s.slice(p.i, end);
  p.i = end;
  if (word === 'true') return true;
  if (word === 'false') return false;
  if (word === 'null') return null;
  if (word.endsWith('n')) return BigInt(word.slice(0, -1));
  const n = Number(word);
  if (Number.isNaN(n) && word !== 'NaN') throw new Error(`canonical key: '${word}' is no number`);
  return n;
}

/** A JSON string literal starting at the cursor. */
function parseString(p: Cursor): string {
  if (p.s[p.i] !== '"') throw new Error(`canonical key: expected '"' at ${p.i}`);
  let end = p.i + 1;
  while (p.s[end] !== '"') {
    if (end >= p.s.length) throw new Error('canonical key: unterminated string');
    end += p.s[end] === '\\' ? 2 : 1;
  }
  const text = JSON.parse(p.s.slice(p.i, end + 1)) as string;
  p.i = end + 1;
  return text;
}
