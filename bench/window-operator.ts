// The window operator alone, in this process: the Nexmark generator's bids, keyed by auction, through the
// first window of q5 (sliding 10 s / 1 s, a count with a ProcessWindowFunction) or of q7 (tumbling 10 s,
// the highest bids), with a bounded out-of-orderness watermark every BENCH_WATERMARK_EVERY events. Prints
// CPU µs per bid and the results' count; the bids are made before the clock starts. Run it under
// `node --cpu-prof` to see where an element's time goes. The task's choice of operator runs them (the slicing
// window operator for both); BENCH_GENERAL=1 runs the general WindowOperator instead. q5job is q5 as its
// job runs it, on one thread without the exchanges: the producer's fold per auction and slice (window
// combiner), the counting window operator on those partials with its ProcessWindowFunction, the second
// stage's fold of each window's counts, and the hot-items window over them (its results are counted).
//   npm run build && BENCH_EVENTS=2000000 node dist/bench/window-operator.js [q5|q7|q5job]
import { ManualClock } from '../runtime/core/clock.js';
import { keyGroupRange } from '../runtime/network/key-groups.js';
import { Mailbox } from '../runtime/task/mailbox.js';
import { HeapKeyedStateBackend } from '../runtime/task/state/heap-keyed-state-backend.js';
import { defaultMaxParallelism } from '../runtime/task/state/keyed-state-backend.js';
import type { KeyedOperatorContext } from '../runtime/task/stream-operator.js';
import { mailboxProcessingTimeService } from '../runtime/task/timer-service.js';
import type { WindowFunctions } from '../runtime/task/window-contents.js';
import { WindowOperator, type WindowOperatorConfig } from '../runtime/task/window-operator.js';
import { windowOperatorFor } from '../runtime/task/window-operator-factory.js';
import type { FunctionRef } from '../runtime/jobgraph/jobgraph.js';
import { PARTIAL_BATCH, windowCombiner, windowFoldOf } from '../runtime/task/window-combiner.js';
import { createWindowOperator } from '../runtime/task/window-operator-factory.js';
import type { WindowOperatorSpec } from '../runtime/task/window-operator.js';
import { DEFAULT_CONFIG, nexmarkEvent } from './nexmark/generator.js';
import type { Bid } from './nexmark/model.js';
import { WINDOWS } from './nexmark/queries.js';

const query = process.argv[2] ?? 'q7';
const events = Number(process.env.BENCH_EVENTS ?? 2_000_000);
const watermarkEvery = Number(process.env.BENCH_WATERMARK_EVERY ?? 20_000);
const rounds = Number(process.env.BENCH_RUNS ?? 3);

interface Highest {
  readonly max: number;
  readonly bids: readonly Bid[];
}

const q5: WindowFunctions = {
  kind: 'aggregate',
  createAccumulator: () => 0,
  add: (_b, n) => (n as number) + 1,
  getResult: (n) => n,
  ...(process.env.BENCH_NO_MERGE === '1' ? {} : { merge: (a: unknown, b: unknown) => (a as number) + (b as number) }),
  process: (auction, ctx, counts, out) => {
    for (const num of counts) out.collect({ auction, num, windowStart: ctx.window().start, windowEnd: ctx.window().end });
  },
};
const q7: WindowFunctions = {
  kind: 'aggregate',
  createAccumulator: (): Highest => ({ max: -Infinity, bids: [] }),
  add: (v, acc) => {
    const b = v as Bid;
    const h = acc as Highest;
    return b.price > h.max ? { max: b.price, bids: [b] } : b.price === h.max ? { max: h.max, bids: [...h.bids, b] } : h;
  },
  getResult: (h) => h,
  process: (_auction, ctx, hs, out) => {
    for (const h of hs) out.collect({ ...(h as Highest), windowEnd: ctx.window().end });
  },
};

function bids(): { bid: Bid; ts: number }[] {
  const out: { bid: Bid; ts: number }[] = [];
  for (let i = 0; i < events; i++) {
    const e = nexmarkEvent(i, DEFAULT_CONFIG);
    if (e.type === 'bid') out.push({ bid: e.bid, ts: e.bid.dateTime });
  }
  return out;
}

