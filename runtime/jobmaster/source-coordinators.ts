// The JobMaster's side of sources (Flink's SourceCoordinator): one SplitEnumerator per source vertex,
// made through the registry by source kind; it answers split requests, remembers which attempt holds
// which unfinished split, holds a request of an unbounded source that has no split yet, and restarts a
// source whose vertex restarts — restored from a checkpoint, without the splits the restored readers hold
// or had finished.
import type { Clock, Timer } from '../core/clock.js';
import type { ExecutionAttemptId } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { NO_SPLIT_YET, type SourceSplit, type SplitAnswer } from '../protocol/source-splits.js';
import type { MainThread } from '../rpc/main-thread.js';
import './file-source-enumerators.js';
import { splitEnumeratorFactory, type SourceOperatorSpec, type SplitEnumerator, type SplitEnumeratorContext } from './split-enumerator.js';
import type { RestoredSplits } from './source-restore.js';

/** The registry kind of a source operator: a connector's name, else its operator kind. */
export const sourceKindOf = (op: SourceOperatorSpec): string => (op.kind === 'source.connector' ? op.connector : op.kind);

interface Coordinated {
  enumerator: SplitEnumerator;
  /** Splits handed to each attempt and not reported finished, by split id. */
  readonly held: Map<ExecutionAttemptId, { readonly subtaskIndex: number; readonly splits: Map<string, SourceSplit>; readonly finished: Set<string> }>;
  /** Requests held until splits appear. */
  readonly waiters: Set<() => void>;
  readonly timers: Set<Timer>;
  closed: boolean;
  /** Restores whose readers' state is being read: no split is handed out meanwhile. */
  restoring: number;
}

export interface SourceCoordinatorsDeps {
  readonly clock: Clock;
  readonly main: MainThread;
  readonly log: Logger;
  readonly fileOpenTimeoutMs: number;
  failJob(error: unknown): void;
  /** What a restore of the source vertex's readers accounts for now; undefined: no checkpoint to restore. */
  readonly restoredSplits?: (vertexId: string) => Promise<RestoredSplits> | undefined;
}

export class SourceCoordinators {
  private readonly sources = new Map<string, Coordinated>();

  constructor(private readonly deps: SourceCoordinatorsDeps) {}

  /** Makes the enumerator of each source vertex whose kind has one (listing its files, describing its stream). */
  async start(jobGraph: JobGraph): Promise<void> {
    for (const vertex of jobGraph.vertices) {
      const source = vertex.operators[0];
      if (source === undefined || !source.kind.startsWith('source.')) continue;
      const op = source as SourceOperatorSpec;
      const factory = splitEnumeratorFactory(sourceKindOf(op));
      if (factory === undefined) {
        if (op.kind === 'source.connector') {
          throw new Error(
            `source '${op.name}' reads connector '${op.connector}', but this JobManager has no split enumerator registered for it; run the job on a backend that offers '${op.connector}'`,
          );
        }
        continue;
      }
      const coordinated: Coordinated = {
        enumerator: undefined as unknown as SplitEnumerator,
        held: new Map(),
        waiters: new Set(),
        timers: new Set(),
        closed: false,
        restoring: 0,
      };
      coordinated.enumerator = await factory(op, this.contextFor(vertex.id, vertex.parallelism, coordinated));
      this.sources.set(vertex.id, coordinated);
    }
  }

  has(vertexId: string): boolean {
    return this.sources.has(vertexId);
  }

  /** Main thread. The next split for an attempt; `finished` are splits it read to their end since it last asked. */
  nextSplit(vertexId: string, subtaskIndex: number, attemptId: ExecutionAttemptId, finished: readonly string[]): SplitAnswer {
    const source = this.sources.get(vertexId);
    if (source === undefined) return null;
    let held = source.held.get(attemptId);
    if (held === undefined) {
      held = { subtaskIndex, splits: new Map(), finished: new Set() };
      source.held.set(attemptId, held);
    }
    // Every split the attempt reports read to its end (restored ones too) goes into a checkpoint once it FINISHED.
    for (const id of finished) held.finished.add(id);
    // All of them go to the enumerator: those it handed this attempt, and those a restored reader resumed
    // (a Kinesis parent shard read to its end there readies its children).
    for (const id of finished) held.splits.delete(id);
    if (finished.length > 0) source.enumerator.splitsFinished?.(finished, subtaskIndex);
    if (source.restoring > 0) return NO_SPLIT_YET;
    const answer = source.enumerator.nextSplit(subtaskIndex);
    if (answer !== null && answer !== NO_SPLIT_YET) held.splits.set(answer.splitId, answer);
    return answer;
  }

