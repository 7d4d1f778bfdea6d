// The options of checkpoints and state backends (Flink's `execution.checkpointing.*`, `state.checkpoints.*`,
// `state.backend.*` and `s3.entropy.*`), part of CONFIG_OPTIONS (config.ts). A job's own settings
// (env.enableCheckpointing, env.getCheckpointConfig()) win over the first group.
export const CHECKPOINT_OPTIONS = {
  checkpointingIntervalMs: {
    key: 'execution.checkpointing.interval',
    default: 0,
    min: 0,
    description:
      "How often a job checkpoints (ms): its state and its sources' positions are snapshotted consistently and restored after a failure. 0: jobs checkpoint only when they call env.enableCheckpointing(ms). Otherwise at least 10.",
  },
  checkpointingMode: {
    key: 'execution.checkpointing.mode',
    default: 'EXACTLY_ONCE',
    values: ['EXACTLY_ONCE', 'AT_LEAST_ONCE'],
    description:
      'EXACTLY_ONCE: a task with several inputs reads none past a checkpoint barrier until the barrier arrived on all (aligned), so a restore repeats nothing. AT_LEAST_ONCE: barriers do not hold records back; a restore may replay some records twice.',
  },
  checkpointTimeoutMs: {
    key: 'execution.checkpointing.timeout',
    default: 600_000,
    min: 1,
    description: 'A checkpoint not complete this long after it started is aborted and counts as failed (ms).',
  },
  checkpointMinPauseMs: {
    key: 'execution.checkpointing.min-pause',
    default: 0,
    min: 0,
    description: 'The least time from the end of one checkpoint to the start of the next (ms), so a job that checkpoints slowly still makes progress.',
  },
  tolerableFailedCheckpoints: {
    key: 'execution.checkpointing.tolerable-failed-checkpoints',
    default: 0,
    min: 0,
    description:
      'Checkpoints that may fail in a row (declined, timed out, not written) before the job fails and restarts from its latest completed checkpoint.',
  },
  alignedCheckpointTimeoutMs: {
    key: 'execution.checkpointing.aligned-checkpoint-timeout',
    default: 0,
    min: 0,
    description:
      "With 'execution.checkpointing.unaligned.enabled': how long a task's barrier waits for the barriers of its other inputs before the checkpoint turns unaligned, saving the records in flight with the snapshot (ms); 0: unaligned from the start.",
  },
  unalignedCheckpoints: {
    key: 'execution.checkpointing.unaligned.enabled',
    default: 'false',
    values: ['false', 'true'],
    description:
      'Whether checkpoint barriers may overtake the records in flight (saved with the snapshot), so checkpoints complete while the job is backpressured. EXACTLY_ONCE only.',
  },
  externalizedCheckpointRetention: {
    key: 'execution.checkpointing.externalized-checkpoint-retention',
    default: 'DELETE_ON_CANCELLATION',
    values: ['DELETE_ON_CANCELLATION', 'RETAIN_ON_CANCELLATION'],
    description:
      "What happens to a job's retained checkpoints when it is cancelled: deleted, or kept to resume from (`floe run --from-savepoint <path>`; the JobManager logs their paths). A job that finishes or fails for good leaves none behind; either way no file that no kept checkpoint references stays.",
  },
  checkpointsDir: {
    key: 'state.checkpoints.dir',
    default: '',
    description:
      'Where checkpoints are written: a local absolute path (or file:// URI) on a disk every TaskExecutor and JobManager reaches, or s3://bucket/prefix. Each job writes <dir>/<job id>/chk-<n>/ and <dir>/<job id>/shared/. Unset: the folder checkpoints/ in the state dir of the embedded cluster; on AWS s3://<the cluster bucket>/<blob prefix>checkpoints (elsewhere, the job-data role needs s3:PutObject there).',
  },
  savepointsDir: {
    key: 'state.savepoints.dir',
    default: '',
    description:
      'The default target directory of savepoints (`floe savepoint`, `floe stop --savepoint`, POST /jobs/:id/savepoints and /stop without one): a local absolute path (or file:// URI) every TaskExecutor and JobManager reaches, or s3://bucket/prefix. Each savepoint is a folder savepoint-<job id 6>-<random>/ in it, with its _metadata; the job never deletes it. Unset: a savepoint request must name its directory.',
  },
  checkpointsNumRetained: {
    key: 'state.checkpoints.num-retained',
    default: 1,
    min: 1,
    description: 'Completed checkpoints kept per job, the latest ones; older ones are deleted with the shared files only they referenced.',
  },
  stateBackend: {
    key: 'state.backend.type',
    default: 'hashmap',
    values: ['hashmap', 'lmdb'],
    description:
      "Where keyed state lives while a job runs. hashmap: on the slot's heap, snapshotted whole. lmdb: in an embedded database on the TaskExecutor's disk (one environment per slot), for state larger than memory.",
  },
  stateBackendIncremental: {
    key: 'state.backend.incremental',
    default: 'false',
    values: ['false', 'true'],
    description: "Whether a checkpoint uploads only the state that changed since the last one (lmdb), sharing earlier checkpoints' files.",
  },
  stateBackendIncrementalFullEvery: {
    key: 'state.backend.incremental.full-every',
    default: 10,
    min: 1,
    description:
      'With state.backend.incremental (lmdb): every how many checkpoints a subtask starts a full materialization of its key groups, written in the background while checkpoints go on writing changelog deltas (the entries changed since the snapshot before; a checkpoint in which half the entries or more changed writes them all); a restore reads the latest materialization and the deltas after it.',
  },
  s3EntropyKey: {
    key: 's3.entropy.key',
    default: '',
    description:
      "A marker in an s3:// 'state.checkpoints.dir' (e.g. s3://bucket/checkpoints/_entropy_ with '_entropy_'): in the keys of state files it is replaced by random characters, spreading them over S3's partitions; in a checkpoint's metadata key it is removed. Put it after a prefix that holds checkpoints only: at a job's end what lies under that prefix is listed to find the job's files. Unset: no entropy.",
  },
  s3EntropyLength: {
    key: 's3.entropy.length',
    default: 4,
    min: 1,
    max: 32,
    description: "How many random characters replace 's3.entropy.key' in the keys of state files.",
  },
} as const;
