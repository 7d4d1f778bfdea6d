// The Nexmark event generator: event i is computed from i and the configuration alone (a random stream
// seeded by the seed and i), so any subtask can make any index and the subtasks of a Floe source split the
// indexes among themselves. In every 50 events, 1 is a person, 3 are auctions and 46 are bids (Nexmark's
// proportions). Ids follow the count of persons and auctions made before; sellers and bidders are drawn
// from recent persons and bids from recent auctions, with Nexmark's hot sellers, bidders and auctions.
// Event time advances at `eventsPerSecond` from `baseTimeMs`; each event is earlier than its slot by up
// to `outOfOrdernessMs`, so no event is older than the newest before it by more than that bound.
import type { Auction, Bid, NexmarkEvent, Person } from './model.js';

export interface NexmarkConfig {
  /** Different seeds make different streams; the same seed the same stream. */
  readonly seed: number;
  /** How fast event time advances: event i's slot is baseTimeMs + floor(i × 1000 / eventsPerSecond). */
  readonly eventsPerSecond: number;
  /** How far before its slot an event's time may be (≥ 0): the stream's bounded out-of-orderness. */
  readonly outOfOrdernessMs: number;
  /** The event time of event 0's slot (ms since the epoch). */
  readonly baseTimeMs: number;
}

export const DEFAULT_CONFIG: NexmarkConfig = { seed: 1, eventsPerSecond: 100_000, outOfOrdernessMs: 200, baseTimeMs: 1_700_000_000_000 };

export const PERSON_PROPORTION = 1;
export const AUCTION_PROPORTION = 3;
export const BID_PROPORTION = 46;
export const PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;

export const FIRST_PERSON_ID = 1000;
export const FIRST_AUCTION_ID = 1000;
export const FIRST_CATEGORY_ID = 10;
const NUM_CATEGORIES = 5;
/** Persons a seller or bidder is drawn from: the most recent ones, plus a few not made yet. */
const NUM_ACTIVE_PEOPLE = 1000;
const PERSON_ID_LEAD = 10;
/** Auctions a bid is drawn from: the most recent ones, plus a few not made yet. */
const NUM_IN_FLIGHT_AUCTIONS = 100;
const AUCTION_ID_LEAD = 10;
/** 1 in HOT_AUCTION_RATIO bids goes to any recent auction, the others to the current hot auction. */
const HOT_AUCTION_RATIO = 2;
const HOT_BIDDER_RATIO = 4;
const HOT_SELLER_RATIO = 4;
/** Hot ids are multiples of this (among the base-0 ids). */
const HOT_ID_STEP = 100;

const FIRST_NAMES = ['Peter', 'Paul', 'Luke', 'John', 'Saul', 'Vicky', 'Kate', 'Julie', 'Sarah', 'Deiter', 'Walter'];
const LAST_NAMES = ['Shultz', 'Abrams', 'Spencer', 'White', 'Bartels', 'Walton', 'Smith', 'Jones', 'Noris'];
const US_STATES = ['AZ', 'CA', 'ID', 'OR', 'WA', 'WY'];
const US_CITIES = ['Phoenix', 'Los Angeles', 'San Francisco', 'Boise', 'Portland', 'Bend', 'Redmond', 'Seattle', 'Kent', 'Cheyenne'];
const CHANNELS = ['Google', 'Facebook', 'Baidu', 'Apple'];
const CHANNEL_URLS = CHANNELS.map((c, n) => `https://www.nexmark.com/${c.toLowerCase()}/item.htm?query=1&channel_id=${n}`);
const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

// The random stream of the event being made: reset from (seed, index) at the start of each event, so an
// event never depends on the ones made before it. One module-level state: events are made one at a time.
let state = 0;

/** Mixes 32 bits (a finalizer of MurmurHash3). */
function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function seedFor(seed: number, index: number): void {
  const lo = index >>> 0;
  const hi = Math.floor(index / 0x1_0000_0000) >>> 0;
  state = mix32(mix32(seed >>> 0) ^ mix32(lo + 0x9e3779b9) ^ Math.imul(hi, 0x27d4eb2f));
}

/** The next 32 random bits (mulberry32). */
function nextUint32(): number {
  state = (state + 0x6d2b79f5) | 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (t ^ (t >>> 14)) >>> 0;
}

/** A random integer in [0, n). */
function nextInt(n: number): number {
  return nextUint32() % n;
}

/** A random number in [0, 1). */
function nextUnit(): number {
  return nextUint32() / 0x1_0000_0000;
}

function nextString(length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) s += LETTERS[nextInt(LETTERS.length)];
  return s;
}

/** Nexmark's price: log-uniform from 1 to 1,000,000 units, in cents. */
function nextPrice(): number {
  return Math.round(Math.pow(10, nextUnit() * 6) * 100);
}

/** The base-0 id of the last person made at or before event `index`. */
export function lastBase0PersonId(index: number): number {
  const epoch = Math.floor(index / PROPORTION_DENOMINATOR);
  const offset = index % PROPORTION_DENOMINATOR;
  return epoch * PERSON_PROPORTION + Math.min(offset, PERSON_PROPORTION - 1);
}