  /** Resolves when the source signals new splits, or after `maxMs`: the caller asks again either way. */
  waitForSplits(vertexId: string, maxMs: number): Promise<void> {
    const source = this.sources.get(vertexId);
    if (source === undefined || source.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        timer.cancel();
        source.waiters.delete(wake);
        resolve();
      };
      const timer = this.deps.clock.setTimeout(wake, maxMs);
      source.waiters.add(wake);
    });
  }

  /**
   * Main thread. The source vertex restarts with new attempts in place of `attempts`: an enumerator that
   * can reset starts over (no checkpoint to resume from); one that cannot gets back the splits those
   * attempts held unfinished.
   */
  restart(vertexId: string, attempts: readonly ExecutionAttemptId[]): void {
    const source = this.sources.get(vertexId);
    if (source === undefined) return;
    const restored = this.deps.restoredSplits?.(vertexId);
    if (restored !== undefined) {
      this.restoreFrom(source, restored, attempts);
      return;
    }
    if (source.enumerator.reset !== undefined) {
      source.held.clear();
      source.enumerator.reset();
      return;
    }
    for (const attemptId of attempts) {
      const held = source.held.get(attemptId);
      source.held.delete(attemptId);
      if (held !== undefined && held.splits.size > 0) source.enumerator.addSplitsBack([...held.splits.values()], held.subtaskIndex);
    }
  }

  /** The splits an attempt reported read to their end (a FINISHED source subtask's, for the checkpoint metadata). */
  finishedSplitsOf(attemptId: ExecutionAttemptId): readonly string[] | undefined {
    for (const source of this.sources.values()) {
      const held = source.held.get(attemptId);
      if (held !== undefined) return [...held.finished];
    }
    return undefined;
  }

  /** Main thread. A JobMaster that starts from a checkpoint: each enumerator accounts for what the restored readers hold or finished. */
  restoreAll(): void {
    for (const [vertexId, source] of this.sources) {
      const restored = this.deps.restoredSplits?.(vertexId);
      if (restored !== undefined) this.restoreFrom(source, restored, []);
    }
  }

  /**
   * The source's readers restore from a checkpoint: once their state is read, an enumerator that can reset
   * starts over without the splits they hold or finished; one that cannot gets back the splits `attempts`
   * held that no restored reader holds. No split is handed out before.
   */
  private restoreFrom(source: Coordinated, restored: Promise<RestoredSplits>, attempts: readonly ExecutionAttemptId[]): void {
    const given: SourceSplit[] = [];
    const givenTo = new Map<string, number>();
    for (const attemptId of attempts) {
      const held = source.held.get(attemptId);
      source.held.delete(attemptId);
      for (const split of held?.splits.values() ?? []) {
        given.push(split);
        givenTo.set(split.splitId, held!.subtaskIndex);
      }
    }
    if (source.enumerator.reset !== undefined || source.enumerator.restoreFromReaders !== undefined) source.held.clear();
    source.restoring++;
    restored.then(
      (splits) =>
        void this.deps.main.run(() => {
          source.restoring--;
          if (source.closed) return;
          if (source.enumerator.restoreFromReaders !== undefined) {
            source.enumerator.restoreFromReaders(splits.held, splits.finished);
          } else if (source.enumerator.reset !== undefined) {
            source.enumerator.reset(new Set([...splits.held, ...splits.finished]));
          } else {
            for (const split of given) {
              if (!splits.held.has(split.splitId) && !splits.finished.has(split.splitId)) source.enumerator.addSplitsBack([split], givenTo.get(split.splitId)!);
            }
          }
          for (const wake of [...source.waiters]) wake();
        }),
      (error: unknown) => {
        source.restoring--;
        this.deps.failJob(error);
      },
    );
  }

  progress(vertexId: string): { readonly handedOut: number; readonly total?: number } | undefined {
    return this.sources.get(vertexId)?.enumerator.progress?.();
  }

  /** Stops every enumerator's periodic work and wakes held requests. */
  close(): void {
    for (const source of this.sources.values()) {
      if (source.closed) continue;
      source.closed = true;
      for (const t of source.timers) t.cancel();
      for (const wake of [...source.waiters]) wake();
      try {
        source.enumerator.close();
      } catch (error) {
        this.deps.log.warn('closing a split enumerator failed', { error: String(error) });
      }
    }
  }

  private contextFor(vertexId: string, parallelism: number, source: Coordinated): SplitEnumeratorContext {
    const { clock, main } = this.deps;
    const log = this.deps.log.child({ sourceVertex: vertexId });
    return {
      vertexId,
      parallelism,
      clock,
      log,
      fileOpenTimeoutMs: this.deps.fileOpenTimeoutMs,
      signalSplitsAvailable: () => {
        for (const wake of [...source.waiters]) wake();
      },
      callAsync: (callable, handler, periodMs) => {
        const run = async (): Promise<void> => {
          let result: Parameters<typeof handler>[0];
          try {
            result = { value: await callable() };
          } catch (error) {
            result = { error };
          }
          if (source.closed) return;
          await main
            .run(() => handler(result))
            .catch((error: unknown) => {
              if (!source.closed) this.deps.failJob(error);
            });
          if (!source.closed) schedule(periodMs);
        };
        const schedule = (delayMs: number): void => {
          const timer = clock.setTimeout(() => {
            source.timers.delete(timer);
            void run();
          }, delayMs);
          source.timers.add(timer);
        };
        schedule(0);
      },
      failJob: (error) => this.deps.failJob(error),
    };
  }
}
