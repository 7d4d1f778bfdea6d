import { describe, expect, it } from 'vitest';
import { nexmarkEvent, PROPORTION_DENOMINATOR, type NexmarkConfig } from '../../bench/nexmark/generator.js';
import { eventTime, type Auction, type Bid, type NexmarkEvent, type Person } from '../../bench/nexmark/model.js';
import { plainResults, runPlain } from '../../bench/nexmark/plain.js';
import { plainQuery, q1Map, q2Map, q2Predicate, WINDOWS, type QueryName } from '../../bench/nexmark/queries.js';

const config: NexmarkConfig = { seed: 7, eventsPerSecond: 2_000, outOfOrdernessMs: 300, baseTimeMs: 1_700_000_000_000 };
const COUNT = 100_000;
const stream = (c: NexmarkConfig, n: number): NexmarkEvent[] => Array.from({ length: n }, (_, i) => nexmarkEvent(i, c));
const bidsOf = (events: readonly NexmarkEvent[]): Bid[] => events.flatMap((e) => (e.type === 'bid' ? [e.bid] : []));
/** Results in one order whatever order they came in. */
const canonical = (rs: readonly unknown[]): string[] => rs.map((r) => JSON.stringify(r)).sort();

// Brute force: every window is computed from all the events at once (the generator's stream is never late).
function groupBy<T, K>(xs: readonly T[], key: (x: T) => K): Map<K, T[]> {
  const m = new Map<K, T[]>();
  for (const x of xs) {
    const k = key(x);
    const g = m.get(k);
    if (g === undefined) m.set(k, [x]);
    else g.push(x);
  }
  return m;
}
const floorTo = (ts: number, size: number): number => ts - (((ts % size) + size) % size);

function referenceQ5(events: readonly NexmarkEvent[]): unknown[] {
  const bids = bidsOf(events);
  const { q5Size: size, q5Slide: slide } = WINDOWS;
  const out: unknown[] = [];
  const first = floorTo(Math.min(...bids.map((b) => b.dateTime)), slide) - size + slide;
  const last = Math.max(...bids.map((b) => b.dateTime));
  for (let start = first; start <= last; start += slide) {
    const counts = new Map<number, number>();
    for (const b of bids) if (b.dateTime >= start && b.dateTime < start + size) counts.set(b.auction, (counts.get(b.auction) ?? 0) + 1);
    if (counts.size === 0) continue;
    const max = Math.max(...counts.values());
    for (const [auction, num] of counts) if (num === max) out.push({ auction, num, windowStart: start, windowEnd: start + size });
  }
  return out;
}

function referenceQ7(events: readonly NexmarkEvent[]): unknown[] {
  const byWindow = groupBy(bidsOf(events), (b) => floorTo(b.dateTime, WINDOWS.q7Size));
  return [...byWindow.values()].flatMap((bids) => {
    const max = Math.max(...bids.map((b) => b.price));
    return bids.filter((b) => b.price === max).map((b) => ({ auction: b.auction, price: b.price, bidder: b.bidder, dateTime: b.dateTime, extra: b.extra }));
  });
}

function referenceQ8(events: readonly NexmarkEvent[]): unknown[] {
  const persons = events.flatMap((e) => (e.type === 'person' ? [e.person] : []));
  const auctions = events.flatMap((e) => (e.type === 'auction' ? [e.auction] : []));
  const out = new Set<string>();
  for (const p of persons) {
    const start = floorTo(p.dateTime, WINDOWS.q8Size);
    if (auctions.some((a) => a.seller === p.id && floorTo(a.dateTime, WINDOWS.q8Size) === start))
      out.add(JSON.stringify({ id: p.id, name: p.name, starttime: start }));
  }
  return [...out].map((s) => JSON.parse(s) as unknown);
}

function reference(query: QueryName, events: readonly NexmarkEvent[]): unknown[] {
  switch (query) {
    case 'q0':
      return bidsOf(events);
    case 'q1':
      return bidsOf(events).map(q1Map);
    case 'q2':
      return bidsOf(events).filter(q2Predicate).map(q2Map);
    case 'q5':
      return referenceQ5(events);
    case 'q7':
      return referenceQ7(events);
    case 'q8':
      return referenceQ8(events);
  }
}

