// The dataflow graph: dagre lays the vertices out left to right, drawn as SVG boxes coloured by their
// tasks' states, with arrows labelled by partitioner and exchange.
import { graphlib, layout } from '@dagrejs/dagre';
import { useMemo } from 'preact/hooks';
import { TASK_STATES, type PlanEdge, type TaskState } from '../api-types';
import { formatCount, formatExact, formatMsPerSecond, formatRate } from '../format';
import { describeCounts, taskTone, type StateCounts } from '../states';

export interface GraphVertex {
  readonly id: string;
  readonly name: string;
  readonly parallelism: number;
  readonly state: TaskState;
  readonly counts: StateCounts;
  readonly recordsIn: number;
  readonly recordsOut: number;
  /**
   * Records its inputs produced when they reach it pre-aggregated (folded per key by the producers), so
   * `recordsIn` counts partial results, not these records.
   */
  readonly preAggregatedFrom?: number;
  /** Records per second, from the two latest throughput samples. */
  readonly rate?: number;
  /** While it runs: ms of each second its busiest / most back-pressured subtask worked, waited for output. */
  readonly busyTimeMsPerSecond?: number;
  readonly backPressuredTimeMsPerSecond?: number;
  /** Where its subtasks are listed. */
  readonly href?: string;
}

/** "12 (pre-aggregated from 2,000,000)", or the plain count when nothing is pre-aggregated. */
export function describeRecordsIn(v: Pick<GraphVertex, 'recordsIn' | 'preAggregatedFrom'>, format: (n: number) => string = formatExact): string {
  return v.preAggregatedFrom === undefined ? format(v.recordsIn) : `${format(v.recordsIn)} (pre-aggregated from ${format(v.preAggregatedFrom)})`;
}

const PADDING = 12;
const NODE_MIN_WIDTH = 176;
const NODE_MAX_WIDTH = 224;
const NAME_LINE_HEIGHT = 16;
/** Below this scale the graph scrolls sideways rather than shrink its text further. */
const MIN_SCALE = 0.75;
const FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";
const NAME_FONT = `650 13px ${FONT_FAMILY}`;
const META_FONT = `12px ${FONT_FAMILY}`;
const LABEL_FONT = `11px ${FONT_FAMILY}`;

interface PlacedNode {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
  /** The name in at most two lines, cut short with an ellipsis beyond. */
  readonly lines: readonly string[];
}
interface PlacedEdge {
  readonly edge: PlanEdge;
  readonly key: string;
  readonly path: string;
  readonly label: { readonly x: number; readonly y: number; readonly width: number; readonly height: number };
}
interface Placed {
  readonly width: number;
  readonly height: number;
  readonly nodes: ReadonlyMap<string, PlacedNode>;
  readonly edges: readonly PlacedEdge[];
}

export function JobGraph({ vertices, edges }: { vertices: readonly GraphVertex[]; edges: readonly PlanEdge[] }) {
  // Laid out again only when the shape changes, not on every poll.
  const shapeKey = JSON.stringify([vertices.map((v) => [v.id, v.name]), edges]);
  const placed = useMemo(() => place(vertices, edges), [shapeKey]);

  return (
    <div class="graph-scroll">
      <svg
        data-testid="job-graph"
        class="graph"
        viewBox={`0 0 ${placed.width} ${placed.height}`}
        width={placed.width}
        height={placed.height}
        style={{ width: '100%', height: 'auto', maxWidth: `${placed.width}px`, minWidth: `${Math.round(placed.width * MIN_SCALE)}px` }}
        role="img"
        aria-label={`Dataflow graph: ${vertices.length} vertices, ${edges.length} edges`}
      >
        <defs>
          <marker
            id="graph-arrow"
            viewBox="0 0 10 10"
            refX="9"
            refY="5"
            markerWidth="9"
            markerHeight="9"
            markerUnits="userSpaceOnUse"
            orient="auto-start-reverse"
          >
            <path d="M0,0 L10,5 L0,10 z" class="graph-arrowhead" />
          </marker>
        </defs>
        {placed.edges.map(({ edge, key, path, label }) => (
          <g key={key} data-edge={`${edge.source}->${edge.target}`} class={`graph-edge exchange-${edge.exchange}`}>
            <path d={path} marker-end="url(#graph-arrow)" />
            <rect class="graph-edge-label-bg" x={label.x - label.width / 2} y={label.y - label.height / 2} width={label.width} height={label.height} rx="3" />
            <text x={label.x} y={label.y} text-anchor="middle" dominant-baseline="central" class="graph-edge-label">
              {edgeLabel(edge)}
            </text>
          </g>
        ))}
        {vertices.map((v) => {
          const node = placed.nodes.get(v.id);
          return node ? <Vertex key={v.id} vertex={v} node={node} /> : null;
        })}
      </svg>
    </div>
  );
}

