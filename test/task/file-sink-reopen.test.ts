// A checkpointing job's file sink opens its target again for each part after the first (with the job's
// renewed credentials). Its earlier parts may still be pending, and a listing need not show them: S3 lists
// a pending part only as a multipart upload, which not every S3 endpoint lists. The part numbers go on after
// the ones the attempt opened, so two pending parts never share a name and both commit.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { registerFileSystem } from '../../runtime/blob/file-systems.js';
import type { OutputStore } from '../../runtime/blob/output-store.js';
import type { OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import { openFsRollingParts } from '../../runtime/local/fs-rolling-parts.js';
import { nodeOutputFs } from '../../runtime/local/output-fs.js';
import { openSink } from '../../runtime/task/sinks.js';
import { MemoryCheckpointStreams } from '../support/checkpoint-streams.js';
import { taskDeployment } from '../support/task-deployment.js';

const root = mkdtempSync(join(tmpdir(), 'floe-sink-reopen-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// Local part files under a listing that leaves out the hidden (pending) ones, as such an S3 endpoint does.
let opened = 0;
registerFileSystem({
  scheme: 'unlisted',
  inputStore: () => Promise.reject(new Error('no input here')),
  outputStore: async () =>
    ({
      openRollingParts: (target: string, subtaskIndex: number, attemptId: string, firstNumber?: number) => {
        opened++;
        const listing = { ...nodeOutputFs, readdir: async (p: string) => (await nodeOutputFs.readdir(p)).filter((n) => !n.startsWith('.')) };
        return openFsRollingParts(target.slice('unlisted://'.length), subtaskIndex, attemptId, listing, firstNumber);
      },
    }) as unknown as OutputStore,
  attemptStagingLocation: () => '',
});

describe('the file sink of a checkpointing job, its target opened again for each part', () => {
  it('numbers a part after the pending ones its attempt opened, though the listing does not show them', async () => {
    const target = join(root, 'out');
    const sinkSpec: OperatorSpec = {
      kind: 'sink.textFile',
      id: 'f',
      name: 'files',
      path: `unlisted://${target}`,
      rolling: { rolloverIntervalMs: 60_000, inactivityIntervalMs: 60_000, maxPartSizeBytes: 1 << 20, checkIntervalMs: 60_000 },
    };
    const tdd = taskDeployment([sinkSpec], {
      checkpointing: { storageUri: `file://${root}/checkpoints`, options: { type: 'checkpoint', mode: 'EXACTLY_ONCE', alignedCheckpointTimeoutMs: -1 } },
    });
    const sink = (await openSink(tdd, sinkSpec, 10_000))!;
    const hooks = sink.checkpointed!;
    const streams = new MemoryCheckpointStreams();
    await hooks.initializeState?.(undefined, streams);
    const lines = (prefix: string) => Array.from({ length: 20_000 }, (_, i) => `${prefix}-${i}`);
    for (const line of lines('a')) await sink.emit(line);
    await hooks.snapshotState!(1, streams);
    // Checkpoint 1 has not completed: its part is pending while the next one opens.
    for (const line of lines('b')) await sink.emit(line);
    await hooks.snapshotState!(2, streams);
    await hooks.notifyCheckpointComplete!(2);
    await sink.close();
    expect(opened, 'the target was opened again for the second part').toBeGreaterThan(1);
    const parts = readdirSync(target).sort();
    expect(parts).toEqual(['part-0-0', 'part-0-1']);
    const written = parts.flatMap((p) => readFileSync(join(target, p), 'utf8').split('\n').slice(0, -1));
    expect(written).toEqual([...lines('a'), ...lines('b')]);
  });
});
