// Flink's DataStream semantics through a whole in-process cluster: a stream unioned with itself carries
// each record once per occurrence, and min / max / minBy / maxBy give Flink's answers per key on
// bounded input. Expected values are computed here from the same input the job generates.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { MiniCluster } from '../support/mini-cluster.js';
import { slotWorkerBundle, storeJobLibrary } from '../taskexecutor/harness.js';

const COUNT = 300;
const CITIES = ['oslo', 'lima', 'kyiv'];
// The reading with index i: temperatures are a permutation of 0 … COUNT-1 (7919 is prime to 300), so
// every key's minimum and maximum are held by exactly one reading.
const reading = (i: number): { city: string; temp: number; day: number } => ({ city: CITIES[i % 3]!, temp: (i * 7919) % COUNT, day: i });

const JOB_SOURCE = `
import { defineJob } from 'floe';
const CITIES = ${JSON.stringify(CITIES)};
const COUNT = ${COUNT};
const reading = ${reading.toString()};
export const selfUnion = defineJob('self-union', (env) => {
  const s = env.fromSequence(1, 50).setParallelism(2).name('numbers');
  s.union(s).collect();
});
export const threeTimes = defineJob('three-times', (env) => {
  const s = env.fromSequence(1, 30).map((n) => n * 10).name('tens');
  s.union(s, s).collect();
});
export const selfUnionKeyed = defineJob('self-union-keyed', (env) => {
  const s = env.fromSequence(1, 100).setParallelism(2);
  s.union(s).keyBy((n) => n % 5).sum().setParallelism(2).collect();
});
export const extremes = defineJob('extremes', (env, [op, parallelism]) => {
  const keyed = env.generate(reading, { count: ${COUNT} }).setParallelism(Number(parallelism)).keyBy((r) => r.city);
  keyed[op]('temp').setParallelism(2).collect();
});
export const tupleExtremes = defineJob('tuple-extremes', (env, [op]) => {
  env.generate((i) => [CITIES[i % 3], (i * 7919) % ${COUNT}], { count: ${COUNT} }).setParallelism(2)
    .keyBy((t) => t[0])[op](1).collect();
});
export const scalarExtremes = defineJob('scalar-extremes', (env, [op]) => {
  env.generate((i) => (i * 7919) % ${COUNT}, { count: ${COUNT} }).setParallelism(2)
    .keyBy((n) => n % 4)[op]().collect();
});
`;

const libraryDir = mkdtempSync(join(tmpdir(), 'floe-union-lib-'));
const store = new InMemoryBlobStore();
let code: Uint8Array;
const graphOf = async (exportName: string, args: string[] = []): Promise<JobGraph> => {
  const g = await storeJobLibrary(libraryDir, JOB_SOURCE, store, JobId.random(), exportName, args);
  code = (await store.get(blobKeys.library(g.library.sha256)))!;
  return g;
};
beforeAll(async () => {
  await slotWorkerBundle();
});
afterAll(() => rmSync(libraryDir, { recursive: true, force: true }));

