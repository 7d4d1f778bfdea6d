// Jobs of many trivial tasks for the scale benchmark and its tests: `vertices` vertices of `parallelism`
// subtasks each, in one chain of forward (pointwise) pipelined edges — one pipelined region, deployed at
// once. Vertex 0 emits 1..parallelism (one record per subtask), the middle ones pass records on, the last
// collects them: the job's result is 1..parallelism, whatever the number of tasks.
import { JobId } from '../../runtime/core/ids.js';
import type { JobEdge, JobGraph, JobVertex, OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';

function operator(template: JobGraph, kind: OperatorSpec['kind'], name?: string): OperatorSpec {
  const found = template.vertices.flatMap((v) => v.operators).find((op) => op.kind === kind && (name === undefined || op.name === name));
  if (found === undefined) throw new Error(`the scale job template has no ${kind} operator${name !== undefined ? ` named ${name}` : ''}`);
  return found;
}

/** `template`: what the job API built from bench/jobs/scale-chain.ts (its operators, program and library). */
export function scaleJobGraph(template: JobGraph, shape: { readonly vertices: number; readonly parallelism: number; readonly name?: string }): JobGraph {
  const { vertices: count, parallelism } = shape;
  if (!Number.isSafeInteger(count) || count < 2) throw new Error(`a scale job needs at least 2 vertices, found ${count}`);
  if (!Number.isSafeInteger(parallelism) || parallelism < 1) throw new Error(`a scale job needs a parallelism of at least 1, found ${parallelism}`);
  const seq = operator(template, 'source.sequence');
  const identity = operator(template, 'map', 'identity');
  const collect = operator(template, 'sink.collect');
  const vertices: JobVertex[] = [];
  const edges: JobEdge[] = [];
  for (let i = 0; i < count; i++) {
    const ops: OperatorSpec[] =
      i === 0
        ? [{ ...seq, id: `seq-${i}`, from: 1, to: parallelism } as OperatorSpec]
        : i === count - 1
          ? [{ ...collect, id: `collect-${i}`, maxRecords: parallelism } as OperatorSpec]
          : [{ ...identity, id: `identity-${i}` }];
    vertices.push({ id: `v${i}`, name: `v${i}`, parallelism, maxParallelism: Math.max(128, parallelism), slotSharingGroup: 'default', operators: ops });
    if (i > 0)
      edges.push({
        id: `v${i - 1}-to-v${i}`,
        source: `v${i - 1}`,
        target: `v${i}`,
        distribution: 'forward',
        partitioner: 'forward',
        partitionType: 'pipelined',
      });
  }
  return {
    ...template,
    jobId: JobId.random(),
    name: shape.name ?? `scale-${count}x${parallelism}`,
    vertices,
    edges,
  };
}
