// A job's checkpoint statistics as the JobMaster keeps them; the types live beside the job record that carries them.
export type { CheckpointStats, CheckpointStatsEntry, CheckpointStatus, CheckpointStatsSummary, StatsSummary } from '../ha/checkpoint-stats.js';
