// The per-key table of keyed operators and combiners: canonical key (a string) → a value, in insertion
// order. Hot in every keyed job (a lookup per record), so it is not a Map: the keys a task sees are
// fresh strings (cut from a line, decoded from a buffer) that V8 has never hashed, and a Map lookup of
// such a string costs about twice this table's (bench: a wordcount's combiner at ~85 ns per word with a
// Map, ~45 ns with this table). Open addressing with linear probing over slot indexes; the keys, their
// hashes and the values sit in parallel arrays in insertion order, so iterating is a loop over arrays.

/** FNV-1a over UTF-16 code units from `seed`, with a final mix so the low bits (the slot) spread. */
function hashOf(key: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return h ^ (h >>> 12);
}

const INITIAL_SLOTS = 64;

export class KeyTable<V> {
  /** Keys in insertion order; `values[i]` belongs to `keys[i]`. Read-only for callers. */
  readonly keys: string[] = [];
  readonly values: V[] = [];
  /** The hash of `keys[i]` (a typed array: most hashes are no small integers, which a plain array would box). */
  private hashes = new Int32Array(INITIAL_SLOTS / 2);
  /** Entry index + 1 per slot, 0 when empty. Kept at most half full. */
  private slots = new Int32Array(INITIAL_SLOTS);
  private mask = INITIAL_SLOTS - 1;
  // Where the last missed `indexOf` would have found its key: `insert` of that key goes there.
  private vacantSlot = -1;
  private vacantHash = 0;
  private vacantKey: string | undefined;
  /** A seed per table: keys chosen to collide in one table do not collide in another. */
  private readonly seed = (Math.random() * 0x100000000) | 0;

  get size(): number {
    return this.keys.length;
  }

  /** The entry index of `key`, or -1. */
  indexOf(key: string): number {
    const h = hashOf(key, this.seed);
    const slots = this.slots;
    const mask = this.mask;
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const e = slots[s]!;
      if (e === 0) {
        this.vacantSlot = s;
        this.vacantHash = h;
        this.vacantKey = key;
        return -1;
      }
      if (this.hashes[e - 1] === h && this.keys[e - 1] === key) return e - 1;
    }
  }

  /** Adds `key`, which must not be in the table; returns its entry index. Fastest right after `indexOf(key)` missed. */
  insert(key: string, value: V): number {
    if (this.vacantKey !== key && this.indexOf(key) >= 0) throw new Error(`key table: ${JSON.stringify(key)} is already in the table`);
    const index = this.keys.length;
    this.keys.push(key);
    this.values.push(value);
    if (index === this.hashes.length) {
      const hashes = new Int32Array(index * 2);
      hashes.set(this.hashes);
      this.hashes = hashes;
    }
    this.hashes[index] = this.vacantHash;
    this.slots[this.vacantSlot] = index + 1;
    this.vacantKey = undefined;
    if ((index + 1) * 2 > this.mask) this.grow();
    return index;
  }

  private grow(): void {
    const slots = new Int32Array((this.mask + 1) * 2);
    const mask = slots.length - 1;
    for (let i = 0; i < this.keys.length; i++) {
      let s = this.hashes[i]! & mask;
      while (slots[s] !== 0) s = (s + 1) & mask;
      slots[s] = i + 1;
    }
    this.slots = slots;
    this.mask = mask;
  }
}
