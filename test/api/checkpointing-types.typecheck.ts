// Type tests of the checkpointing API: a mode, retention or concurrency Flink does not have fails tsc.
import { CheckpointingMode, defineJob, ExternalizedCheckpointRetention } from '../../runtime/api/index.js';

export const settings = defineJob('t', (env) => {
  env.enableCheckpointing(1_000, CheckpointingMode.AT_LEAST_ONCE);
  // @ts-expect-error a mode is CheckpointingMode.EXACTLY_ONCE or AT_LEAST_ONCE
  env.enableCheckpointing(1_000, 'EXACTLY');
  const config = env.getCheckpointConfig();
  config.setMaxConcurrentCheckpoints(1);
  // @ts-expect-error at most one checkpoint is in flight
  config.setMaxConcurrentCheckpoints(2);
  config.setExternalizedCheckpointRetention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
  // @ts-expect-error retention is RETAIN_ON_CANCELLATION or DELETE_ON_CANCELLATION
  config.setExternalizedCheckpointRetention('KEEP');
  // @ts-expect-error an interval is a number of ms
  config.setCheckpointInterval('1s');
  const stream = env.fromSequence(1, 10).uid('numbers');
  // @ts-expect-error a uid is a string
  stream.map((n) => n).uid(7);
  stream.collect().uid('result');
});
