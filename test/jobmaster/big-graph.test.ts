// Big graphs: vertices of up to 32768 subtasks validate and build, the wiring of an all-to-all edge is one
// shared group (not one producer list per consumer), and regions and failover work per job vertex.
import { describe, expect, it } from 'vitest';
import { defineJob } from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { stringifyWithCachedParts } from '../../runtime/core/cached-json.js';
import { AllocationId, FencingToken, JobId, ResourceId } from '../../runtime/core/ids.js';
import type { DistributionPattern, JobEdge, JobGraph, JobVertex, PartitionType } from '../../runtime/jobgraph/jobgraph.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { JOB_GRAPH_LIMITS } from '../../runtime/jobgraph/limits.js';
import { validateJobGraph } from '../../runtime/jobgraph/validate.js';
import { TaskDeploymentDescriptorFactory } from '../../runtime/jobmaster/deployment-descriptors.js';
import { ExecutionGraph, partitionIdOf } from '../../runtime/jobmaster/execution-graph.js';
import { RestartPipelinedRegionFailoverStrategy } from '../../runtime/jobmaster/failover-strategy.js';
import { computePipelinedRegions } from '../../runtime/jobmaster/pipelined-regions.js';
import { inputChannelsOf, packTaskDeployments, unpackTaskDeployments } from '../../runtime/protocol/task-deployment.js';
import { encodeArgs } from '../../runtime/rpc/rpc-dispatcher.js';

function vertex(id: string, parallelism: number, kind: 'source' | 'map' | 'sink' = 'map'): JobVertex {
  const op =
    kind === 'source'
      ? { kind: 'source.sequence' as const, id: `${id}-op`, name: id, from: 0, to: 10 }
      : kind === 'sink'
        ? { kind: 'sink.collect' as const, id: `${id}-op`, name: id, maxRecords: 10 }
        : { kind: 'map' as const, id: `${id}-op`, name: id, fn: { export: 'default', operatorId: `${id}-op` } };
  return { id, name: id, parallelism, maxParallelism: 32_768, slotSharingGroup: 'default', operators: [op] };
}
function edge(source: string, target: string, partitionType: PartitionType, distribution: DistributionPattern = 'all-to-all'): JobEdge {
  return { id: `${source}-${target}`, source, target, distribution, partitioner: distribution === 'forward' ? 'forward' : 'rebalance', partitionType };
}
function jobGraph(vertices: JobVertex[], edges: JobEdge[]): JobGraph {
  return { jobId: JobId.of('big'), name: 'big', library: { sha256: 'ab'.repeat(32), sizeBytes: 1 }, program: { export: 'default', args: [] }, vertices, edges };
}
/** Every subtask gets a slot: `perExecutor` slots per TaskExecutor, subtask i of every vertex in slot i. */
function place(graph: ExecutionGraph, perExecutor = 4): void {
  for (const ev of graph.executionVertices) {
    ev.current.location = {
      resourceId: ResourceId.of(`te-${Math.floor(ev.subtaskIndex / perExecutor)}`),
      allocationId: AllocationId.of(`slot-${ev.subtaskIndex}`),
    };
  }
}
const descriptorsFor = (graph: ExecutionGraph) =>
  new TaskDeploymentDescriptorFactory(graph.jobGraph.jobId, graph, computePipelinedRegions(graph.jobGraph), (id) => `127.0.0.1:${7000 + Number(id.slice(3))}`);

