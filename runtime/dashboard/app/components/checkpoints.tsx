// A checkpointing job's checkpoints (GET /jobs/:id/checkpoints): how many completed, are in progress,
// failed and were restored; the latest completed one with its size and duration; the latest failure; and
// the recent history, newest first.
import type { CheckpointingStatistics, CheckpointStatistics } from '../api-types';
import { formatBytes, formatDuration, formatExact, formatFullTimestamp, formatTimestamp } from '../format';
import type { Polled } from '../poll';
import { LoadFailed, Loading } from './page';

const STATUS_TONE: Record<CheckpointStatistics['status'], string> = { COMPLETED: 'tone-finished', IN_PROGRESS: 'tone-running', FAILED: 'tone-failed' };
const STATUS_LABEL: Record<CheckpointStatistics['status'], string> = { COMPLETED: 'completed', IN_PROGRESS: 'in progress', FAILED: 'failed' };

export function Checkpoints({ polled, intervalMs }: { polled: Polled<CheckpointingStatistics>; intervalMs: number }) {
  return (
    <section class="card" data-testid="checkpoints" aria-labelledby="checkpoints-title">
      <div class="card-header">
        <h2 id="checkpoints-title">Checkpoints</h2>
        <span class="muted small">{`every ${formatDuration(intervalMs)}`}</span>
      </div>
      {polled.state === 'ok' ? (
        <CheckpointsBody stats={polled.data} />
      ) : polled.state === 'error' ? (
        <LoadFailed what="the checkpoints" message={polled.message} />
      ) : polled.state === 'not-found' ? (
        <p class="empty">No checkpoint statistics yet.</p>
      ) : (
        <Loading what="the checkpoints" />
      )}
    </section>
  );
}

function CheckpointsBody({ stats }: { stats: CheckpointingStatistics }) {
  const now = Date.now();
  const { counts, latest } = stats;
  const completed = latest.completed;
  return (
    <>
      <dl class="facts" data-testid="checkpoint-counts">
        <Fact label="Completed" value={formatExact(counts.completed)} testId="checkpoints-completed" />
        <Fact label="In progress" value={formatExact(counts.in_progress)} testId="checkpoints-in-progress" />
        <Fact label="Failed" value={formatExact(counts.failed)} testId="checkpoints-failed" />
        <Fact label="Restored" value={formatExact(counts.restored)} testId="checkpoints-restored" />
        {completed !== null && (
          <>
            <Fact
              label="Latest completed"
              value={`#${completed.id}, ${formatTimestamp(completed.trigger_timestamp + completed.end_to_end_duration, now)}`}
              testId="latest-completed"
            />
            <Fact label="Its state size" value={formatBytes(completed.state_size)} testId="latest-completed-size" />
            <Fact label="Its duration" value={formatDuration(completed.end_to_end_duration)} testId="latest-completed-duration" />
          </>
        )}
        {latest.restored !== null && (
          <Fact label="Restored from" value={`#${latest.restored.id}, ${formatTimestamp(latest.restored.restore_timestamp, now)}`} testId="latest-restored" />
        )}
      </dl>
      {latest.failed !== null && (
        <p class="callout callout-error" data-testid="latest-failed">{`Checkpoint #${latest.failed.id} failed: ${latest.failed.failure_message ?? ''}`}</p>
      )}
      {stats.history.length === 0 ? (
        <p class="empty">No checkpoint has been triggered yet.</p>
      ) : (
        <div class="table-wrap">
          <table class="table" data-testid="checkpoint-history">
            <caption class="visually-hidden">Recent checkpoints, newest first</caption>
            <thead>
              <tr>
                <th scope="col" class="num">
                  ID
                </th>
                <th scope="col">Status</th>
                <th scope="col">Triggered</th>
                <th scope="col" class="num">
                  Duration
                </th>
                <th scope="col" class="num" title="Bytes of state the checkpoint refers to">
                  State size
                </th>
                <th scope="col" class="num" title="Bytes written for it: only what changed, for incremental snapshots">
                  Written
                </th>
                <th scope="col" class="num" title="The longest barrier alignment of any subtask">
                  Alignment
                </th>
                <th scope="col" class="num">
                  Acknowledged
                </th>
              </tr>
            </thead>
            <tbody>
              {stats.history.map((c) => (
                <tr key={c.id} data-checkpoint-id={c.id}>
                  <td class="num">{c.id}</td>
                  <td>
                    <span class={`badge ${STATUS_TONE[c.status]}`} title={c.failure_message}>
                      {c.checkpoint_type === 'CHECKPOINT'
                        ? STATUS_LABEL[c.status]
                        : `${STATUS_LABEL[c.status]} (${c.checkpoint_type === 'SAVEPOINT' ? 'savepoint' : 'unaligned'})`}
                    </span>
                  </td>
                  <td title={formatFullTimestamp(c.trigger_timestamp)}>{formatTimestamp(c.trigger_timestamp, now)}</td>
                  <td class="num" data-testid="checkpoint-duration">
                    {formatDuration(c.end_to_end_duration)}
                  </td>
                  <td class="num" data-testid="checkpoint-size" title={`${formatExact(c.state_size)} bytes`}>
                    {formatBytes(c.state_size)}
                  </td>
                  <td class="num">{formatBytes(c.checkpointed_size)}</td>
                  <td class="num">{formatDuration(c.alignment_duration)}</td>
                  <td class="num">{`${c.num_acknowledged_subtasks}/${c.num_subtasks}`}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

function Fact({ label, value, testId }: { label: string; value: string; testId: string }) {
  return (
    <div>
      <dt>{label}</dt>
      <dd data-testid={testId}>{value}</dd>
    </div>
  );
}
