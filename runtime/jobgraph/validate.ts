// Checks that a decoded JobGraph can run (validateJobGraph): references between vertices and edges,
// cycles, chains, keys, paths and limits across the graph, every problem reported at once. Its shape is
// decoded first by parseJobGraph (job-graph-schema.ts).
import {
  functionKey,
  functionRefsOf,
  isKeyedOperator,
  isSinkOperator,
  isSourceOperator,
  type FunctionRef,
  type JobGraph,
  type JobVertex,
  type OperatorSpec,
} from './jobgraph.js';
import { invalidJobGraph, JOB_GRAPH_LIMITS } from './limits.js';
import { CheckpointingMode, MIN_CHECKPOINT_INTERVAL_MS } from './checkpointing.js';
import { isFilesystemRoot, isWithin, pathProblem } from './paths.js';
import { isTwoInputOperator, keyRoleOfInput } from './two-input-operator-specs.js';
import { windowPreAggregationProblem } from './window-spec.js';

class Problems {
  readonly list: string[] = [];
  add(message: string): void {
    this.list.push(message);
  }
  throwIfAny(): void {
    if (this.list.length > 0) throw invalidJobGraph(this.list);
  }
}

/** Source paths and sink targets on S3 (AWS backend): a valid bucket name, then an optional key or prefix. */
const S3_URI = /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[^\0]*)?$/;

/**
 * Checks that a (well-typed) JobGraph can run, throwing one InvalidJobGraphError that lists every
 * problem. With `libraryExports`, also checks that the program and every FunctionRef name an export of
 * the library.
 */
