// The task side of connector sources: a registered SourceReader reads every split it is handed at once,
// records (with their timestamps) reach the chain one at a time even while one waits on backpressure,
// finished splits are named in the next request, NO_SPLIT_YET means ask again, and a reader's failure
// fails the task while it waits for a split.
import { describe, expect, it } from 'vitest';
import type { JobId } from '../../runtime/core/ids.js';
import { NO_SPLIT_YET, type SourceSplit, type SplitAnswer } from '../../runtime/protocol/source-splits.js';
import type { TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { registerSourceReader, runConnectorSource, type ConnectorSourceSpec, type ReaderOutput } from '../../runtime/task/source-readers.js';
import type { TaskIo } from '../../runtime/task/task-io.js';

interface CountSplit extends SourceSplit {
  readonly count: number;
}

const op = (connector: string): ConnectorSourceSpec => ({ kind: 'source.connector', id: 'src', name: 'src', connector, config: {}, bounded: true });

function taskIo(answers: (finished: readonly string[]) => Promise<SplitAnswer>, signal = new AbortController().signal): TaskIo {
  const tdd = { jobId: 'j' as JobId, taskName: 'src (1/1)', subtaskIndex: 0, parallelism: 1 } as unknown as TaskDeploymentDescriptor;
  return { tdd, userFunctions: new Map(), signal, outputs: [], input: undefined, requestSplit: (finished = []) => answers(finished) };
}

/** A reader of count splits: emits `<split>-<i>` with timestamp i, yielding between records so that readers interleave. */
function registerCounter(name: string): void {
  registerSourceReader(name, () => ({
    async readSplit(split: SourceSplit, output: ReaderOutput) {
      for (let i = 0; i < (split as CountSplit).count; i++) {
        await new Promise((r) => setImmediate(r));
        const p = output.collect(`${split.splitId}-${i}`, i);
        if (p !== undefined) await p;
      }
    },
  }));
}

describe('runConnectorSource', () => {
  it('reads the splits it holds at once, one record into the chain at a time, and names finished splits in the next request', async () => {
    registerCounter('counter');
    const reported: string[] = [];
    const splits: SplitAnswer[] = [{ splitId: 'a', count: 5 } as CountSplit, NO_SPLIT_YET, { splitId: 'b', count: 5 } as CountSplit];
    const io = taskIo(async (finished) => {
      reported.push(...finished);
      if (splits.length > 0) return splits.shift()!;
      // As the JobMaster does after holding a request: none yet, until both splits are reported read.
      await new Promise((r) => setImmediate(r));
      return reported.length === 2 ? null : NO_SPLIT_YET;
    });
    const emitted: [unknown, number | undefined][] = [];
    let inChain = 0;
    let most = 0;
    const emit = (record: unknown, timestamp?: number): Promise<void> => {
      inChain++;
      most = Math.max(most, inChain);
      emitted.push([record, timestamp]);
      // Every record waits, as under backpressure: the other reader must not enter meanwhile.
      return new Promise<void>((r) => setImmediate(r)).then(() => {
        inChain--;
      });
    };
    await runConnectorSource(io, op('counter'), emit);
    expect(most).toBe(1);
    const records = emitted.map(([r]) => r as string);
    expect(records.filter((r) => r.startsWith('a-'))).toEqual(['a-0', 'a-1', 'a-2', 'a-3', 'a-4']);
    expect(records.filter((r) => r.startsWith('b-'))).toEqual(['b-0', 'b-1', 'b-2', 'b-3', 'b-4']);
    // Both splits were read at once: their records interleave.
    expect(records.findIndex((r) => r.startsWith('b-'))).toBeLessThan(records.lastIndexOf('a-4'));
    expect(emitted.find(([r]) => r === 'b-3')![1]).toBe(3);
    expect(reported.sort()).toEqual(['a', 'b']);
  });

  it('fails while it waits for a split when a reader fails', async () => {
    registerSourceReader('failing', () => ({
      readSplit: async () => {
        throw new Error('shard iterator refused');
      },
    }));
    let first = true;
    const io = taskIo(() => {
      if (first) {
        first = false;
        return Promise.resolve({ splitId: 's' });
      }
      return new Promise<SplitAnswer>(() => undefined);
    });
    await expect(runConnectorSource(io, op('failing'), () => undefined)).rejects.toThrow('shard iterator refused');
  });

  it('fails naming a connector no reader is registered for', async () => {
    await expect(
      runConnectorSource(
        taskIo(async () => null),
        op('nowhere'),
        () => undefined,
      ),
    ).rejects.toThrow(/connector 'nowhere', but no source reader is registered for it/);
  });
});