function Vertex({ vertex, node }: { vertex: GraphVertex; node: PlacedNode }) {
  const total = TASK_STATES.reduce((sum, s) => sum + vertex.counts[s], 0);
  const barWidth = node.width - 2 * PADDING;
  const metaY = 20 + (node.lines.length - 1) * NAME_LINE_HEIGHT + 19;
  let offset = 0;
  const box = (
    <g
      data-vertex-id={vertex.id}
      data-state={vertex.state}
      class={`graph-vertex tone-${taskTone(vertex.state)}`}
      transform={`translate(${node.x - node.width / 2} ${node.y - node.height / 2})`}
    >
      <title>{`${vertex.name}\n${vertex.state}: ${describeCounts(vertex.counts)}\nrecords in ${describeRecordsIn(vertex)}, out ${formatExact(vertex.recordsOut)}${
        vertex.busyTimeMsPerSecond !== undefined
          ? `\nbusy ${formatMsPerSecond(vertex.busyTimeMsPerSecond)}, backpressured ${formatMsPerSecond(vertex.backPressuredTimeMsPerSecond)} (most of any subtask)`
          : ''
      }${vertex.href !== undefined ? '\nopen to see its subtasks' : ''}`}</title>
      <rect class="graph-vertex-box" width={node.width} height={node.height} rx="8" />
      <text class="graph-vertex-name">
        {node.lines.map((line, i) => (
          <tspan key={i} x={PADDING} y={20 + i * NAME_LINE_HEIGHT}>
            {line}
          </tspan>
        ))}
      </text>
      <text x={PADDING} y={metaY} class="graph-vertex-meta">
        {vertex.rate !== undefined ? `Parallelism ${vertex.parallelism} · ${formatRate(vertex.rate)}` : `Parallelism ${vertex.parallelism}`}
      </text>
      <text x={PADDING} y={metaY + 16} class="graph-vertex-meta">
        {`in ${formatCount(vertex.recordsIn)} · out ${formatCount(vertex.recordsOut)}`}
      </text>
      {vertex.preAggregatedFrom !== undefined && (
        <text x={PADDING} y={metaY + 32} class="graph-vertex-meta">
          {`in: pre-aggregated from ${formatCount(vertex.preAggregatedFrom)}`}
        </text>
      )}
      <g transform={`translate(${PADDING} ${node.height - 14})`}>
        <rect class="graph-mix-track" width={barWidth} height="5" rx="2.5" />
        {total > 0 &&
          TASK_STATES.filter((s) => vertex.counts[s] > 0).map((s) => {
            const w = (vertex.counts[s] / total) * barWidth;
            const part = <rect key={s} class={`fill-${taskTone(s)}`} x={offset} width={w} height="5" />;
            offset += w;
            return part;
          })}
      </g>
    </g>
  );
  return vertex.href === undefined ? (
    box
  ) : (
    <a href={vertex.href} class="graph-vertex-link" aria-label={`${vertex.name}: its subtasks`}>
      {box}
    </a>
  );
}

export function edgeLabel(edge: PlanEdge): string {
  return `${edge.partitioner} · ${edge.exchange}`;
}