export function validateJobGraph(graph: JobGraph, libraryExports?: readonly string[]): void {
  const problems = new Problems();
  const L = JOB_GRAPH_LIMITS;
  const exportSet = libraryExports === undefined ? undefined : new Set(libraryExports);
  const label = (v: JobVertex, i: number): string => `vertices[${i}] ('${v.name}')`;

  if (graph.vertices.length === 0) problems.add('the graph has no vertices: a job needs at least one source and one sink');
  if (graph.vertices.length > L.maxVertices) problems.add(`the graph has ${graph.vertices.length} vertices, the limit is ${L.maxVertices}`);
  if (graph.edges.length > L.maxEdges) problems.add(`the graph has ${graph.edges.length} edges, the limit is ${L.maxEdges}`);
  if (graph.program.args.length > L.maxArgs) problems.add(`program.args has ${graph.program.args.length} entries, the limit is ${L.maxArgs}`);
  if (exportSet !== undefined && !exportSet.has(graph.program.export)) {
    problems.add(
      `program.export '${graph.program.export}' is not exported by the library (it exports: ${[...exportSet].map((e) => `'${e}'`).join(', ') || 'nothing'})`,
    );
  }

  const vertexIndex = new Map<string, number>();
  const operatorSeen = new Map<string, string>();
  const uidSeen = new Map<string, string>();
  // The ids operators without a uid store their state under (`<vertex id>:<index in the chain>`).
  const generatedIds = new Set(graph.vertices.flatMap((v) => v.operators.map((_, j) => `${v.id}:${j}`)));
  const sinkPaths = new Map<string, string>();
  const collectSinks: string[] = [];
  // Operator id → its name, so messages about a function name the operator the user wrote.
  const operatorNames = new Map<string, string>();
  for (const v of graph.vertices) for (const op of v.operators) if (!operatorNames.has(op.id)) operatorNames.set(op.id, op.name);
  const operatorOf = (ref: FunctionRef): string => {
    const name = operatorNames.get(ref.operatorId);
    return name === undefined ? `'${functionKey(ref)}' (no operator of the graph has id '${ref.operatorId}')` : `the ${ref.role ?? 'function'} of '${name}'`;
  };
  graph.vertices.forEach((v, i) => {
    const at = label(v, i);
    if (vertexIndex.has(v.id)) problems.add(`${at}: duplicate vertex id '${v.id}' (also vertices[${vertexIndex.get(v.id)}])`);
    else vertexIndex.set(v.id, i);
    if (v.parallelism < 1) problems.add(`${at}.parallelism must be >= 1, found ${v.parallelism}`);
    if (v.parallelism > L.maxParallelism) problems.add(`${at}.parallelism ${v.parallelism} exceeds the limit of ${L.maxParallelism} subtasks per vertex`);
    if (v.maxParallelism > L.maxMaxParallelism) problems.add(`${at}.maxParallelism ${v.maxParallelism} exceeds the limit of ${L.maxMaxParallelism} key groups`);
    if (v.parallelism > v.maxParallelism) problems.add(`${at}.parallelism ${v.parallelism} exceeds its maxParallelism ${v.maxParallelism}`);
    if (v.operators.length === 0) problems.add(`${at}.operators is empty: a vertex runs at least one operator`);
    if (v.operators.length > L.maxOperatorsPerVertex)
      problems.add(`${at}.operators has ${v.operators.length} entries, the limit is ${L.maxOperatorsPerVertex}`);
    if (v.chainInputs !== undefined) {
      const ins = v.chainInputs;
      if (ins.length !== v.operators.length) problems.add(`${at}.chainInputs has ${ins.length} entries for ${v.operators.length} operators: one per operator`);
      ins.forEach((from, j) => {
        if (j === 0 ? from !== -1 : from < 0 || from >= j)
          problems.add(`${at}.chainInputs[${j}] is ${from}: the first operator reads -1, each other one an operator before it (0..${j - 1})`);
      });
      if (v.operators.some(isSinkOperator)) problems.add(`${at}: a branching chain (chainInputs) cannot hold a sink; give the sink its own vertex`);
    }
    v.operators.forEach((op, j) => {
      const opAt = `${at}.operators[${j}] ('${op.name}')`;
      const prev = operatorSeen.get(op.id);
      if (prev !== undefined) problems.add(`${opAt}: duplicate operator id '${op.id}' (also ${prev})`);
      else operatorSeen.set(op.id, opAt);
      if (op.uid !== undefined) {
        const prevUid = uidSeen.get(op.uid);
        if (prevUid !== undefined) problems.add(`${opAt}: uid '${op.uid}' is also the uid of ${prevUid}; each operator's uid must be unique in the job`);
        else uidSeen.set(op.uid, opAt);
        if (generatedIds.has(op.uid))
          problems.add(
            `${opAt}: uid '${op.uid}' is the id an operator without a uid stores its state under (<vertex id>:<index in the chain>); choose another`,
          );
      }
      if (isSourceOperator(op) && j > 0) problems.add(`${opAt}: a source (${op.kind}) can only be the first operator of a chain`);
      if (isSinkOperator(op) && j < v.operators.length - 1) problems.add(`${opAt}: a sink (${op.kind}) can only be the last operator of a chain`);
      if (exportSet !== undefined) {
        for (const ref of functionRefsOf(op)) {
          if (!exportSet.has(ref.export)) problems.add(`${opAt}.${ref.role ?? 'fn'}.export '${ref.export}' is not exported by the library`);
        }
      }
      if (isTwoInputOperator(op) && j > 0) {
        problems.add(`${opAt}: a two-input operator (${op.kind}) must head its chain, fed by the edges of both its inputs; found at position ${j}`);
      } else if (isKeyedOperator(op) && j > 0) {
        problems.add(`${opAt}: a keyed operator (${op.kind}) must head its chain, fed by hash edges; found at position ${j}`);
      }
      if (op.kind === 'keyed.window') {
        const problem = op.preAggregate === true ? windowPreAggregationProblem(op) : undefined;
        if (problem !== undefined) problems.add(`${opAt}: preAggregate ${problem}`);
      } else if ('preAggregate' in op && op.preAggregate === true) {
        if (op.emit !== 'final')
          problems.add(`${opAt}: preAggregate needs emit 'final' (bounded input), found emit '${op.emit}': running updates are never pre-aggregated`);
        if (op.kind === 'keyed.aggregate' && op.merge === undefined) problems.add(`${opAt}: preAggregate on an aggregate needs its merge function, found none`);
      }
      switch (op.kind) {
        case 'source.sequence':
          if (op.from > op.to) problems.add(`${opAt}: from (${op.from}) must be <= to (${op.to})`);
          break;
        case 'source.textFile': {
          const bad = pathProblem(op.path, `${opAt}.path`, true);
          if (op.path.startsWith('s3://')) {
            if (!S3_URI.test(op.path)) problems.add(`${opAt}.path must be s3://<bucket>/<key or prefix> with a valid bucket name, found '${op.path}'`);
            else if (bad !== undefined) problems.add(bad);
          } else if (bad !== undefined) {
            problems.add(
              bad.replace(
                'must be absolute (tasks run in other processes)',
                'must be absolute (tasks run in other processes) or an s3://<bucket>/<key or prefix> URI (AWS backend)',
              ),
            );
          }
          break;
        }
        case 'source.collection':
          if (v.parallelism !== 1) problems.add(`${at}.parallelism must be 1: its collection source is not parallel, found ${v.parallelism}`);
          break;
        case 'sink.textFile': {
          const bad = pathProblem(op.path, `${opAt}.path`, true);
          if (op.path.startsWith('s3://')) {
            if (!S3_URI.test(op.path)) problems.add(`${opAt}.path must be s3://<bucket>/<prefix> with a valid bucket name, found '${op.path}'`);
            else if (bad !== undefined) problems.add(bad);
          } else if (bad !== undefined) {
            problems.add(
              bad.replace(
                'must be absolute (tasks run in other processes)',
                'must be absolute (tasks run in other processes) or an s3://<bucket>/<prefix> URI (AWS backend)',
              ),
            );
          } else if (isFilesystemRoot(op.path)) {
            problems.add(`${opAt}.path is a filesystem root ('${op.path}'); a text sink writes a folder of its own: name one below it`);
          }
          if (bad === undefined) {
            for (const [other, otherAt] of sinkPaths) {
              if (other === op.path) problems.add(`${opAt}: writes to '${op.path}' like ${otherAt}; give each sink its own path`);
              else if (isWithin(op.path, other) || isWithin(other, op.path))
                problems.add(
                  `${opAt}: its target '${op.path}' and the target '${other}' of ${otherAt} lie one inside the other; give each sink a folder of its own`,
                );
            }
            sinkPaths.set(op.path, opAt);
          }
          break;
        }
        case 'sink.collect':
          collectSinks.push(`'${op.name}'`);
          break;
        case 'source.generate':
          if (op.count !== undefined && (!Number.isSafeInteger(op.count) || op.count < 0))
            problems.add(`${opAt}.count must be an integer >= 0, found ${op.count}`);
          if (op.ratePerSecond !== undefined && !(op.ratePerSecond > 0)) problems.add(`${opAt}.ratePerSecond must be > 0, found ${op.ratePerSecond}`);
          break;
        case 'keyed.sum':
          if (op.field !== undefined && op.selector !== undefined) problems.add(`${opAt}: sum takes a field or a selector, not both`);
          break;
        case 'source.connector':
        case 'sink.connector':
        case 'map':
        case 'flatMap':
        case 'filter':
        case 'process':
        case 'keyed.process':
        case 'timestampsAndWatermarks':
        case 'keyed.reduce':
        case 'keyed.aggregate':
        case 'keyed.min':
        case 'keyed.max':
        case 'keyed.minBy':
        case 'keyed.maxBy':
        case 'co.map':
        case 'co.flatMap':
        case 'co.process':
        case 'keyed.coProcess':
        case 'keyed.intervalJoin':
        case 'keyed.windowJoin':
        case 'broadcast.process':
        case 'keyed.broadcastProcess':
          break;
        case 'keyed.window':
          windowProblems(op).forEach((p) => problems.add(`${opAt}: ${p}`));
          break;
        default:
          op satisfies never;
      }
    });
  });
  if (collectSinks.length > 1) {
    problems.add(
      `the graph has ${collectSinks.length} collect sinks (${collectSinks.join(', ')}), at most one is allowed (its records are the job's result); collect one stream, or union the streams first`,
    );
  }

  const edgeIds = new Set<string>();
  const inDegree = new Map<string, number>();
  const outEdges = new Map<string, string[]>();
  // A vertex by its name (what the job API makes of its operators' names), its id when it has none.
  const vertexName = (id: string): string => {
    const i = vertexIndex.get(id);
    return i === undefined ? `'${id}'` : `'${graph.vertices[i]!.name}'`;
  };
  graph.edges.forEach((e, i) => {
    const at = `edges[${i}] (from ${vertexName(e.source)} to ${vertexName(e.target)})`;
    if (edgeIds.has(e.id)) problems.add(`${at}: duplicate edge id '${e.id}'`);
    edgeIds.add(e.id);
    const si = vertexIndex.get(e.source);
    const ti = vertexIndex.get(e.target);
    if (si === undefined) problems.add(`${at}.source '${e.source}' is not a vertex of the graph`);
    if (ti === undefined) problems.add(`${at}.target '${e.target}' is not a vertex of the graph`);
    if (e.source === e.target) problems.add(`${at} connects a vertex to itself: a job graph must be acyclic`);
    // Two edges between the same two vertices are allowed: each carries every record, which is what a
    // stream unioned with itself means (each record once per occurrence).
    if ((e.distribution === 'forward') !== (e.partitioner === 'forward')) {
      problems.add(
        `${at}: distribution '${e.distribution}' does not go with partitioner '${e.partitioner}' (a forward partitioner needs a forward distribution and the other way round)`,
      );
    }
    if (si === undefined || ti === undefined) return;
    const s = graph.vertices[si]!;
    const t = graph.vertices[ti]!;
    if (e.partitioner === 'hash' && e.keySelector === undefined) {
      problems.add(`${at}: a hash edge needs a keySelector (the function that gives each record its key)`);
    }
    if (e.partitioner !== 'hash' && e.keySelector !== undefined) {
      problems.add(`${at}: only hash edges carry a keySelector, found one on a '${e.partitioner}' edge`);
    }
    const head = t.operators[0];
    const input = e.targetInput ?? 0;
    const twoInput = head !== undefined && isTwoInputOperator(head);
    if (input !== 0 && !twoInput) {
      problems.add(
        `${at}: feeds input ${input} of '${t.name}', whose first operator${head === undefined ? '' : ` '${head.name}' (${head.kind})`} reads one input`,
      );
    }
    const keyRole = head !== undefined && twoInput ? keyRoleOfInput(head, input) : 'key';
    if (head !== undefined && isKeyedOperator(head) && 'key' in head && keyRole === undefined) {
      if (e.partitioner !== 'broadcast') {
        problems.add(`${at}: feeds the broadcast input of '${head.name}' (${head.kind}), which needs a broadcast edge, found a '${e.partitioner}' edge`);
      }
    } else if (head !== undefined && isKeyedOperator(head) && 'key' in head) {
      const headKey = keyRole === 'key2' && 'key2' in head ? head.key2 : head.key;
      if (e.partitioner !== 'hash') {
        problems.add(
          `${at}: '${t.name}' starts with keyed operator '${head.name}' (${head.kind}), which must be fed by hash edges, found a '${e.partitioner}' edge; use keyBy(...)`,
        );
      } else if (e.keySelector !== undefined && (e.keySelector.export !== headKey.export || functionKey(e.keySelector) !== functionKey(headKey))) {
        problems.add(
          `${at}: routes records by ${operatorOf(e.keySelector)} but '${head.name}' keys them by ${operatorOf(headKey)}; both sides must use the same key selector`,
        );
      }
    }
    if (e.distribution === 'forward' && s.parallelism !== t.parallelism) {
      problems.add(
        `${at}: a forward edge needs equal parallelism, but '${s.name}' has ${s.parallelism} and '${t.name}' has ${t.parallelism}; use rebalance (all-to-all)`,
      );
    }
    const last = s.operators[s.operators.length - 1];
    if (last !== undefined && isSinkOperator(last)) problems.add(`${at}: vertex '${s.name}' ends in a sink and cannot have outputs`);
    if (e.sourceOperator !== undefined && e.sourceOperator >= s.operators.length)
      problems.add(`${at}.sourceOperator is ${e.sourceOperator}, but '${s.name}' has operators 0..${s.operators.length - 1}`);
    inDegree.set(e.target, (inDegree.get(e.target) ?? 0) + 1);
    const outs = outEdges.get(e.source) ?? [];
    outs.push(e.target);
    outEdges.set(e.source, outs);
  });

  graph.vertices.forEach((v, i) => {
    const first = v.operators[0];
    if (first === undefined) return;
    const inputs = inDegree.get(v.id) ?? 0;
    if (isSourceOperator(first) && inputs > 0) problems.add(`${label(v, i)} starts with a source (${first.kind}) but has ${inputs} input edge(s)`);
    if (!isSourceOperator(first) && inputs === 0)
      problems.add(`${label(v, i)} starts with '${first.name}' (${first.kind}), not a source, and has no input edges`);
    if (isTwoInputOperator(first)) {
      for (const input of [0, 1]) {
        if (!graph.edges.some((e) => e.target === v.id && (e.targetInput ?? 0) === input))
          problems.add(`${label(v, i)} starts with two-input operator '${first.name}' (${first.kind}) but no edge feeds its input ${input}`);
      }
    }
  });

  // Kahn's algorithm over the vertices whose ids are unique; what remains lies on or behind a cycle.
  if (vertexIndex.size > 0) {
    const remaining = new Map<string, number>();
    for (const id of vertexIndex.keys()) remaining.set(id, 0);
    for (const e of graph.edges) {
      if (remaining.has(e.source) && remaining.has(e.target)) remaining.set(e.target, remaining.get(e.target)! + 1);
    }
    const ready = [...remaining].filter(([, d]) => d === 0).map(([id]) => id);
    while (ready.length > 0) {
      const id = ready.pop()!;
      remaining.delete(id);
      for (const target of outEdges.get(id) ?? []) {
        const d = remaining.get(target);
        if (d === undefined) continue;
        remaining.set(target, d - 1);
        if (d - 1 === 0) ready.push(target);
      }
    }
    // Also drop what merely lies behind a cycle, so the message names the cycle's own vertices.
    for (let trimmed = true; trimmed;) {
      trimmed = false;
      for (const id of remaining.keys()) {
        if (!(outEdges.get(id) ?? []).some((t) => remaining.has(t))) {
          remaining.delete(id);
          trimmed = true;
        }
      }
    }
    if (remaining.size > 0) {
      problems.add(`the graph has a cycle through vertices ${[...remaining.keys()].map(vertexName).join(', ')}: a job graph must be acyclic`);
    }
  }

  checkResourceProfiles(graph, problems);
  checkCheckpointing(graph, problems);

  problems.throwIfAny();
}

