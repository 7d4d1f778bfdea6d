// Pipelined regions: the vertices connected by pipelined edges run together, so they are deployed
// together; a region is deployed once every blocking partition it reads is complete. Computed per
// vertex (all subtasks of a vertex share its region), so the plan grows with vertices and edges only.
import type { JobEdge, JobGraph, PartitionType } from '../jobgraph/jobgraph.js';

export interface PipelinedRegion {
  /** Regions are numbered in a topological order: a region's producers have lower numbers. */
  readonly index: number;
  /** In the JobGraph's vertex order. */
  readonly vertexIds: readonly string[];
  /** Blocking edges from other regions into this one: it is deployed once all their producers finished. */
  readonly blockingInputs: readonly JobEdge[];
}

export interface RegionPlan {
  readonly regions: readonly PipelinedRegion[];
  regionOf(vertexId: string): PipelinedRegion;
  /**
   * The exchange an edge gets at run time: blocking only between two regions. A forward edge is always
   * pipelined, and so is a blocking edge whose ends had to share a region (see computePipelinedRegions).
   */
  partitionTypeOf(edge: JobEdge): PartitionType;
}

/**
 * Splits the graph into pipelined regions. Vertices joined by a pipelined or forward edge share a
 * region. Regions that depend on each other in a cycle through blocking edges (A reads B's blocking
 * output while B reads A's) cannot run one after the other, so they are merged, as Flink does; the
 * blocking edges inside a merged region run pipelined.
 */
export function computePipelinedRegions(graph: JobGraph): RegionPlan {
  const ids = graph.vertices.map((v) => v.id);
  const indexOf = new Map(ids.map((id, i) => [id, i]));
  const parent = ids.map((_, i) => i);
  const find = (i: number): number => {
    while (parent[i]! !== i) {
      parent[i] = parent[parent[i]!]!;
      i = parent[i]!;
    }
    return i;
  };
  const union = (a: number, b: number): void => {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
  };
  const ends = (e: JobEdge): [number, number] | undefined => {
    const s = indexOf.get(e.source);
    const t = indexOf.get(e.target);
    return s === undefined || t === undefined ? undefined : [s, t];
  };

  for (const e of graph.edges) {
    const st = ends(e);
    if (st !== undefined && (e.partitionType === 'pipelined' || e.distribution === 'forward')) union(st[0], st[1]);
  }

  // Merge cycles among regions (strongly connected components of the region graph, Tarjan).
  const succ = new Map<number, Set<number>>();
  for (const e of graph.edges) {
    const st = ends(e);
    if (st === undefined) continue;
    const [a, b] = [find(st[0]), find(st[1])];
    if (a === b) continue;
    let set = succ.get(a);
    if (set === undefined) succ.set(a, (set = new Set()));
    set.add(b);
  }
  const roots = [...new Set(ids.map((_, i) => find(i)))];
  const order = new Map<number, number>();
  const low = new Map<number, number>();
  const onStack = new Set<number>();
  const stack: number[] = [];
  let counter = 0;
  const strongConnect = (v: number): void => {
    // Iterative, so a long chain of regions cannot overflow the call stack.
    const work: { v: number; it: Iterator<number> }[] = [{ v, it: (succ.get(v) ?? new Set<number>()).values() }];
    order.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const next = top.it.next();
      if (!next.done) {
        const w = next.value;
        if (!order.has(w)) {
          order.set(w, counter);
          low.set(w, counter++);
          stack.push(w);
          onStack.add(w);
          work.push({ v: w, it: (succ.get(w) ?? new Set<number>()).values() });
        } else if (onStack.has(w)) {
          low.set(top.v, Math.min(low.get(top.v)!, order.get(w)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const up = work[work.length - 1]!;
        low.set(up.v, Math.min(low.get(up.v)!, low.get(top.v)!));
      }
      if (low.get(top.v) === order.get(top.v)) {
        for (;;) {
          const w = stack.pop()!;
          onStack.delete(w);
          union(w, top.v);
          if (w === top.v) break;
        }
      }
    }
  };
  for (const r of roots) if (!order.has(r)) strongConnect(r);

  // Group vertices by final root, then number the regions topologically (Kahn, ties by first vertex).
  const members = new Map<number, string[]>();
  ids.forEach((id, i) => {
    const r = find(i);
    const list = members.get(r) ?? [];
    list.push(id);
    members.set(r, list);
  });
  const regionRoots = [...members.keys()].sort((a, b) => a - b);
  const inputsOf = new Map<number, JobEdge[]>(regionRoots.map((r) => [r, []]));
  const downstream = new Map<number, Set<number>>(regionRoots.map((r) => [r, new Set()]));
  const indegree = new Map<number, number>(regionRoots.map((r) => [r, 0]));
  for (const e of graph.edges) {
    const st = ends(e);
    if (st === undefined) continue;
    const [a, b] = [find(st[0]), find(st[1])];
    if (a === b) continue;
    inputsOf.get(b)!.push(e);
    if (!downstream.get(a)!.has(b)) {
      downstream.get(a)!.add(b);
      indegree.set(b, indegree.get(b)! + 1);
    }
  }
  const ready = regionRoots.filter((r) => indegree.get(r) === 0);
  const sorted: number[] = [];
  while (ready.length > 0) {
    ready.sort((a, b) => a - b);
    const r = ready.shift()!;
    sorted.push(r);
    for (const d of downstream.get(r)!) {
      indegree.set(d, indegree.get(d)! - 1);
      if (indegree.get(d) === 0) ready.push(d);
    }
  }

  const regions: PipelinedRegion[] = sorted.map((r, index) => ({ index, vertexIds: members.get(r)!, blockingInputs: inputsOf.get(r)! }));
  const byRoot = new Map(sorted.map((r, i) => [r, regions[i]!]));
  const byVertex = new Map<string, PipelinedRegion>();
  ids.forEach((id, i) => byVertex.set(id, byRoot.get(find(i))!));
  return {
    regions,
    regionOf(vertexId) {
      const region = byVertex.get(vertexId);
      if (region === undefined) throw new Error(`vertex ${vertexId} is not in the job graph`);
      return region;
    },
    partitionTypeOf(edge) {
      const a = byVertex.get(edge.source);
      const b = byVertex.get(edge.target);
      return a !== undefined && a === b ? 'pipelined' : 'blocking';
    },
  };
}
