// Max parallelism (the number of key groups): set on the environment or an operator, it becomes the
// vertex's maxParallelism, the key groups its producers hash into, and the task's key-group range.
import { describe, expect, it } from 'vitest';
import { defineJob } from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { AllocationId, ResourceId } from '../../runtime/core/ids.js';
import { TaskDeploymentDescriptorFactory } from '../../runtime/jobmaster/deployment-descriptors.js';
import { ExecutionGraph } from '../../runtime/jobmaster/execution-graph.js';
import { computePipelinedRegions } from '../../runtime/jobmaster/pipelined-regions.js';
import { packTaskDeployments, unpackTaskDeployments } from '../../runtime/protocol/task-deployment.js';
import { maxParallelismOf } from '../../runtime/task/state/keyed-state-backend.js';
import { buildOptions } from '../support/job-graphs.js';

const keyedJob = (configure: { env?: number; keyed?: number; map?: number }) =>
  defineJob('mp', (env) => {
    if (configure.env !== undefined) env.setMaxParallelism(configure.env);
    const keyed = env
      .fromSequence(1, 10)
      .keyBy((n) => n % 3)
      .reduce((a, b) => a + b);
    if (configure.keyed !== undefined) keyed.setMaxParallelism(configure.keyed);
    const mapped = keyed.map((n) => n * 2);
    if (configure.map !== undefined) mapped.setMaxParallelism(configure.map);
    mapped.collect();
  });

const maxOf = (g: ReturnType<typeof buildJobGraph>) => g.vertices.map((v) => `${v.operators.map((o) => o.kind).join('+')}:${v.maxParallelism}`);

describe('setMaxParallelism', () => {
  it("defaults to Flink's: max(128, the next power of two >= 1.5 × parallelism)", () => {
    expect(maxOf(buildJobGraph(keyedJob({}), buildOptions({ defaultParallelism: 2 })))).toEqual(['source.sequence:128', 'keyed.reduce+map+sink.collect:128']);
    expect(maxOf(buildJobGraph(keyedJob({}), buildOptions({ defaultParallelism: 200 })))).toEqual(['source.sequence:512', 'keyed.reduce+map+sink.collect:512']);
  });

  it("takes the environment's, and an operator's own over it; a chain takes its head's", () => {
    expect(maxOf(buildJobGraph(keyedJob({ env: 1000 }), buildOptions()))).toEqual(['source.sequence:1000', 'keyed.reduce+map+sink.collect:1000']);
    expect(maxOf(buildJobGraph(keyedJob({ env: 1000, keyed: 64 }), buildOptions()))).toEqual(['source.sequence:1000', 'keyed.reduce+map+sink.collect:64']);
    expect(maxOf(buildJobGraph(keyedJob({ map: 64 }), buildOptions()))).toEqual(['source.sequence:128', 'keyed.reduce+map+sink.collect:128']);
  });

  it('reaches the producers as the key groups they hash into and the keyed task as its own, through a deployment batch', () => {
    const graph = new ExecutionGraph(buildJobGraph(keyedJob({ keyed: 64 }), buildOptions({ defaultParallelism: 2 })));
    for (const ev of graph.executionVertices) {
      ev.current.location = { resourceId: ResourceId.of('te-0'), allocationId: AllocationId.of(`slot-${ev.subtaskIndex}`) };
    }
    const factory = new TaskDeploymentDescriptorFactory(graph.jobGraph.jobId, graph, computePipelinedRegions(graph.jobGraph), () => '127.0.0.1:7000');
    const [source, keyed] = graph.jobGraph.vertices;
    const descriptors = [...graph.subtasks(source!.id), ...graph.subtasks(keyed!.id)].map((e) => factory.create(e));
    const unpacked = unpackTaskDeployments(JSON.parse(JSON.stringify(packTaskDeployments(descriptors))));
    expect(unpacked.filter((d) => d.vertexId === source!.id).map((d) => d.outputs[0]!.keyGroups)).toEqual([64, 64]);
    expect(unpacked.map((d) => maxParallelismOf(d))).toEqual([128, 128, 64, 64]);
  });

  it('refuses a max parallelism out of range, or below the parallelism, naming the operator', () => {
    const bad = (n: number) => defineJob('bad', (env) => env.setMaxParallelism(n));
    for (const n of [0, 1.5, 40_000])
      expect(() => buildJobGraph(bad(n), buildOptions())).toThrow(/env\.setMaxParallelism\(n\) needs an integer from 1 to 32768/);
    const below = defineJob('below', (env) => {
      env
        .fromSequence(1, 10)
        .keyBy((n) => n)
        .reduce((a, b) => a + b)
        .name('totals')
        .setParallelism(8)
        .setMaxParallelism(4)
        .collect();
    });
    expect(() => buildJobGraph(below, buildOptions())).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(below, buildOptions())).toThrow(/operator 'totals' has parallelism 8 but max parallelism 4/);
  });
});