function checkResourceProfiles(graph: JobGraph, problems: Problems): void {
  if (graph.resourceProfiles === undefined) return;
  const L = JOB_GRAPH_LIMITS;
  const entries = Object.entries(graph.resourceProfiles);
  if (entries.length > L.maxResourceProfiles) problems.add(`resourceProfiles has ${entries.length} entries, the limit is ${L.maxResourceProfiles}`);
  const groups = new Set(graph.vertices.map((v) => v.slotSharingGroup));
  for (const [group, p] of entries) {
    const at = `resourceProfiles[${JSON.stringify(group)}]`;
    if (!groups.has(group)) problems.add(`${at}: no vertex is in slot sharing group '${group}' (groups: ${[...groups].map((g) => `'${g}'`).join(', ')})`);
    if (!(Number.isFinite(p.cpu) && p.cpu > 0 && p.cpu <= L.maxProfileCpu))
      problems.add(`${at}.cpu must be > 0 and <= ${L.maxProfileCpu} vCPUs per slot, found ${p.cpu}`);
    if (!(Number.isSafeInteger(p.memoryMiB) && p.memoryMiB >= L.minProfileMemoryMiB && p.memoryMiB <= L.maxProfileMemoryMiB)) {
      problems.add(`${at}.memoryMiB must be an integer from ${L.minProfileMemoryMiB} to ${L.maxProfileMemoryMiB} MiB per slot, found ${p.memoryMiB}`);
    }
  }
}