describe('union and min/max/minBy/maxBy on a MiniCluster', () => {
  let cluster: MiniCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  let keyedRecordsIn = new Map<string, number>();
  async function run(graph: JobGraph): Promise<unknown[]> {
    cluster ??= await MiniCluster.start({ config: { 'taskmanager.numberOfTaskSlots': 4 } });
    await cluster.blobStore.put(blobKeys.library(graph.library.sha256), code);
    const job = await cluster.submit(graph);
    const outcome = await job.outcome;
    const rec = await cluster.record(job.jobId);
    expect(outcome.status, rec.exceptions.map((e) => e.message).join('; ')).toBe('FINISHED');
    keyedRecordsIn = new Map(rec.vertices!.map((v) => [v.name, v.recordsIn]));
    return (await cluster.result(rec)).records;
  }
  const sorted = (xs: unknown[]): unknown[] => [...xs].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  const times = <T>(xs: T[], n: number): T[] => xs.flatMap((x) => Array<T>(n).fill(x));

  it('gives each record once per occurrence of the stream in a union with itself', async () => {
    const ones = Array.from({ length: 50 }, (_, i) => i + 1);
    expect(((await run(await graphOf('selfUnion'))) as number[]).sort((a, b) => a - b)).toEqual(times(ones, 2));
    const tens = Array.from({ length: 30 }, (_, i) => (i + 1) * 10);
    expect(((await run(await graphOf('threeTimes'))) as number[]).sort((a, b) => a - b)).toEqual(times(tens, 3));
    // Through a keyed sum with pre-aggregation: each key's sum counts every record twice.
    const sums = [0, 1, 2, 3, 4].map(
      (r) =>
        2 *
        ones
          .concat(ones.map((n) => n + 50))
          .filter((n) => n % 5 === r)
          .reduce((a, b) => a + b, 0),
    );
    expect(((await run(await graphOf('selfUnionKeyed'))) as number[]).sort((a, b) => a - b)).toEqual(sums.sort((a, b) => a - b));
  });

  const readings = Array.from({ length: COUNT }, (_, i) => reading(i));
  const byCity = (city: string): ReturnType<typeof reading>[] => readings.filter((r) => r.city === city);
  const holding = (city: string, pick: (xs: number[]) => number): ReturnType<typeof reading> => {
    const rs = byCity(city);
    const t = pick(rs.map((r) => r.temp));
    return rs.find((r) => r.temp === t)!;
  };
  const low = (xs: number[]): number => Math.min(...xs);
  const high = (xs: number[]): number => Math.max(...xs);

  it('min and max give the key first record with the field holding the extreme; minBy and maxBy the record holding it', async () => {
    // One producer: the key's first record is the first generated.
    const first = (city: string): ReturnType<typeof reading> => byCity(city)[0]!;
    expect(sorted(await run(await graphOf('extremes', ['min', '1'])))).toEqual(
      sorted(CITIES.map((c) => ({ ...first(c), temp: low(byCity(c).map((r) => r.temp)) }))),
    );
    expect(sorted(await run(await graphOf('extremes', ['max', '1'])))).toEqual(
      sorted(CITIES.map((c) => ({ ...first(c), temp: high(byCity(c).map((r) => r.temp)) }))),
    );
    // Two producers: the record holding the extreme is one whatever the order records meet in.
    expect(sorted(await run(await graphOf('extremes', ['minBy', '2'])))).toEqual(sorted(CITIES.map((c) => holding(c, low))));
    expect(sorted(await run(await graphOf('extremes', ['maxBy', '2'])))).toEqual(sorted(CITIES.map((c) => holding(c, high))));
    // Pre-aggregated as sum is: each of the two producers sends one partial per city, not its readings.
    expect(keyedRecordsIn.get('maxBy')).toBe(2 * CITIES.length);
  });

  it('takes a tuple index as the field, and numbers themselves without one', async () => {
    const tuples = readings.map((r) => [r.city, r.temp] as const);
    const extreme = (pick: (xs: number[]) => number): unknown[] => CITIES.map((c) => [c, pick(tuples.filter((t) => t[0] === c).map((t) => t[1]))]);
    expect(sorted(await run(await graphOf('tupleExtremes', ['minBy'])))).toEqual(sorted(extreme(low)));
    expect(sorted(await run(await graphOf('tupleExtremes', ['max'])))).toEqual(sorted(extreme(high)));
    const numbers = readings.map((r) => r.temp);
    const perResidue = (pick: (xs: number[]) => number): number[] => [0, 1, 2, 3].map((k) => pick(numbers.filter((n) => n % 4 === k)));
    expect(((await run(await graphOf('scalarExtremes', ['min']))) as number[]).sort((a, b) => a - b)).toEqual(perResidue(low).sort((a, b) => a - b));
    expect(((await run(await graphOf('scalarExtremes', ['max']))) as number[]).sort((a, b) => a - b)).toEqual(perResidue(high).sort((a, b) => a - b));
  });
});
