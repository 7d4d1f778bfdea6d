// Record counts over time for the job record (GET /jobs/:id/throughput): a bounded series that spans the
// whole job. When it is full, every other older sample goes and the step between samples doubles, so a
// long job keeps its whole shape at a coarser step and a short one keeps every second.
import { MAX_THROUGHPUT_SAMPLES, MAX_THROUGHPUT_VERTICES, type ThroughputSample, type VertexMetrics } from '../ha/job-store.js';

export const THROUGHPUT_SAMPLE_INTERVAL_MS = 1_000;

export class ThroughputSeries {
  private samples: ThroughputSample[];
  private stepMs: number;

  /** `previous`: what a predecessor JobMaster of the job recorded; the series goes on from it. */
  constructor(
    previous: readonly ThroughputSample[] = [],
    private readonly maxSamples = MAX_THROUGHPUT_SAMPLES,
  ) {
    this.samples = previous.slice(-maxSamples);
    const first = this.samples[0];
    const last = this.samples.at(-1);
    const spacing = first !== undefined && last !== undefined && this.samples.length > 1 ? (last.atMs - first.atMs) / (this.samples.length - 1) : 0;
    this.stepMs = THROUGHPUT_SAMPLE_INTERVAL_MS;
    while (this.stepMs * 2 <= spacing) this.stepMs *= 2;
  }

  /**
   * Takes a sample when a step has passed since the last one (or `force`: the final write) and returns
   * the series (a copy); undefined for jobs with too many vertices to keep one.
   */
  record(nowMs: number, vertices: readonly VertexMetrics[], force = false): readonly ThroughputSample[] | undefined {
    if (vertices.length > MAX_THROUGHPUT_VERTICES) return undefined;
    const last = this.samples.at(-1);
    if (last !== undefined && (nowMs - last.atMs < this.stepMs || nowMs <= last.atMs) && !(force && nowMs > last.atMs)) return [...this.samples];
    this.samples.push({ atMs: nowMs, vertices: Object.fromEntries(vertices.map((v) => [v.id, { recordsIn: v.recordsIn, recordsOut: v.recordsOut }])) });
    if (this.samples.length > this.maxSamples) {
      // Keep the newest, and every other one counting back from it.
      const newestIndex = this.samples.length - 1;
      this.samples = this.samples.filter((_, i) => (newestIndex - i) % 2 === 0);
      this.stepMs *= 2;
    }
    return [...this.samples];
  }
}
