// A job's vertices as a table: tasks, records and their rates, busy / backpressured / idle time and watermark.
import { describeRecordsIn, type GraphVertex } from './job-graph';
import type { VertexDetails } from '../api-types';
import { TaskStateBadge } from './state-badge';
import { StateMix } from './state-mix';
import { formatCount, formatExact, formatMsPerSecond, formatRate, formatWatermark } from '../format';

export interface VertexView extends GraphVertex {
  readonly region?: number;
  readonly rateIn?: number;
  readonly rateOut?: number;
  readonly idleTimeMsPerSecond?: number;
  readonly watermark?: VertexDetails['watermark'];
}

const msPerSecondTitle = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : `${Math.round(ms)} ms per second`);

export function VertexTable({ vertices }: { vertices: readonly VertexView[] }) {
  return (
    <section class="card" aria-labelledby="vertices">
      <div class="card-header">
        <h2 id="vertices">Vertices</h2>
      </div>
      <div class="table-wrap">
        <table class="table">
          <thead>
            <tr>
              <th scope="col">Vertex</th>
              <th scope="col">State</th>
              <th scope="col">Tasks</th>
              <th scope="col" class="num">
                Parallelism
              </th>
              <th scope="col" class="num">
                Records in
              </th>
              <th scope="col" class="num">
                Records out
              </th>
              <th scope="col" class="num">
                In/s
              </th>
              <th scope="col" class="num">
                Out/s
              </th>
              <th scope="col" class="num" title="Share of each second over the last 5 s its busiest subtask worked">
                Busy
              </th>
              <th scope="col" class="num" title="Share of each second over the last 5 s its most back-pressured subtask waited for output capacity">
                Backpressured
              </th>
              <th scope="col" class="num" title="Share of each second over the last 5 s its idlest subtask waited for input">
                Idle
              </th>
              <th scope="col" title="The least input watermark of its subtasks">
                Watermark
              </th>
            </tr>
          </thead>
          <tbody>
            {vertices.map((v) => (
              <tr key={v.id} data-vertex-id={v.id}>
                <th scope="row" class="name-cell">
                  {v.href !== undefined ? <a href={v.href}>{v.name}</a> : v.name}
                </th>
                <td>
                  <TaskStateBadge state={v.state} />
                </td>
                <td class="mix-cell">
                  <StateMix counts={v.counts} />
                </td>
                <td class="num">{v.parallelism}</td>
                <td class="num" title={describeRecordsIn(v)} data-testid="records-in">
                  {formatCount(v.recordsIn)}
                  {v.preAggregatedFrom !== undefined && <span class="muted small">{` (pre-aggregated from ${formatCount(v.preAggregatedFrom)})`}</span>}
                </td>
                <td class="num" title={formatExact(v.recordsOut)}>
                  {formatCount(v.recordsOut)}
                </td>
                <td class="num" data-testid="rate-in">
                  {formatRate(v.rateIn)}
                </td>
                <td class="num" data-testid="rate-out">
                  {formatRate(v.rateOut)}
                </td>
                <td class="num" data-testid="busy" title={msPerSecondTitle(v.busyTimeMsPerSecond)}>
                  {formatMsPerSecond(v.busyTimeMsPerSecond)}
                </td>
                <td class="num" data-testid="backpressured" title={msPerSecondTitle(v.backPressuredTimeMsPerSecond)}>
                  {formatMsPerSecond(v.backPressuredTimeMsPerSecond)}
                </td>
                <td class="num" data-testid="idle" title={msPerSecondTitle(v.idleTimeMsPerSecond)}>
                  {formatMsPerSecond(v.idleTimeMsPerSecond)}
                </td>
                <td data-testid="watermark">{formatWatermark(v.watermark)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
