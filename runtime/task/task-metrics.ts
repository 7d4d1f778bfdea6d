// A task's data-plane counters for its TaskResult, read from its output partitions and input gate.
import type { InputGate } from '../network/input-gate.js';
import type { ResultPartition } from '../network/result-partition.js';
import type { TaskNetworkMetrics } from '../protocol/task-deployment.js';

export function collectNetworkMetrics(
  outputs: readonly Pick<ResultPartition, 'stats'>[],
  input: Pick<InputGate, 'stats'> | undefined,
  creditsPerChannel: number,
  startedAtMs: number,
  finishedAtMs: number,
): TaskNetworkMetrics {
  let buffersSent = 0;
  let recordsWritten = 0;
  let maxBuffersInFlight = 0;
  let maxBacklog = 0;
  for (const o of outputs) {
    for (const s of o.stats()) {
      buffersSent += s.buffersSent;
      recordsWritten += s.recordsWritten;
      maxBuffersInFlight = Math.max(maxBuffersInFlight, s.maxBuffersInFlight);
      maxBacklog = Math.max(maxBacklog, s.maxBacklog);
    }
  }
  let buffersReceived = 0;
  let recordsReceived = 0;
  let maxUnackedIn = 0;
  for (const c of input?.stats() ?? []) {
    buffersReceived += c.buffersReceived;
    recordsReceived += c.recordsReceived;
    maxUnackedIn = Math.max(maxUnackedIn, c.maxUnacked);
  }
  return {
    buffersSent,
    recordsWritten,
    maxBuffersInFlight,
    maxBacklog,
    buffersReceived,
    recordsReceived,
    maxUnackedIn,
    creditsPerChannel,
    startedAtMs,
    finishedAtMs,
  };
}
