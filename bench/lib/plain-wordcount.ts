// The plain single-threaded wordcount the wordcount benchmark compares Floe against: the same word rule as
// examples/wordcount.ts (lower-case the line; a word is a run of \p{L}, \p{N} and ' without its outer
// apostrophes — what the example's regular expression matches), made as fast as plain Node allows so
// that COST is measured against a serious baseline.
//
// How it is fast:
// - the file is read once as a Buffer and scanned byte by byte through a 256-entry class table; no line,
//   word or lower-cased copy of the text is made;
// - each ASCII word is lower-cased and hashed (FNV-1a) in place and looked up in an open-addressing table
//   of typed arrays whose keys are byte ranges in an arena; a string is created once per distinct word,
//   at the end;
// - only a "segment" holding a non-ASCII byte takes the slow, exact path: the segment (the run between
//   two bytes that are ASCII, not a letter or digit, and not case-ignorable, so that no lower-casing
//   context - Greek final sigma - reaches across its ends) is decoded, lower-cased and split with the
//   job's own regular expression, and its words are re-encoded into the same table.
const WORD_SPLIT = /[^\p{L}\p{N}']+/u;

// Byte classes.
const SEP = 0; // ASCII, ends a word and a segment
const ALNUM = 1; // A-Z a-z 0-9
const APOS = 2; // '
const SOFT = 3; // ASCII, ends a word but not a segment: case-ignorable . : ^ `
const HIGH = 4; // >= 0x80: part of a UTF-8 sequence

const CLASS = new Uint8Array(256);
const LOWER = new Uint8Array(256);
for (let b = 0; b < 256; b++) {
  LOWER[b] = b >= 0x41 && b <= 0x5a ? b + 32 : b;
  if ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)) CLASS[b] = ALNUM;
  else if (b === 0x27) CLASS[b] = APOS;
  else if (b === 0x2e || b === 0x3a || b === 0x5e || b === 0x60) CLASS[b] = SOFT;
  else if (b >= 0x80) CLASS[b] = HIGH;
  else CLASS[b] = SEP;
}

/** Counts by word in a byte-keyed open-addressing table: no string per occurrence. */
class ByteCounter {
  private slots = new Int32Array(1 << 14); // entry index + 1, 0 = empty
  private mask = (1 << 14) - 1;
  private hashes = new Int32Array(4096);
  private offsets = new Int32Array(4096);
  private lengths = new Int32Array(4096);
  private counts = new Float64Array(4096);
  private arena = new Uint8Array(1 << 16);
  private arenaUsed = 0;
  size = 0;

  /** Adds one to the word made of `src[start, end)` lower-cased (ASCII bytes only; others as they are). */
  add(src: Uint8Array, start: number, end: number): void {
    let h = 0x811c9dc5 | 0;
    for (let i = start; i < end; i++) h = Math.imul(h ^ LOWER[src[i]!]!, 0x01000193);
    const len = end - start;
    const mask = this.mask;
    let slot = h & mask;
    for (;;) {
      const e = this.slots[slot]!;
      if (e === 0) break;
      const idx = e - 1;
      if (this.hashes[idx] === h && this.lengths[idx] === len) {
        const off = this.offsets[idx]!;
        const arena = this.arena;
        let same = true;
        for (let k = 0; k < len; k++) {
          if (arena[off + k] !== LOWER[src[start + k]!]) {
            same = false;
            break;
          }
        }
        if (same) {
          this.counts[idx]!++;
          return;
        }
      }
      slot = (slot + 1) & mask;
    }
    this.insert(slot, h, src, start, end);
  }

  private insert(slot: number, h: number, src: Uint8Array, start: number, end: number): void {
    const len = end - start;
    const idx = this.size++;
    if (idx === this.hashes.length) this.growEntries();
    if (this.arenaUsed + len > this.arena.length) {
      const bigger = new Uint8Array(Math.max(this.arena.length * 2, this.arenaUsed + len));
      bigger.set(this.arena);
      this.arena = bigger;
    }
    for (let k = 0; k < len; k++) this.arena[this.arenaUsed + k] = LOWER[src[start + k]!]!;
    this.hashes[idx] = h;
    this.offsets[idx] = this.arenaUsed;
    this.lengths[idx] = len;
    this.counts[idx] = 1;
    this.arenaUsed += len;
    this.slots[slot] = idx + 1;
    if (this.size * 2 > this.slots.length) this.rehash();
  }