describe('big graphs', () => {
  it('validates a 32768 × 32768 all-to-all graph sent as JSON and builds its ExecutionGraph, one region of 65536 subtasks', () => {
    const P = JOB_GRAPH_LIMITS.maxParallelism;
    expect(P).toBe(32_768);
    const raw = JSON.parse(JSON.stringify(jobGraph([vertex('src', P, 'source'), vertex('sink', P, 'sink')], [edge('src', 'sink', 'pipelined')])));
    const parsed = parseJobGraph(raw);
    validateJobGraph(parsed);
    const graph = new ExecutionGraph(parsed);
    expect(graph.executionVertices).toHaveLength(2 * P);
    expect(graph.subtaskVertices('sink')[P - 1]!.name).toBe('sink (32768/32768)');
    const plan = computePipelinedRegions(parsed);
    expect(plan.regions.map((r) => r.vertexIds)).toEqual([['src', 'sink']]);
  });

  it('refuses a vertex over 32768 subtasks, in the JobGraph and in the DataStream API, naming the field and the limit', () => {
    const over = jobGraph([vertex('src', 32_769, 'source'), vertex('sink', 2, 'sink')], [edge('src', 'sink', 'pipelined')]);
    expect(() => validateJobGraph(over)).toThrow(/vertices\[0\] \('src'\)\.parallelism 32769 exceeds the limit of 32768 subtasks per vertex/);
    const options = {
      jobId: JobId.of('j'),
      args: [],
      exportName: 'default',
      library: { sha256: 'b'.repeat(64), sizeBytes: 1 },
      defaultParallelism: 2,
      cwd: '/w',
    };
    const tooWide = defineJob('wide', (env) => void env.fromSequence(1, 2).setParallelism(32_769).collect());
    expect(() => buildJobGraph(tooWide, options)).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(tooWide, options)).toThrow(
      /'.*'\.setParallelism\(n\) needs an integer <= 32768 \(the most subtasks a vertex may have\), found 32769/,
    );
    const widest = buildJobGraph(
      defineJob(
        'widest',
        (env) =>
          void env
            .fromSequence(1, 2)
            .setParallelism(32_768)
            .rebalance()
            .map((n) => n)
            .setParallelism(32_768)
            .collect(),
      ),
      options,
    );
    expect(widest.vertices.filter((v) => v.parallelism === 32_768).map((v) => v.maxParallelism)).toEqual([32_768, 32_768]);
  });

  it('gives every consumer of an all-to-all edge the same group object, holding the producer vertex’s own subtask list', () => {
    const g = jobGraph([vertex('src', 5000, 'source'), vertex('sink', 3000, 'sink')], [edge('src', 'sink', 'blocking')]);
    const graph = new ExecutionGraph(g);
    const e = g.edges[0]!;
    const groups = new Set(graph.subtaskVertices('sink').map((c) => graph.consumedPartitionGroup(e, c.subtaskIndex)));
    expect(groups.size).toBe(1);
    const [group] = [...groups];
    expect(group!.producers).toBe(graph.subtaskVertices('src'));
    expect(group!.isAllToAll).toBe(true);
  });

  it('gives each consumer of a forward edge a group of its own producer', () => {
    const g = jobGraph([vertex('src', 100, 'source'), vertex('sink', 100, 'sink')], [edge('src', 'sink', 'pipelined', 'forward')]);
    const graph = new ExecutionGraph(g);
    const group = graph.consumedPartitionGroup(g.edges[0]!, 42);
    expect(group.producers).toEqual([graph.subtaskVertices('src')[42]]);
    expect(group.firstProducer).toBe(42);
    expect(group.isAllToAll).toBe(false);
  });

  it('describes an all-to-all edge’s producers once for all its consumers, and anew when a producer runs again', () => {
    const g = jobGraph([vertex('src', 2000, 'source'), vertex('sink', 2000, 'sink')], [edge('src', 'sink', 'blocking')]);
    const graph = new ExecutionGraph(g);
    place(graph);
    const factory = descriptorsFor(graph);
    const sinks = graph.subtasks('sink').map((e) => factory.create(e));
    expect(factory.producerDescriptionsBuilt).toBe(1);
    expect(new Set(sinks.map((d) => d.inputs[0]!.producers)).size).toBe(1);
    // 2000 producers on 500 TaskExecutors: each location once.
    expect(sinks[0]!.inputs[0]!.producers.locations).toHaveLength(500);
    const channels = inputChannelsOf(sinks[7]!.inputs[0]!);
    expect(channels).toHaveLength(2000);
    expect(channels.every((c) => c.subpartitionIndex === 7)).toBe(true);
    expect(channels.map((c) => c.partitionId)).toEqual(graph.subtasks('src').map((p) => partitionIdOf(g.edges[0]!, p)));
    expect(channels[1999]!.producer).toEqual({ resourceId: 'te-499', dataAddress: '127.0.0.1:7499' });

    // What goes over the wire is what a plain JSON encoding would give.
    const wire = JSON.parse(encodeArgs([sinks[7], FencingToken.of(3)]));
    expect(wire).toEqual(JSON.parse(JSON.stringify([sinks[7], 3])));
    expect(inputChannelsOf(wire[0].inputs[0])).toEqual(channels);

    // Producer 5 runs again (new attempt, new place): the next consumer descriptor names that attempt.
    const ev = graph.subtaskVertices('src')[5]!;
    ev.current.state = 'FAILED';
    const next = graph.resetForNewExecution(ev);
    next.location = { resourceId: ResourceId.of('te-900'), allocationId: AllocationId.of('slot-x') };
    const again = factory.create(graph.subtasks('sink')[0]!);
    expect(factory.producerDescriptionsBuilt).toBe(2);
    expect(inputChannelsOf(again.inputs[0]!)[5]).toEqual({
      partitionId: partitionIdOf(g.edges[0]!, next),
      subpartitionIndex: 0,
      producer: { resourceId: 'te-900', dataAddress: '127.0.0.1:7900' },
    });
    expect(factory.create(graph.subtasks('sink')[1]!).inputs[0]!.producers).toBe(again.inputs[0]!.producers);
  });

  it('keeps count of ended and finished subtasks through restarts and adopted attempts', () => {
    const g = jobGraph([vertex('src', 3, 'source'), vertex('sink', 2, 'sink')], [edge('src', 'sink', 'blocking')]);
    const graph = new ExecutionGraph(g);
    for (const e of graph.subtasks('src')) e.state = 'FINISHED';
    expect(graph.vertexFinished('src')).toBe(true);
    expect(graph.vertexFinished('sink')).toBe(false);
    const [s0, s1] = graph.subtaskVertices('sink');
    s0!.current.state = 'FAILED';
    s1!.current.state = 'CANCELED';
    expect(graph.allTerminal()).toBe(true);
    expect(graph.allFinished()).toBe(false);
    const old = s0!.current;
    graph.resetForNewExecution(s0!);
    expect(graph.allTerminal()).toBe(false);
    old.state = 'FINISHED'; // an older attempt's state does not count
    expect(graph.allTerminal()).toBe(false);
    s0!.current.state = 'FINISHED';
    graph.adoptFinished(s1!, old.attemptId, 7, ResourceId.of('te-1'));
    expect(graph.allFinished()).toBe(true);
    expect(graph.counts()).toMatchObject({ total: 5, finished: 5 });
    // A producer that runs again: its vertex is no longer finished.
    graph.resetForNewExecution(graph.subtaskVertices('src')[2]!);
    expect([graph.vertexFinished('src'), graph.allTerminal()]).toEqual([false, false]);
  });

  it('puts both ends of a pipelined all-to-all edge in one region and separates those of a blocking one, at 10,000 subtasks', () => {
    const N = 10_000;
    const g = jobGraph(
      [vertex('a', N, 'source'), vertex('b', N), vertex('c', N), vertex('d', N, 'sink')],
      [edge('a', 'b', 'pipelined'), edge('b', 'c', 'blocking'), edge('c', 'd', 'pipelined', 'forward')],
    );
    validateJobGraph(g);
    const plan = computePipelinedRegions(g);
    expect(plan.regions.map((r) => r.vertexIds)).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
    expect(plan.regions[1]!.blockingInputs.map((e) => e.id)).toEqual(['b-c']);
    expect(g.edges.map((e) => plan.partitionTypeOf(e))).toEqual(['pipelined', 'blocking', 'pipelined']);

    // Failover works on those regions: a failed consumer of finished, readable blocking output restarts
    // alone; a failed producer region restarts with what consumes it.
    const graph = new ExecutionGraph(g);
    const available = new Set<string>();
    const strategy = new RestartPipelinedRegionFailoverStrategy(plan, graph, (e, p) => available.has(partitionIdOf(e, p)));
    for (const id of ['a', 'b']) {
      for (const x of graph.subtasks(id)) {
        x.state = 'FINISHED';
        for (const e of graph.outputsOf.get(id) ?? []) available.add(partitionIdOf(e, x));
      }
    }
    const names = (rs: readonly { vertexIds: readonly string[] }[]) => rs.map((r) => [...r.vertexIds]);
    expect(names(strategy.regionsToRestart([plan.regionOf('d')]))).toEqual([['c', 'd']]);
    expect(names(strategy.regionsToRestart([plan.regionOf('a')]))).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
    // One lost blocking partition: its producer region runs again too.
    available.delete(partitionIdOf(g.edges[1]!, graph.subtasks('b')[N - 1]!));
    expect(names(strategy.regionsToRestart([plan.regionOf('c')]))).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
  });

  it('merges regions that would wait on each other through blocking all-to-all edges', () => {
    const N = 5000;
    // a → b blocking, a → c pipelined, c → b pipelined: b waits on a's completion, but shares a region with
    // a through c, so the blocking edge runs inside one region.
    const g = jobGraph(
      [vertex('a', N, 'source'), vertex('c', N), vertex('b', N, 'sink')],
      [edge('a', 'b', 'blocking'), edge('a', 'c', 'pipelined'), edge('c', 'b', 'pipelined')],
    );
    const plan = computePipelinedRegions(g);
    expect(plan.regions.map((r) => r.vertexIds)).toEqual([['a', 'c', 'b']]);
    expect(plan.partitionTypeOf(g.edges[0]!)).toBe('pipelined');
  });
});

