// The window coGroup alone, in this process: the Nexmark generator's persons and auctions (Nexmark q8: a
// person's id meets an auction's seller in tumbling 10 s windows) through WindowJoinOperator, with a
// bounded out-of-orderness watermark every BENCH_WATERMARK_EVERY events. Prints CPU µs per record that
// reaches the operator and the results' count; the records are made before the clock starts. Run it under
// `node --cpu-prof` to see where a record's time goes.
//   node runtime/build.mjs && BENCH_EVENTS=4000000 node dist/bench/window-join.js
import { TumblingEventTimeWindows } from '../runtime/api/windowing.js';
import { ManualClock } from '../runtime/core/clock.js';
import { keyGroupRange } from '../runtime/network/key-groups.js';
import { WindowJoinOperator } from '../runtime/task/join-operators.js';
import { Mailbox } from '../runtime/task/mailbox.js';
import { HeapKeyedStateBackend } from '../runtime/task/state/heap-keyed-state-backend.js';
import { defaultMaxParallelism } from '../runtime/task/state/keyed-state-backend.js';
import type { KeyedOperatorContext } from '../runtime/task/stream-operator.js';
import { mailboxProcessingTimeService } from '../runtime/task/timer-service.js';
import { DEFAULT_CONFIG, nexmarkEvent } from './nexmark/generator.js';
import type { Auction, Person } from './nexmark/model.js';
import { WINDOWS } from './nexmark/queries.js';

const events = Number(process.env['BENCH_EVENTS'] ?? 4_000_000);
const watermarkEvery = Number(process.env['BENCH_WATERMARK_EVERY'] ?? 20_000);
const rounds = Number(process.env['BENCH_RUNS'] ?? 3);

type Input = { first: true; person: Person; ts: number } | { first: false; auction: Auction; ts: number };

function records(): Input[] {
  const out: Input[] = [];
  for (let i = 0; i < events; i++) {
    const e = nexmarkEvent(i, DEFAULT_CONFIG);
    if (e.type === 'person') out.push({ first: true, person: e.person, ts: e.person.dateTime });
    else if (e.type === 'auction') out.push({ first: false, auction: e.auction, ts: e.auction.dateTime });
  }
  return out;
}

async function round(input: readonly Input[]): Promise<{ cpuUs: number; results: number }> {
  const clock = new ManualClock(0);
  const mailbox = new Mailbox();
  const maxParallelism = defaultMaxParallelism(2);
  let results = 0;
  const context: KeyedOperatorContext = {
    taskName: 'bench',
    operatorName: 'q8',
    subtaskIndex: 0,
    parallelism: 1,
    maxParallelism,
    output: {
      emit: () => {
        results++;
      },
      emitSide: () => undefined,
      emitWatermark: () => undefined,
      emitWatermarkStatus: () => undefined,
    },
    processingTime: mailboxProcessingTimeService(clock, mailbox),
    mailbox,
    clock,
    keySelector: (r) => (r as Person).id,
    keySelector2: (r) => (r as Auction).seller,
    stateBackend: new HeapKeyedStateBackend({ maxParallelism, keyGroupRange: keyGroupRange(0, 1, maxParallelism), clock }),
  };
  const size = WINDOWS.q8Size;
  const operator = new WindowJoinOperator(context, 'coGroup', TumblingEventTimeWindows.of(size), (ps: unknown, as: unknown, out: unknown) => {
    if ((as as Auction[]).length === 0) return;
    for (const p of ps as Person[]) {
      const starttime = p.dateTime - (((p.dateTime % size) + size) % size);
      (out as { collect(r: unknown): void }).collect({ id: p.id, name: p.name, starttime, windowEnd: starttime + size });
    }
  });
  await operator.open();
  const started = process.cpuUsage();
  let maxTs = -Infinity;
  for (let i = 0; i < input.length; i++) {
    const r = input[i]!;
    if (r.ts > maxTs) maxTs = r.ts;
    if (r.first) operator.processElement1(r.person, r.ts);
    else operator.processElement2(r.auction, r.ts);
    if (i % watermarkEvery === watermarkEvery - 1) await operator.processWatermark(maxTs - DEFAULT_CONFIG.outOfOrdernessMs - 1);
  }
  await operator.endInput();
  const used = process.cpuUsage(started);
  operator.close();
  return { cpuUs: (used.user + used.system) / input.length, results };
}

const input = records();
const figures: number[] = [];
for (let r = 0; r < rounds; r++) {
  const { cpuUs, results } = await round(input);
  figures.push(cpuUs);
  console.log(`q8 coGroup: ${input.length} persons and auctions, ${results} results, ${cpuUs.toFixed(3)} µs CPU per record`);
}
figures.sort((a, b) => a - b);
console.log(`q8 coGroup: min / median / max ${figures.map((f) => f.toFixed(3)).join(' / ')} µs CPU per record`);
