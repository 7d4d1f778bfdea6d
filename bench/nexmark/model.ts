// The Nexmark event model: persons who sell and bid, the auctions they open and the bids on them, as the
// Nexmark benchmark defines them. Every event carries its event time (`dateTime`, ms since the epoch).
// Events are plain data (no classes), so they cross a Floe exchange and a collect sink as they are.

export interface Person {
  readonly id: number;
  readonly name: string;
  readonly emailAddress: string;
  readonly creditCard: string;
  readonly city: string;
  readonly state: string;
  readonly dateTime: number;
  readonly extra: string;
}

export interface Auction {
  readonly id: number;
  readonly itemName: string;
  readonly description: string;
  readonly initialBid: number;
  readonly reserve: number;
  readonly dateTime: number;
  readonly expires: number;
  readonly seller: number;
  readonly category: number;
  readonly extra: string;
}

export interface Bid {
  readonly auction: number;
  readonly bidder: number;
  /** In cents. */
  readonly price: number;
  readonly channel: string;
  readonly url: string;
  readonly dateTime: number;
  readonly extra: string;
}

/** One Nexmark event: exactly one of a person, an auction or a bid (Nexmark's `Event` with its type). */
export type NexmarkEvent =
  { readonly type: 'person'; readonly person: Person } | { readonly type: 'auction'; readonly auction: Auction } | { readonly type: 'bid'; readonly bid: Bid };

/** The event time of any event. */
export function eventTime(e: NexmarkEvent): number {
  switch (e.type) {
    case 'person':
      return e.person.dateTime;
    case 'auction':
      return e.auction.dateTime;
    case 'bid':
      return e.bid.dateTime;
  }
}