describe('the Nexmark generator', () => {
  it('makes the same event for the same seed and index, in any order, and another stream for another seed', () => {
    const forward = stream(config, 5_000);
    const backward = Array.from({ length: 5_000 }, (_, k) => nexmarkEvent(4_999 - k, config)).reverse();
    expect(backward).toEqual(forward);
    const other = stream({ ...config, seed: 8 }, 5_000);
    expect(other).not.toEqual(forward);
    // Same ids and times (they follow the index), other draws.
    expect(other.filter((e, i) => JSON.stringify(e) !== JSON.stringify(forward[i])).length).toBeGreaterThan(4_000);
  });

  it("keeps Nexmark's proportions of 1 person, 3 auctions and 46 bids in 50 events, with ids in order of making", () => {
    const events = stream(config, PROPORTION_DENOMINATOR * 200);
    const kinds = groupBy(events, (e) => e.type);
    expect([kinds.get('person')!.length, kinds.get('auction')!.length, kinds.get('bid')!.length]).toEqual([200, 600, 9_200]);
    const personIds = kinds.get('person')!.map((e) => (e as { person: Person }).person.id);
    const auctionIds = kinds.get('auction')!.map((e) => (e as { auction: Auction }).auction.id);
    expect(new Set(personIds).size).toBe(200);
    expect(personIds).toEqual([...personIds].sort((a, b) => a - b));
    expect(auctionIds).toEqual(Array.from({ length: 600 }, (_, k) => 1000 + k));
    // Bids and auctions name persons and auctions made at most a few events later (Nexmark's id lead).
    for (const [i, e] of events.entries()) {
      if (e.type === 'bid') expect(e.bid.auction).toBeLessThanOrEqual(1000 + (3 * (i + PROPORTION_DENOMINATOR)) / PROPORTION_DENOMINATOR + 10);
      if (e.type === 'auction') expect(e.auction.seller).toBeLessThanOrEqual(1000 + i / PROPORTION_DENOMINATOR + 10);
    }
  });

  it('advances event time at the configured rate, each event at most the out-of-orderness older than the newest before it', () => {
    const events = stream(config, 20_000);
    let max = -Infinity;
    let outOfOrder = 0;
    for (const [i, e] of events.entries()) {
      const t = eventTime(e);
      // 2,000 events/s: event i's slot is i / 2 ms after the base time; the event is at most 300 ms before it.
      const slot = config.baseTimeMs + Math.floor(i / 2);
      expect(t).toBeLessThanOrEqual(slot);
      expect(t).toBeGreaterThanOrEqual(slot - config.outOfOrdernessMs);
      expect(t).toBeGreaterThanOrEqual(max - config.outOfOrdernessMs);
      if (t < max) outOfOrder++;
      max = Math.max(max, t);
    }
    expect(outOfOrder).toBeGreaterThan(1_000);
  });
});

describe('the plain Nexmark queries', () => {
  const events = stream(config, COUNT);
  for (const query of ['q0', 'q1', 'q2', 'q5', 'q7', 'q8'] as const) {
    it(`${query} equals the brute-force reference`, () => {
      const plain = plainResults(query, config, COUNT);
      const expected = reference(query, events);
      expect(expected.length).toBeGreaterThan(0);
      expect(canonical(plain)).toEqual(canonical(expected));
      expect(runPlain(query, config, COUNT).results).toBe(plain.length);
    });
  }

  it('drops an event whose windows have fired and fires a window when the watermark passes its end', () => {
    const t0 = 1_700_000_000_000;
    const bid = (auction: number, price: number, dateTime: number): NexmarkEvent => ({
      type: 'bid',
      bid: { auction, bidder: 1, price, channel: 'Google', url: '', dateTime, extra: '' },
    });
    const out: unknown[] = [];
    const q7 = plainQuery('q7', 100, (r) => out.push(r));
    q7.onEvent(bid(1, 10, t0 + 9_950));
    // Watermark t0 + 10,000 - 100 - 1: the window [t0, t0 + 10 s) is still open.
    q7.onEvent(bid(2, 20, t0 + 10_000));
    expect(out).toEqual([]);
    q7.onEvent(bid(3, 30, t0 + 9_999));
    // Watermark t0 + 9,999: the window fires with the bid of 30.
    q7.onEvent(bid(4, 5, t0 + 10_100));
    expect(out).toEqual([{ auction: 3, price: 30, bidder: 1, dateTime: t0 + 9_999, extra: '' }]);
    // Late: its window has fired.
    q7.onEvent(bid(5, 99, t0 + 5_000));
    q7.finish();
    expect(out.slice(1)).toEqual([{ auction: 2, price: 20, bidder: 1, dateTime: t0 + 10_000, extra: '' }]);
  });
});