function place(vertices: readonly GraphVertex[], edges: readonly PlanEdge[]): Placed {
  const measure = textMeasurer();
  const g = new graphlib.Graph({ multigraph: true });
  // Edge labels get a rank of their own, between the ranks of the vertices, with half this gap either side.
  g.setGraph({ rankdir: 'LR', nodesep: 24, ranksep: 36, edgesep: 16, marginx: 4, marginy: 4 });
  const shapes = new Map<string, { width: number; height: number; lines: string[] }>();
  for (const v of vertices) {
    const metaWidth = measure(META_FONT, v.preAggregatedFrom === undefined ? `in 888.8M · out 888.8M` : `in: pre-aggregated from 888.8M`);
    const natural = Math.max(measure(NAME_FONT, v.name), metaWidth);
    const width = Math.ceil(Math.min(NODE_MAX_WIDTH, Math.max(NODE_MIN_WIDTH, natural + 2 * PADDING)));
    const lines = wrap(v.name, width - 2 * PADDING, 2, (t) => measure(NAME_FONT, t));
    // A vertex fed pre-aggregated input says so on a line of its own.
    const shape = { width, height: 79 + (lines.length - 1) * NAME_LINE_HEIGHT + (v.preAggregatedFrom === undefined ? 0 : 16), lines };
    shapes.set(v.id, shape);
    g.setNode(v.id, { width: shape.width, height: shape.height });
  }
  const known = edges.filter((e) => g.hasNode(e.source) && g.hasNode(e.target));
  known.forEach((e, i) => {
    g.setEdge(e.source, e.target, { width: Math.ceil(measure(LABEL_FONT, edgeLabel(e))) + 8, height: 15, labelpos: 'c' }, String(i));
  });
  layout(g);

  const nodes = new Map<string, PlacedNode>();
  for (const v of vertices) {
    const n = g.node(v.id);
    const shape = shapes.get(v.id)!;
    nodes.set(v.id, { x: n.x, y: n.y, width: shape.width, height: shape.height, lines: shape.lines });
  }
  const placedEdges = known.map((edge, i) => {
    const e = g.edge(edge.source, edge.target, String(i)) as { points: { x: number; y: number }[]; x: number; y: number; width: number; height: number };
    return { edge, key: `${edge.source}->${edge.target}#${i}`, path: smoothPath(e.points), label: { x: e.x, y: e.y, width: e.width, height: e.height } };
  });
  const graph = g.graph();
  return { width: Math.ceil(graph.width ?? 0), height: Math.ceil(graph.height ?? 0), nodes, edges: placedEdges };
}

/** Text widths as the browser will draw them, so boxes fit their names in any font. */
function textMeasurer(): (font: string, text: string) => number {
  const context = document.createElement('canvas').getContext('2d');
  return (font, text) => {
    if (!context) return text.length * 7.5;
    context.font = font;
    return context.measureText(text).width;
  };
}

/** Breaks at spaces (or anywhere, for a long word) into at most `maxLines`, the last one ending in "…" if cut. */
function wrap(text: string, width: number, maxLines: number, measure: (t: string) => number): string[] {
  const lines: string[] = [];
  let rest = text.trim();
  while (rest.length > 0 && lines.length < maxLines) {
    if (measure(rest) <= width) {
      lines.push(rest);
      rest = '';
      break;
    }
    let fit = 1;
    while (fit < rest.length && measure(rest.slice(0, fit + 1)) <= width) fit++;
    const space = rest.lastIndexOf(' ', fit);
    const cut = space > 0 && lines.length < maxLines - 1 ? space : fit;
    lines.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest.length > 0) {
    let last = lines.pop() ?? '';
    while (last.length > 0 && measure(`${last}…`) > width) last = last.slice(0, -1);
    lines.push(`${last.trimEnd()}…`);
  }
  return lines;
}

/** Straight first and last segments (so the arrowhead points along the edge), rounded corners between. */
function smoothPath(points: readonly { x: number; y: number }[]): string {
  const [first, ...rest] = points;
  if (first === undefined) return '';
  let d = `M${first.x},${first.y}`;
  for (let i = 0; i < rest.length - 1; i++) {
    const p = rest[i]!;
    const next = rest[i + 1]!;
    d += ` Q${p.x},${p.y} ${(p.x + next.x) / 2},${(p.y + next.y) / 2}`;
  }
  const last = rest[rest.length - 1];
  if (last) d += ` L${last.x},${last.y}`;
  return d;
}