  private growEntries(): void {
    const n = this.hashes.length * 2;
    const grow = <T extends Int32Array | Float64Array>(a: T, make: (n: number) => T): T => {
      const b = make(n);
      b.set(a);
      return b;
    };
    this.hashes = grow(this.hashes, (k) => new Int32Array(k));
    this.offsets = grow(this.offsets, (k) => new Int32Array(k));
    this.lengths = grow(this.lengths, (k) => new Int32Array(k));
    this.counts = grow(this.counts, (k) => new Float64Array(k));
  }

  private rehash(): void {
    const slots = new Int32Array(this.slots.length * 2);
    const mask = slots.length - 1;
    for (let idx = 0; idx < this.size; idx++) {
      let s = this.hashes[idx]! & mask;
      while (slots[s] !== 0) s = (s + 1) & mask;
      slots[s] = idx + 1;
    }
    this.slots = slots;
    this.mask = mask;
  }

  toMap(): Map<string, number> {
    const out = new Map<string, number>();
    const buf = Buffer.from(this.arena.buffer, this.arena.byteOffset, this.arenaUsed);
    for (let idx = 0; idx < this.size; idx++) {
      const off = this.offsets[idx]!;
      out.set(buf.toString('utf8', off, off + this.lengths[idx]!), this.counts[idx]!);
    }
    return out;
  }
}

/** The exact path for a segment holding non-ASCII bytes: the job's rule applied to its decoded text. */
function countSegmentSlowly(bytes: Buffer, start: number, end: number, counter: ByteCounter): void {
  for (const raw of bytes.toString('utf8', start, end).toLowerCase().split(WORD_SPLIT)) {
    let s = 0;
    let e = raw.length;
    while (s < e && raw.charCodeAt(s) === 0x27) s++;
    while (e > s && raw.charCodeAt(e - 1) === 0x27) e--;
    if (s === e) continue;
    const word = Buffer.from(raw.slice(s, e), 'utf8');
    // Already lower-case: LOWER leaves it as it is.
    counter.add(word, 0, word.length);
  }
}

export interface PlainCount {
  readonly counts: Map<string, number>;
  /** Lines as the job's text source counts them (a last line without '\n' counts). */
  readonly lines: number;
}

/** Counts the words of `bytes` (UTF-8 text) by the rule of examples/wordcount.ts. */
export function plainWordCount(bytes: Buffer): PlainCount {
  const counter = new ByteCounter();
  const n = bytes.length;
  let lines = 0;
  let i = 0;
  while (i < n) {
    // Skip separators (counting lines).
    let c = CLASS[bytes[i]!]!;
    while (c === SEP) {
      if (bytes[i] === 0x0a) lines++;
      if (++i === n) break;
      c = CLASS[bytes[i]!]!;
    }
    if (i === n) break;
    // A segment: up to the next separator. Words in it are runs of ALNUM / APOS.
    const segStart = i;
    let high = false;
    let j = i;
    while (j < n) {
      const k = CLASS[bytes[j]!]!;
      if (k === SEP) break;
      if (k === HIGH) high = true;
      j++;
    }
    if (high) {
      countSegmentSlowly(bytes, segStart, j, counter);
    } else {
      let p = segStart;
      while (p < j) {
        while (p < j && CLASS[bytes[p]!] === SOFT) p++;
        let q = p;
        while (q < j && CLASS[bytes[q]!] !== SOFT) q++;
        // [p, q) is ALNUM / APOS only: strip outer apostrophes.
        let s = p;
        let e = q;
        while (s < e && bytes[s] === 0x27) s++;
        while (e > s && bytes[e - 1] === 0x27) e--;
        if (s < e) counter.add(bytes, s, e);
        p = q;
      }
    }
    i = j;
  }
  if (n > 0 && bytes[n - 1] !== 0x0a) lines++;
  return { counts: counter.toMap(), lines };
}

/** The ten most frequent words, most frequent first (ties by word). */
export function topWords(counts: ReadonlyMap<string, number>, k = 10): [string, number][] {
  return [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).slice(0, k);
}