interface Count {
  readonly auction: unknown;
  readonly num: number;
}
interface MostBids {
  readonly num: number;
  readonly counts: readonly Count[];
}
/** q5's job functions by operator and role, as a job library's user objects. */
const q5JobFunctions: Record<string, unknown> = {
  'count/createAccumulator': () => 0,
  'count/add': (_b: unknown, n: number) => n + 1,
  'count/getResult': (n: number) => n,
  'count/merge': (a: number, b: number) => a + b,
  'count/process': q5.process,
  'hot/createAccumulator': (): MostBids => ({ num: 0, counts: [] }),
  'hot/add': (c: Count, m: MostBids): MostBids =>
    c.num > m.num ? { num: c.num, counts: [c] } : c.num === m.num ? { num: m.num, counts: [...m.counts, c] } : m,
  'hot/getResult': (m: MostBids) => m,
  'hot/merge': (a: MostBids, b: MostBids): MostBids => (a.num > b.num ? a : b.num > a.num ? b : { num: a.num, counts: [...a.counts, ...b.counts] }),
  'hot/process': (_key: unknown, _ctx: unknown, ms: Iterable<MostBids>, out: { collect(r: unknown): void }) => {
    for (const m of ms) for (const c of m.counts) out.collect(c);
  },
};

function q5JobSpec(id: 'count' | 'hot', window: WindowOperatorSpec['window']): WindowOperatorSpec {
  const ref = (role: string): FunctionRef => ({ export: 'bench', operatorId: id, role });
  return {
    kind: 'keyed.window',
    id,
    name: id,
    key: ref('key'),
    window,
    trigger: { type: 'event-time' },
    allowedLateness: 0,
    windowFunction: 'aggregate',
    createAccumulator: ref('createAccumulator'),
    add: ref('add'),
    getResult: ref('getResult'),
    merge: ref('merge'),
    process: ref('process'),
    preAggregate: true,
  };
}

async function q5JobRound(input: readonly { bid: Bid; ts: number }[]): Promise<{ cpuUs: number; results: number }> {
  const clock = new ManualClock(0);
  const mailbox = new Mailbox();
  const maxParallelism = defaultMaxParallelism(2);
  const userObject = (ref: FunctionRef): unknown => q5JobFunctions[`${ref.operatorId}/${ref.role ?? ''}`];
  const fn = (ref: FunctionRef | undefined): ((a?: unknown, b?: unknown) => unknown) => userObject(ref!) as (a?: unknown, b?: unknown) => unknown;
  const contextOf = (name: string, output: KeyedOperatorContext['output']): KeyedOperatorContext => ({
    taskName: 'bench',
    operatorName: name,
    subtaskIndex: 0,
    parallelism: 1,
    maxParallelism,
    output,
    processingTime: mailboxProcessingTimeService(clock, mailbox),
    mailbox,
    clock,
    keySelector: () => undefined,
    stateBackend: new HeapKeyedStateBackend({ maxParallelism, keyGroupRange: keyGroupRange(0, 1, maxParallelism), clock }),
  });
  let results = 0;
  const countSpec = q5JobSpec('count', { type: 'sliding', timeDomain: 'event-time', size: WINDOWS.q5Size, slide: WINDOWS.q5Slide, offset: 0 });
  const hotSpec = q5JobSpec('hot', { type: 'tumbling', timeDomain: 'event-time', size: WINDOWS.q5Slide, offset: 0 });
  const hot = createWindowOperator(
    hotSpec,
    contextOf('hot', {
      emit: () => {
        results++;
      },
      emitSide: () => undefined,
      emitWatermark: () => undefined,
    }),
    userObject,
  );
  const hotFold = windowCombiner(
    hotSpec,
    windowFoldOf(hotSpec, fn),
    () => 0,
    (_c, keys, partials, ts) => hot.processElement([PARTIAL_BATCH, keys, partials], ts),
    1 << 20,
  );
  const count = createWindowOperator(
    countSpec,
    contextOf('count', {
      emit: (r, ts) => hotFold.add(r, ts),
      emitSide: () => undefined,
      emitWatermark: async (wm) => {
        await hotFold.advanceWatermark(wm);
        await hot.processWatermark(wm);
      },
    }),
    userObject,
  );
  let partials = 0;
  const countFold = windowCombiner(
    countSpec,
    windowFoldOf(countSpec, fn),
    (b) => (b as Bid).auction,
    (_c, keys, ps, ts) => ((partials += keys.length), count.processElement([PARTIAL_BATCH, keys, ps], ts)),
    1 << 20,
  );
  const started = process.cpuUsage();
  let maxTs = -Infinity;
  for (let i = 0; i < input.length; i++) {
    const { bid, ts } = input[i]!;
    if (ts > maxTs) maxTs = ts;
    const r = countFold.add(bid, ts);
    if (r !== undefined) await r;
    if (i % watermarkEvery === watermarkEvery - 1) {
      const wm = maxTs - DEFAULT_CONFIG.outOfOrdernessMs - 1;
      await countFold.advanceWatermark(wm);
      await count.processWatermark(wm);
    }
  }
  await countFold.flush();
  await count.endInput();
  await hotFold.flush();
  await hot.endInput();
  const used = process.cpuUsage(started);
  console.log(`q5job: ${partials} partials crossed from the fold to the counting window operator`);
  return { cpuUs: (used.user + used.system) / input.length, results };
}

