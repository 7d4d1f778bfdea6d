// Pipelined-region failover (Flink's RestartPipelinedRegionFailoverStrategy): what must restart when a
// task fails. Its region restarts (the tasks it exchanges pipelined data with fail with it), so does
// every region that consumes what a restarting region produces, and so does every producer region whose
// finished blocking output a restarting region needs but is gone (its TaskExecutor was lost).
import type { Execution, ExecutionGraph } from './execution-graph.js';
import type { PipelinedRegion, RegionPlan } from './pipelined-regions.js';
import type { JobEdge } from '../jobgraph/jobgraph.js';

/** Whether a finished producer's blocking partition on `edge` can still be read. */
export type PartitionAvailability = (edge: JobEdge, producer: Execution) => boolean;

export class RestartPipelinedRegionFailoverStrategy {
  private readonly consumersOf = new Map<PipelinedRegion, Set<PipelinedRegion>>();

  constructor(
    private readonly plan: RegionPlan,
    private readonly graph: ExecutionGraph,
    private readonly isPartitionAvailable: PartitionAvailability,
  ) {
    for (const region of plan.regions) this.consumersOf.set(region, new Set());
    for (const region of plan.regions) {
      for (const edge of region.blockingInputs) this.consumersOf.get(plan.regionOf(edge.source))!.add(region);
    }
  }

  /** The regions to restart when tasks of `failed` failed, in region order. */
  regionsToRestart(failed: Iterable<PipelinedRegion>): PipelinedRegion[] {
    const restart = new Set<PipelinedRegion>();
    const queue: PipelinedRegion[] = [];
    const add = (r: PipelinedRegion): void => {
      if (restart.has(r)) return;
      restart.add(r);
      queue.push(r);
    };
    for (const r of failed) add(r);
    while (queue.length > 0) {
      const region = queue.shift()!;
      for (const edge of region.blockingInputs) {
        // A producer that has not finished yet will deliver when it does; one that finished but whose
        // output is gone must run again.
        const lost = this.graph.subtasks(edge.source).some((p) => p.state === 'FINISHED' && !this.isPartitionAvailable(edge, p));
        if (lost) add(this.plan.regionOf(edge.source));
      }
      for (const consumer of this.consumersOf.get(region)!) add(consumer);
    }
    return [...restart].sort((a, b) => a.index - b.index);
  }

  /** Every region: what a failure no region restart can mend (global failover) restarts. */
  allRegions(): PipelinedRegion[] {
    return [...this.plan.regions];
  }
}