function checkCheckpointing(graph: JobGraph, problems: Problems): void {
  const c = graph.checkpointing;
  if (c === undefined) return;
  if (!(Number.isSafeInteger(c.intervalMs) && c.intervalMs >= MIN_CHECKPOINT_INTERVAL_MS))
    problems.add(`checkpointing.intervalMs must be an integer >= ${MIN_CHECKPOINT_INTERVAL_MS} ms, found ${c.intervalMs}`);
  if (c.unaligned === true && c.mode === CheckpointingMode.AT_LEAST_ONCE) {
    problems.add(
      `checkpointing.unaligned is on with mode 'AT_LEAST_ONCE': unaligned checkpoints exist only for 'EXACTLY_ONCE' (at-least-once barriers never wait, so there is nothing to overtake); use one or the other`,
    );
  }
  // A checkpoint spans every running task, and a blocking exchange's consumer starts only once its producer
  // finished — which a checkpointing task does only after its final checkpoint: the job would never end.
  const blocking = graph.edges.filter((e) => e.partitionType === 'blocking');
  if (blocking.length > 0) {
    problems.add(
      `checkpointing is on and ${blocking.map((e) => `edge ${e.id} (${e.source} → ${e.target})`).join(', ')} ${blocking.length === 1 ? 'is a blocking exchange' : 'are blocking exchanges'}: a blocking exchange's consumer starts only after its producer finished, and a checkpointing task finishes only after a checkpoint spanning the whole job; use pipelined exchanges (drop setDefaultExchange('blocking') and { exchange: 'blocking' }) or turn checkpointing off`,
    );
  }
}

/** What a window operator's spec must hold together: the functions its windowFunction names. */
function windowProblems(op: Extract<OperatorSpec, { kind: 'keyed.window' }>): string[] {
  const problems: string[] = [];
  const has = { reduce: op.reduce !== undefined, aggregate: op.createAccumulator !== undefined && op.add !== undefined && op.getResult !== undefined };
  if (op.windowFunction === 'reduce' && !has.reduce) problems.push('a reduce window needs its reduce function, found none');
  if (op.windowFunction === 'aggregate' && !has.aggregate) problems.push('an aggregate window needs createAccumulator, add and getResult');
  if (op.windowFunction === 'process' && op.process === undefined) problems.push('a process window needs its process function, found none');
  if (op.window.type === 'sliding' && op.window.slide > op.window.size)
    problems.push(`a sliding window's slide (${op.window.slide} ms) must not exceed its size (${op.window.size} ms)`);
  if (op.lateDataTag !== undefined && op.window.timeDomain === 'processing-time')
    problems.push('processing-time windows have no late data: remove lateDataTag');
  return problems;
}