async function round(input: readonly { bid: Bid; ts: number }[]): Promise<{ cpuUs: number; results: number }> {
  if (query === 'q5job') return q5JobRound(input);
  const clock = new ManualClock(0);
  const mailbox = new Mailbox();
  const maxParallelism = defaultMaxParallelism(2);
  let results = 0;
  const context: KeyedOperatorContext = {
    taskName: 'bench',
    operatorName: query,
    subtaskIndex: 0,
    parallelism: 1,
    maxParallelism,
    output: {
      emit: () => {
        results++;
      },
      emitSide: () => undefined,
      emitWatermark: () => undefined,
    },
    processingTime: mailboxProcessingTimeService(clock, mailbox),
    mailbox,
    clock,
    keySelector: (r) => (r as Bid).auction,
    stateBackend: new HeapKeyedStateBackend({ maxParallelism, keyGroupRange: keyGroupRange(0, 1, maxParallelism), clock }),
  };
  const config: WindowOperatorConfig =
    query === 'q5'
      ? {
          assigner: { type: 'sliding', timeDomain: 'event-time', size: WINDOWS.q5Size, slide: WINDOWS.q5Slide, offset: 0 },
          trigger: { type: 'event-time' },
          allowedLateness: 0,
          functions: q5,
        }
      : {
          assigner: { type: 'tumbling', timeDomain: 'event-time', size: WINDOWS.q7Size, offset: 0 },
          trigger: { type: 'event-time' },
          allowedLateness: 0,
          functions: q7,
        };
  const operator = process.env.BENCH_GENERAL === '1' ? new WindowOperator(context, config) : windowOperatorFor(context, config);
  const started = process.cpuUsage();
  let maxTs = -Infinity;
  for (let i = 0; i < input.length; i++) {
    const { bid, ts } = input[i]!;
    if (ts > maxTs) maxTs = ts;
    const r = operator.processElement(bid, ts);
    if (r !== undefined) await r;
    if (i % watermarkEvery === watermarkEvery - 1) await operator.processWatermark(maxTs - DEFAULT_CONFIG.outOfOrdernessMs - 1);
  }
  await operator.endInput();
  const used = process.cpuUsage(started);
  await operator.close?.();
  return { cpuUs: (used.user + used.system) / input.length, results };
}

const input = bids();
const figures: number[] = [];
for (let r = 0; r < rounds; r++) {
  const { cpuUs, results } = await round(input);
  figures.push(cpuUs);
  console.log(`${query}: ${input.length} bids, ${results} results, ${cpuUs.toFixed(3)} µs CPU per bid`);
}
figures.sort((a, b) => a - b);
console.log(`${query}: min / median / max ${figures.map((f) => f.toFixed(3)).join(' / ')} µs CPU per bid`);
