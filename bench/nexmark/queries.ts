// The Nexmark queries of the benchmark, as plain single-thread code: no framework, each event handled
// as it comes and each result handed to a callback. Event-time windows follow the Floe job's rules: the
// watermark is the highest event time seen minus the out-of-orderness minus 1 (Flink's bounded
// out-of-orderness), a window fires once the watermark reaches its last millisecond, an event whose
// windows have all fired is dropped as late, and at the end of the input every open window fires.
// The per-record functions (q1's map, q2's predicate) are the ones the Floe jobs run too.
//   q0 pass-through: every bid.            q1 map: bids with the price in euros.
//   q2 filter: bids on auctions whose id is a multiple of 123.
//   q5 hot items: per sliding window, the auctions with the most bids.
//   q7 highest bid: per tumbling window, the bids with the highest price.
//   q8 new users: per tumbling window, the persons who joined and opened an auction in it.
import { eventTime, type Bid, type NexmarkEvent } from './model.js';

export type QueryName = 'q0' | 'q1' | 'q2' | 'q5' | 'q7' | 'q8';
export const QUERY_NAMES: readonly QueryName[] = ['q0', 'q1', 'q2', 'q5', 'q7', 'q8'];

export interface Q1Result {
  readonly auction: number;
  readonly bidder: number;
  /** In euro cents: the dollar price × 0.908. */
  readonly price: number;
  readonly dateTime: number;
  readonly extra: string;
}
export interface Q2Result {
  readonly auction: number;
  readonly price: number;
}
export interface Q5Result {
  readonly auction: number;
  readonly num: number;
  readonly windowStart: number;
  readonly windowEnd: number;
}
export interface Q7Result {
  readonly auction: number;
  readonly price: number;
  readonly bidder: number;
  readonly dateTime: number;
  readonly extra: string;
}
export interface Q8Result {
  readonly id: number;
  readonly name: string;
  readonly starttime: number;
}

/** The window sizes of the windowed queries (ms), as Flink's Nexmark runs them; q5's slide is size / 10. */
export const WINDOWS = { q5Size: 10_000, q5Slide: 1_000, q7Size: 10_000, q8Size: 10_000 } as const;

export const isBid = (e: NexmarkEvent): e is Extract<NexmarkEvent, { type: 'bid' }> => e.type === 'bid';
export const bidOf = (e: NexmarkEvent): Bid => (e as Extract<NexmarkEvent, { type: 'bid' }>).bid;
export const q1Map = (b: Bid): Q1Result => ({ auction: b.auction, bidder: b.bidder, price: 0.908 * b.price, dateTime: b.dateTime, extra: b.extra });
export const q2Predicate = (b: Bid): boolean => b.auction % 123 === 0;
export const q2Map = (b: Bid): Q2Result => ({ auction: b.auction, price: b.price });

/** A plain query: events in, results out through the callback given at its making. */
export interface PlainQuery {
  onEvent(e: NexmarkEvent): void;
  /** The end of the input: the watermark goes to the end of time and every open window fires. */
  finish(): void;
}

/** Flink's bounded out-of-orderness watermark, advanced at every event. */
class Watermark {
  private maxTs = -Infinity;
  current = -Infinity;
  constructor(private readonly outOfOrdernessMs: number) {}
  /** Notes `ts`; true when the watermark moved. */
  advance(ts: number): boolean {
    if (ts <= this.maxTs) return false;
    this.maxTs = ts;
    this.current = ts - this.outOfOrdernessMs - 1;
    return true;
  }
}

/** Tumbling event-time windows of `size`, each holding a state made by `create`, fired in order of time. */
class TumblingWindows<S> {
  private readonly open = new Map<number, S>();
  private lowest = Infinity;
  readonly watermark: Watermark;
  constructor(
    private readonly size: number,
    outOfOrdernessMs: number,
    private readonly create: () => S,
    private readonly fire: (start: number, state: S) => void,
  ) {
    this.watermark = new Watermark(outOfOrdernessMs);
  }

  /** The state of the window holding `ts`, or undefined when that window has fired (the event is late). */
  stateFor(ts: number): S | undefined {
    const start = ts - (((ts % this.size) + this.size) % this.size);
    if (start + this.size - 1 <= this.watermark.current) return undefined;
    let s = this.open.get(start);
    if (s === undefined) {
      s = this.create();
      this.open.set(start, s);
      if (start < this.lowest) this.lowest = start;
    }
    return s;
  }

  /** After an event: moves the watermark and fires the windows it passed. */
  advance(ts: number): void {
    if (!this.watermark.advance(ts)) return;
    const wm = this.watermark.current;
    while (this.open.size > 0 && this.lowest + this.size - 1 <= wm) {
      const s = this.open.get(this.lowest);
      if (s !== undefined) {
        this.open.delete(this.lowest);
        this.fire(this.lowest, s);
      }
      this.lowest += this.size;
    }
  }

  finish(): void {
    for (const start of [...this.open.keys()].sort((a, b) => a - b)) this.fire(start, this.open.get(start)!);
    this.open.clear();
  }
}

/**
 * q5 on panes: bids are counted per auction in panes of one slide; a window is the sum of the size / slide
 * panes it covers, made when it fires. Each bid is counted once, not once per window.
 */
class HotItems implements PlainQuery {
  private readonly panes = new Map<number, Map<number, number>>();
  private readonly watermark: Watermark;
  /** The end of the next window to fire (undefined while no pane is open). */
  private nextEnd: number | undefined;
  constructor(
    private readonly size: number,
    private readonly slide: number,
    outOfOrdernessMs: number,
    private readonly out: (r: Q5Result) => void,
  ) {
    this.watermark = new Watermark(outOfOrdernessMs);
  }

