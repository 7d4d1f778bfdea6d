// A thin bar split by how many tasks are in each state.
import { TASK_STATES } from '../api-types';
import { describeCounts, taskTone, type StateCounts } from '../states';

export function StateMix({ counts }: { counts: StateCounts }) {
  const total = TASK_STATES.reduce((sum, s) => sum + counts[s], 0);
  const label = describeCounts(counts);
  return (
    <span class="mix" role="img" aria-label={label} title={label}>
      {total > 0 &&
        TASK_STATES.filter((s) => counts[s] > 0).map((s) => <span key={s} class={`mix-part fill-${taskTone(s)}`} style={{ flexGrow: counts[s] }} />)}
    </span>
  );
}

/** The task-state colours of the graph and bars. */
export function StateLegend() {
  const tones = [
    ['pending', 'Created / scheduled / deploying'],
    ['running', 'Running'],
    ['finished', 'Finished'],
    ['failed', 'Failed'],
    ['canceled', 'Canceled'],
  ] as const;
  return (
    <ul class="legend" aria-label="State colours">
      {tones.map(([tone, label]) => (
        <li key={tone}>
          <span class={`legend-swatch fill-${tone}`} aria-hidden="true" />
          {label}
        </li>
      ))}
    </ul>
  );
}