/** The base-0 id of the last auction made at or before event `index` (0 before the first). */
export function lastBase0AuctionId(index: number): number {
  const epoch = Math.floor(index / PROPORTION_DENOMINATOR);
  const offset = index % PROPORTION_DENOMINATOR;
  const inEpoch = offset < PERSON_PROPORTION ? 0 : Math.min(offset - PERSON_PROPORTION + 1, AUCTION_PROPORTION);
  return Math.max(0, epoch * AUCTION_PROPORTION + inEpoch - 1);
}

function nextBase0PersonId(index: number): number {
  const people = lastBase0PersonId(index) + 1;
  const active = Math.min(people, NUM_ACTIVE_PEOPLE);
  return people - active + nextInt(active + PERSON_ID_LEAD);
}

function nextBase0AuctionId(index: number): number {
  const last = lastBase0AuctionId(index);
  const min = Math.max(last - NUM_IN_FLIGHT_AUCTIONS, 0);
  return min + nextInt(last - min + 1 + AUCTION_ID_LEAD);
}

/** The event time of event `index`: its slot, less up to `outOfOrdernessMs`. Draws from the random stream. */
function timestampOf(index: number, config: NexmarkConfig): number {
  const slot = config.baseTimeMs + Math.floor((index * 1000) / config.eventsPerSecond);
  return config.outOfOrdernessMs > 0 ? slot - nextInt(config.outOfOrdernessMs + 1) : slot;
}

function person(index: number, dateTime: number): Person {
  const id = FIRST_PERSON_ID + lastBase0PersonId(index);
  const name = `${FIRST_NAMES[nextInt(FIRST_NAMES.length)]} ${LAST_NAMES[nextInt(LAST_NAMES.length)]}`;
  const emailAddress = `${nextString(7)}@${nextString(5)}.com`;
  const creditCard = `${1000 + nextInt(9000)} ${1000 + nextInt(9000)} ${1000 + nextInt(9000)} ${1000 + nextInt(9000)}`;
  const city = US_CITIES[nextInt(US_CITIES.length)]!;
  const state = US_STATES[nextInt(US_STATES.length)]!;
  return { id, name, emailAddress, creditCard, city, state, dateTime, extra: '' };
}

function auction(index: number, dateTime: number): Auction {
  const id = FIRST_AUCTION_ID + lastBase0AuctionId(index);
  const seller =
    FIRST_PERSON_ID + (nextInt(HOT_SELLER_RATIO) > 0 ? Math.floor(lastBase0PersonId(index) / HOT_ID_STEP) * HOT_ID_STEP : nextBase0PersonId(index));
  const category = FIRST_CATEGORY_ID + nextInt(NUM_CATEGORIES);
  const initialBid = nextPrice();
  const reserve = initialBid + nextPrice();
  const expires = dateTime + 10_000 + nextInt(10_000);
  return { id, itemName: nextString(12), description: nextString(24), initialBid, reserve, dateTime, expires, seller, category, extra: '' };
}

function bid(index: number, dateTime: number): Bid {
  const auctionId =
    FIRST_AUCTION_ID + (nextInt(HOT_AUCTION_RATIO) > 0 ? Math.floor(lastBase0AuctionId(index) / HOT_ID_STEP) * HOT_ID_STEP : nextBase0AuctionId(index));
  const bidder =
    FIRST_PERSON_ID + (nextInt(HOT_BIDDER_RATIO) > 0 ? Math.floor(lastBase0PersonId(index) / HOT_ID_STEP) * HOT_ID_STEP + 1 : nextBase0PersonId(index));
  const price = nextPrice();
  const c = nextInt(CHANNELS.length);
  return { auction: auctionId, bidder, price, channel: CHANNELS[c]!, url: CHANNEL_URLS[c]!, dateTime, extra: '' };
}

/** Event `index` (0, 1, 2, …) of the stream `config` describes: the same for the same seed and index. */
export function nexmarkEvent(index: number, config: NexmarkConfig): NexmarkEvent {
  seedFor(config.seed, index);
  const dateTime = timestampOf(index, config);
  const offset = index % PROPORTION_DENOMINATOR;
  if (offset < PERSON_PROPORTION) return { type: 'person', person: person(index, dateTime) };
  if (offset < PERSON_PROPORTION + AUCTION_PROPORTION) return { type: 'auction', auction: auction(index, dateTime) };
  return { type: 'bid', bid: bid(index, dateTime) };
}

/** The config a job reads from its arguments: seed, events/s, out-of-orderness (ms), base time (ms). */
export function configFromArgs(args: readonly string[], from = 0): NexmarkConfig {
  const n = (i: number, fallback: number): number => {
    const v = args[from + i];
    if (v === undefined || v === '') return fallback;
    const x = Number(v);
    if (!Number.isFinite(x)) throw new Error(`Nexmark argument ${from + i} must be a number, found '${v}'`);
    return x;
  };
  return {
    seed: n(0, DEFAULT_CONFIG.seed),
    eventsPerSecond: n(1, DEFAULT_CONFIG.eventsPerSecond),
    outOfOrdernessMs: n(2, DEFAULT_CONFIG.outOfOrdernessMs),
    baseTimeMs: n(3, DEFAULT_CONFIG.baseTimeMs),
  };
}

/** The arguments configFromArgs reads back as `config`. */
export function configToArgs(config: NexmarkConfig): string[] {
  return [String(config.seed), String(config.eventsPerSecond), String(config.outOfOrdernessMs), String(config.baseTimeMs)];
}
