// The Kinesis connector's JobMaster side: the SplitEnumerator of a `fromSource(KinesisStreamsSource…)`
// vertex, over KinesisShardSplitEnumerator. The shards are listed once when the job starts (a stream
// that does not exist fails the job then) and again every discovery interval through the JobMaster's
// callAsync; a split per shard, children handed out once their parents are reported finished. Restored
// from a checkpoint, the shards are what the restored readers account for: those they hold resume from
// their positions, those read to their end before the checkpoint stay done, and every other shard (also
// one handed out or finished after the checkpoint) is read again from its start, children after parents.
// Without a checkpoint, a restarted source vertex keeps the shards read to their end as finished and gets
// the others back at the positions they were handed out with (records read since are read again).
import type { KinesisStartingPosition } from './kinesis-shard-enumerator.js';
import { registerSplitEnumerator, type SourceOperatorSpec, type SplitEnumerator, type SplitEnumeratorContext } from '../jobmaster/split-enumerator.js';
import { NO_SPLIT_YET, type SourceSplit } from '../protocol/source-splits.js';
import { KINESIS_CONNECTOR, kinesisAwsConfig } from './kinesis-connector.js';

function initialPositionOf(raw: unknown): KinesisStartingPosition {
  if (raw === undefined || raw === 'LATEST') return { type: 'LATEST' };
  if (raw === 'TRIM_HORIZON') return { type: 'TRIM_HORIZON' };
  const at = (raw as { atTimestampMs?: unknown } | null)?.atTimestampMs;
  if (typeof at === 'number') return { type: 'AT_TIMESTAMP', timestampMs: at };
  throw new Error(`a Kinesis source starts at 'LATEST', 'TRIM_HORIZON' or { atTimestampMs }, found ${JSON.stringify(raw)}`);
}

export async function createKinesisSplitEnumerator(source: SourceOperatorSpec, context: SplitEnumeratorContext): Promise<SplitEnumerator> {
  if (source.kind !== 'source.connector') throw new Error(`the Kinesis split enumerator reads connector sources, found '${source.kind}'`);
  const { config } = source;
  const streamName = config['streamName'];
  if (typeof streamName !== 'string')
    throw new Error(`Kinesis source '${source.name}' names no stream; build it with KinesisStreamsSource.builder().setStreamName(name)`);
  const [{ createKinesisClient }, { KinesisShardSplitEnumerator, listKinesisShards, DEFAULT_SHARD_DISCOVERY_INTERVAL_MS }] = await Promise.all([
    import('./clients.js'),
    import('./kinesis-shard-enumerator.js'),
  ]);
  const client = createKinesisClient(kinesisAwsConfig(config, process.env));
  const shards = new KinesisShardSplitEnumerator({
    client,
    streamName,
    parallelism: context.parallelism,
    initialPosition: initialPositionOf(config['initialPosition']),
    // Discovery runs through callAsync below, on the JobMaster's main thread.
    discoveryIntervalMs: 0,
    clock: context.clock,
  });
  try {
    shards.addShards(await listKinesisShards(client, streamName));
  } catch (error) {
    client.destroy();
    throw error;
  }
  const interval = typeof config['shardDiscoveryIntervalMs'] === 'number' ? config['shardDiscoveryIntervalMs'] : DEFAULT_SHARD_DISCOVERY_INTERVAL_MS;
  context.callAsync(
    () => listKinesisShards(client, streamName),
    (result) => {
      if ('error' in result) {
        context.log.warn(`listing the shards of Kinesis stream ${streamName} failed; the next discovery tries again`, { error: String(result.error) });
        return;
      }
      if (shards.addShards(result.value)) context.signalSplitsAvailable();
    },
    interval,
  );
  const enumerator: SplitEnumerator = {
    // An unbounded source: a subtask without a ready shard waits for one (a child, a new shard).
    nextSplit: (subtaskIndex) => shards.nextSplit(subtaskIndex) ?? NO_SPLIT_YET,
    addSplitsBack: (splits: readonly SourceSplit[], subtaskIndex) => {
      shards.addSplitsBack(splits as Parameters<typeof shards.addSplitsBack>[0], subtaskIndex);
      context.signalSplitsAvailable();
    },
    restoreFromReaders: (held, finished) => {
      shards.restoreFromReaders(held, finished);
      context.signalSplitsAvailable();
    },
    splitsFinished: (splitIds) => {
      let readied = false;
      for (const id of splitIds) readied = shards.splitFinished(id) || readied;
      if (readied) context.signalSplitsAvailable();
    },
    progress: () => ({ handedOut: shards.snapshot().filter((s) => s.state === 'assigned' || s.state === 'finished').length }),
    close: () => {
      shards.close();
      client.destroy();
    },
  };
  return enumerator;
}

/** Registers the Kinesis connector's JobMaster side (called by the JobManager's entry point and the tests' setup). */
export function registerKinesisJobMasterConnector(): void {
  registerSplitEnumerator(KINESIS_CONNECTOR, createKinesisSplitEnumerator);
}