describe('cached JSON parts', () => {
  it('leaves a caller’s string that looks like a placeholder alone', () => {
    const g = jobGraph([vertex('src', 3, 'source'), vertex('sink', 2, 'sink')], [edge('src', 'sink', 'pipelined')]);
    const graph = new ExecutionGraph(g);
    place(graph);
    const d = descriptorsFor(graph).create(graph.subtasks('sink')[0]!);
    const tricky = ['\u0000cached-json:0', '"\u0000cached-json:x:0"', { d }];
    expect(JSON.parse(stringifyWithCachedParts(tricky))).toEqual(JSON.parse(JSON.stringify(tricky)));
  });

  it("packs a TaskExecutor's tasks so a shared producer description and a vertex's operators travel once, and unpacks them as they were", () => {
    const graph = new ExecutionGraph(jobGraph([vertex('src', 1000, 'source'), vertex('sink', 1000, 'sink')], [edge('src', 'sink', 'pipelined')]));
    place(graph);
    const factory = descriptorsFor(graph);
    // te-0's share: subtasks 0..3 of both vertices.
    const descriptors = graph.executions.filter((e) => e.location!.resourceId === 'te-0').map((e) => factory.create(e));
    expect(descriptors).toHaveLength(8);
    const batch = packTaskDeployments(descriptors);
    expect(batch.vertices.map((v) => v.vertexId)).toEqual(['src', 'sink']);
    expect(batch.producers).toHaveLength(1);
    const wire = encodeArgs([batch, FencingToken.of(1)]);
    const oneDescription = stringifyWithCachedParts(descriptors[4]!.inputs[0]!.producers).length;
    expect(wire.length).toBeLessThan(2 * oneDescription);
    const [received] = JSON.parse(wire) as [typeof batch];
    expect(unpackTaskDeployments(received)).toEqual(JSON.parse(JSON.stringify(descriptors)));
  });

  it('keeps which input of a two-input task each gate feeds', () => {
    const graph = new ExecutionGraph(jobGraph([vertex('src', 4, 'source'), vertex('sink', 4, 'sink')], [edge('src', 'sink', 'pipelined')]));
    place(graph);
    const factory = descriptorsFor(graph);
    const descriptors = graph.executions.map((e) => factory.create(e)).map((d) => ({ ...d, inputs: d.inputs.map((g) => ({ ...g, targetInput: 1 })) }));
    const unpacked = unpackTaskDeployments(packTaskDeployments(descriptors));
    expect(unpacked.flatMap((d) => d.inputs.map((g) => g.targetInput))).toEqual(descriptors.flatMap((d) => d.inputs.map(() => 1)));
    expect(unpacked.some((d) => d.inputs.length > 0)).toBe(true);
  });

  it('refuses a batch whose references do not resolve, naming what is missing', () => {
    const graph = new ExecutionGraph(jobGraph([vertex('src', 4, 'source'), vertex('sink', 4, 'sink')], [edge('src', 'sink', 'pipelined')]));
    place(graph);
    const factory = descriptorsFor(graph);
    const batch = packTaskDeployments(graph.executions.map((e) => factory.create(e)));
    expect(() => unpackTaskDeployments({ ...batch, producers: [] })).toThrow(/reads producers 0 on edge src-sink, but the batch describes 0/);
    expect(() => unpackTaskDeployments({ ...batch, vertices: batch.vertices.slice(0, 1) })).toThrow(/names vertex 1, but the batch has 1/);
    expect(() => packTaskDeployments([])).toThrow(/at least one task/);
  });
});
