// Pipelined-region failover: what restarts when a task of a region fails, on small graphs.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { ExecutionAttemptId, JobId, ResourceId, type AllocationId } from '../../runtime/core/ids.js';
import type { DistributionPattern, JobEdge, JobGraph, JobVertex, PartitionType } from '../../runtime/jobgraph/jobgraph.js';
import { ExecutionGraph, partitionIdOf } from '../../runtime/jobmaster/execution-graph.js';
import { RestartPipelinedRegionFailoverStrategy } from '../../runtime/jobmaster/failover-strategy.js';
import { ExecutionFailureHandler } from '../../runtime/jobmaster/failure-handler.js';
import { computePipelinedRegions } from '../../runtime/jobmaster/pipelined-regions.js';
import { createRestartStrategy } from '../../runtime/jobmaster/restart-strategy.js';

function v(id: string, parallelism = 2): JobVertex {
  return {
    id,
    name: id,
    parallelism,
    maxParallelism: 128,
    slotSharingGroup: 'default',
    operators: [{ kind: 'map', id, name: id, fn: { export: 'default', operatorId: id } }],
  };
}
function e(source: string, target: string, partitionType: PartitionType, distribution: DistributionPattern = 'all-to-all'): JobEdge {
  return { id: `${source}->${target}`, source, target, distribution, partitioner: distribution === 'forward' ? 'forward' : 'rebalance', partitionType };
}
function setup(vertices: JobVertex[], edges: JobEdge[]) {
  const jobGraph: JobGraph = {
    jobId: JobId.of('j'),
    name: 'g',
    library: { sha256: 'ab'.repeat(32), sizeBytes: 1 },
    program: { export: 'default', args: [] },
    vertices,
    edges,
  };
  const plan = computePipelinedRegions(jobGraph);
  const graph = new ExecutionGraph(jobGraph);
  const available = new Set<string>();
  const strategy = new RestartPipelinedRegionFailoverStrategy(plan, graph, (edge, producer) => available.has(partitionIdOf(edge, producer)));
  /** Marks a vertex's subtasks FINISHED, their blocking outputs readable unless `lost`. */
  const finish = (id: string, lost = false): void => {
    for (const x of graph.subtasks(id)) {
      x.state = 'FINISHED';
      x.location = { resourceId: ResourceId.of('te'), allocationId: 'a' as AllocationId };
      for (const edge of graph.outputsOf.get(id) ?? []) if (!lost) available.add(partitionIdOf(edge, x));
    }
  };
  const restart = (failedVertex: string): string[][] => strategy.regionsToRestart([plan.regionOf(failedVertex)]).map((r) => [...r.vertexIds]);
  return { plan, graph, strategy, finish, restart };
}

describe('pipelined-region failover', () => {
  it('restarts only the failed pipeline of a job with two independent ones', () => {
    const { restart } = setup([v('a1'), v('b1'), v('a2'), v('b2')], [e('a1', 'b1', 'pipelined'), e('a2', 'b2', 'pipelined')]);
    expect(restart('b2')).toEqual([['a2', 'b2']]);
  });

  it('restarts a failed blocking consumer alone while its finished producers keep their output', () => {
    const { restart, finish } = setup([v('src'), v('mid'), v('sink')], [e('src', 'mid', 'blocking'), e('mid', 'sink', 'blocking')]);
    finish('src');
    expect(restart('mid')).toEqual([['mid'], ['sink']]);
  });

  it('reruns a finished producer whose output was lost, and what consumes from it', () => {
    const { restart, finish } = setup([v('src'), v('mid'), v('sink')], [e('src', 'mid', 'blocking'), e('mid', 'sink', 'blocking')]);
    finish('src', true);
    expect(restart('mid')).toEqual([['src'], ['mid'], ['sink']]);
  });

  it('does not rerun a producer that has simply not finished yet', () => {
    const { restart } = setup([v('src'), v('sink')], [e('src', 'sink', 'blocking')]);
    expect(restart('sink')).toEqual([['sink']]);
  });

  it('the failure handler counts restarts, passes the wait on, and says why it cannot restart', () => {
    const { plan, graph, strategy } = setup([v('a'), v('b')], [e('a', 'b', 'pipelined')]);
    const handler = new ExecutionFailureHandler(strategy, createRestartStrategy({ type: 'fixed-delay', attempts: 1, delayMs: 40 }), new ManualClock());
    const error = { code: 'USER_CODE', message: 'boom', retryable: false };
    const first = handler.getFailureHandlingResult([plan.regionOf('b')], error);
    expect(first).toMatchObject({ canRestart: true, restartDelayMs: 40, global: false });
    expect(first.regions.map((r) => r.index)).toEqual([0]);
    expect(handler.numberOfRestarts).toBe(1);
    const second = handler.getFailureHandlingResult([plan.regionOf('b')], error);
    expect(second.canRestart).toBe(false);
    expect(second.reason).toMatch(/allows no more restarts: fixed-delay \(1 restart, 40 ms apart/);
    const unrecoverable = handler.getGlobalFailureHandlingResult({ code: 'NO_RESOURCE_AVAILABLE', message: 'no slots', retryable: false });
    expect(unrecoverable).toMatchObject({ canRestart: false, global: true });
    expect(graph.executions).toHaveLength(4);
  });

  it('restarts what a leaving TaskExecutor ran without asking the restart strategy or counting a restart', () => {
    const { plan, strategy } = setup([v('a'), v('b')], [e('a', 'b', 'pipelined')]);
    // A strategy that allows no restart at all: only a failure it is not asked about can restart.
    const handler = new ExecutionFailureHandler(strategy, createRestartStrategy({ type: 'none' }), new ManualClock());
    const leaving = { code: 'TASK_EXECUTOR_LEAVING', message: 'TaskExecutor te-1 is leaving (SIGTERM)', retryable: true };
    for (let i = 0; i < 3; i++) {
      const moved = handler.getFailureHandlingResult([plan.regionOf('b')], leaving);
      expect(moved).toMatchObject({ canRestart: true, restartDelayMs: 0, platformCaused: true });
      expect(moved.regions.map((r) => r.index)).toEqual([0]);
    }
    expect(handler.numberOfRestarts).toBe(0);
    // The job's own failure still meets the strategy it chose.
    const own = handler.getFailureHandlingResult([plan.regionOf('b')], { code: 'USER_CODE', message: 'boom', retryable: false });
    expect(own.canRestart).toBe(false);
    expect(own.platformCaused).toBeUndefined();
  });

  it('keeps the attempts of a subtask: a new attempt is the only one updates are taken from', () => {
    const { graph } = setup([v('a', 1)], []);
    const ev = graph.executionVertices[0]!;
    const first = ev.current;
    expect(() => graph.resetForNewExecution(ev)).toThrow(/attempt 0 is still CREATED/);
    first.state = 'FAILED';
    const second = graph.resetForNewExecution(ev);
    expect(second.attemptNumber).toBe(1);
    expect(ev.priorAttempts).toEqual([first]);
    expect(graph.execution(first.attemptId)).toBeUndefined();
    expect(graph.execution(second.attemptId)).toBe(second);
    expect(graph.execution(ExecutionAttemptId.random())).toBeUndefined();
  });
});