  onEvent(e: NexmarkEvent): void {
    if (e.type !== 'bid') {
      // Every event moves the watermark: the source's watermark follows all its events.
      if (this.watermark.advance(eventTime(e))) this.fireUpTo(this.watermark.current);
      return;
    }
    const { auction, dateTime: ts } = e.bid;
    const pane = ts - (((ts % this.slide) + this.slide) % this.slide);
    // Late when the last window holding the bid has fired.
    if (pane + this.size - 1 > this.watermark.current) {
      let counts = this.panes.get(pane);
      if (counts === undefined) {
        counts = new Map();
        this.panes.set(pane, counts);
        if (this.nextEnd === undefined || pane + this.slide < this.nextEnd) this.nextEnd = pane + this.slide;
      }
      counts.set(auction, (counts.get(auction) ?? 0) + 1);
    }
    if (this.watermark.advance(ts)) this.fireUpTo(this.watermark.current);
  }

  finish(): void {
    this.fireUpTo(Infinity);
  }

  private fireUpTo(wm: number): void {
    while (this.nextEnd !== undefined && this.nextEnd - 1 <= wm) {
      const end = this.nextEnd;
      const start = end - this.size;
      const sum = new Map<number, number>();
      for (let p = start; p < end; p += this.slide) {
        const counts = this.panes.get(p);
        if (counts !== undefined) for (const [a, n] of counts) sum.set(a, (sum.get(a) ?? 0) + n);
      }
      let max = 0;
      for (const n of sum.values()) if (n > max) max = n;
      for (const [auction, num] of sum) if (num === max) this.out({ auction, num, windowStart: start, windowEnd: end });
      // The pane at `start` is in no later window.
      this.panes.delete(start);
      this.nextEnd = this.panes.size === 0 ? undefined : end + this.slide;
      if (this.nextEnd !== undefined && wm === Infinity) {
        // Skip to the next window that holds a pane.
        const lowest = Math.min(...this.panes.keys());
        this.nextEnd = Math.max(this.nextEnd, lowest + this.slide);
      }
    }
  }
}

class HighestBid implements PlainQuery {
  private readonly windows: TumblingWindows<{ max: number; bids: Bid[] }>;
  constructor(size: number, outOfOrdernessMs: number, out: (r: Q7Result) => void) {
    this.windows = new TumblingWindows(
      size,
      outOfOrdernessMs,
      () => ({ max: -Infinity, bids: [] as Bid[] }),
      (_start, w) => {
        for (const b of w.bids) out({ auction: b.auction, price: b.price, bidder: b.bidder, dateTime: b.dateTime, extra: b.extra });
      },
    );
  }
  onEvent(e: NexmarkEvent): void {
    if (e.type !== 'bid') {
      this.windows.advance(eventTime(e));
      return;
    }
    const b = e.bid;
    const w = this.windows.stateFor(b.dateTime);
    if (w !== undefined && b.price >= w.max) {
      if (b.price > w.max) {
        w.max = b.price;
        w.bids = [b];
      } else w.bids.push(b);
    }
    this.windows.advance(b.dateTime);
  }
  finish(): void {
    this.windows.finish();
  }
}

class NewUsers implements PlainQuery {
  private readonly windows: TumblingWindows<{ persons: Map<number, string>; sellers: Set<number> }>;
  constructor(size: number, outOfOrdernessMs: number, out: (r: Q8Result) => void) {
    this.windows = new TumblingWindows(
      size,
      outOfOrdernessMs,
      () => ({ persons: new Map(), sellers: new Set() }),
      (start, w) => {
        for (const seller of w.sellers) {
          const name = w.persons.get(seller);
          if (name !== undefined) out({ id: seller, name, starttime: start });
        }
      },
    );
  }
  onEvent(e: NexmarkEvent): void {
    let ts: number;
    if (e.type === 'person') {
      ts = e.person.dateTime;
      this.windows.stateFor(ts)?.persons.set(e.person.id, e.person.name);
    } else if (e.type === 'auction') {
      ts = e.auction.dateTime;
      this.windows.stateFor(ts)?.sellers.add(e.auction.seller);
    } else ts = e.bid.dateTime;
    // Every event moves the watermark, bids too: the source's watermark follows all its events.
    this.windows.advance(ts);
  }
  finish(): void {
    this.windows.finish();
  }
}

/** The plain implementation of `query`, sending its results to `out`. */
export function plainQuery(query: QueryName, outOfOrdernessMs: number, out: (r: unknown) => void): PlainQuery {
  switch (query) {
    case 'q0':
      return { onEvent: (e) => e.type === 'bid' && out(e.bid), finish: () => undefined };
    case 'q1':
      return { onEvent: (e) => e.type === 'bid' && out(q1Map(e.bid)), finish: () => undefined };
    case 'q2':
      return { onEvent: (e) => e.type === 'bid' && q2Predicate(e.bid) && out(q2Map(e.bid)), finish: () => undefined };
    case 'q5':
      return new HotItems(WINDOWS.q5Size, WINDOWS.q5Slide, outOfOrdernessMs, out);
    case 'q7':
      return new HighestBid(WINDOWS.q7Size, outOfOrdernessMs, out);
    case 'q8':
      return new NewUsers(WINDOWS.q8Size, outOfOrdernessMs, out);
  }
}
