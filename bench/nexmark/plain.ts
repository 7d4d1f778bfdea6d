// Runs a plain Nexmark query over events 0 … count − 1 of a stream, generating each event and handing it
// to the query at once, on this one thread: the baseline the Floe jobs are measured against.
import { nexmarkEvent, type NexmarkConfig } from './generator.js';
import { plainQuery, type QueryName } from './queries.js';

export interface PlainRun {
  readonly ms: number;
  readonly results: number;
}

/** Generates `count` events and runs `query` over them; the results are counted and dropped, as a discarding sink does. */
export function runPlain(query: QueryName, config: NexmarkConfig, count: number): PlainRun {
  let results = 0;
  const started = performance.now();
  const q = plainQuery(query, config.outOfOrdernessMs, () => {
    results++;
  });
  for (let i = 0; i < count; i++) q.onEvent(nexmarkEvent(i, config));
  q.finish();
  return { ms: performance.now() - started, results };
}

/** The results of `query` over events 0 … count − 1, kept (for checks on small streams). */
export function plainResults(query: QueryName, config: NexmarkConfig, count: number): unknown[] {
  const out: unknown[] = [];
  const q = plainQuery(query, config.outOfOrdernessMs, (r) => out.push(r));
  for (let i = 0; i < count; i++) q.onEvent(nexmarkEvent(i, config));
  q.finish();
  return out;
}
