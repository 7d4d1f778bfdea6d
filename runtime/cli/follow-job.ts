// Following a submitted job to its end: long-polls of its status, a progress line on stderr, Dispatcher
// hiccups retried for a while, and Ctrl-C answered by cancelling the job or detaching from it.
import { ConflictError, FloeError, InvalidRequestError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import type { JobDetails } from '../protocol/rest-api.js';
import type { CliIo } from './command-context.js';
import { formatProgress, ProgressPrinter, type ProgressShape } from './format.js';
import { askCancelOrDetach, noPrompt, type InterruptChoice } from './interrupt.js';
import type { RestClient } from './rest-client.js';

export type FollowResult =
  | { readonly detached: false; readonly details: JobDetails; /** A Ctrl-C had the job cancelled. */ readonly interrupted: boolean }
  | { readonly detached: true; /** Why it detached, for the message. */ readonly why: string };

/**
 * Follows the job until it ends with long-polls (answered as soon as it ends), drawing progress on stderr. A Dispatcher hiccup is retried for a while.
 * With `io.interrupts`, a Ctrl-C asks (io.prompt) whether to cancel the job (then it is followed until it
 * ends) or to detach (the job keeps running); see interrupt.ts for who answers when nobody can.
 */
export async function followJob(
  client: RestClient,
  jobId: JobId | string,
  io: CliIo,
  options: { readonly jobLabel?: string; readonly retryForMs?: number; /** Where records are counted in and out. */ readonly shape?: ProgressShape } = {},
): Promise<FollowResult> {
  const retryForMs = options.retryForMs ?? 15_000;
  const jobLabel = options.jobLabel ?? `job ${jobId}`;
  const printer = new ProgressPrinter(io.stderr);
  const started = Date.now();
  let failingSince: number | undefined;

  let interrupts = 0;
  let question: AbortController | undefined;
  let decided: { choice: InterruptChoice; why: string } | undefined;
  let cancelSent = false;
  let stopWaiting = false;
  // Something for the loop to act on (Ctrl-C, an answer): ends the wait in progress, or the next one.
  let nudged = false;
  let waiting: AbortController | undefined;
  const nudge = (): void => {
    nudged = true;
    waiting?.abort();
  };
  const unsubscribe = io.interrupts?.subscribe(() => {
    interrupts++;
    if (interrupts === 1) {
      printer.finish();
      question = new AbortController();
      void askCancelOrDetach(io.prompt ?? noPrompt, jobLabel, question.signal).then((d) => {
        decided ??= d;
        nudge();
      });
    } else if (decided === undefined) {
      // A second Ctrl-C while the question is open: the safe answer, detach.
      decided = { choice: 'detach', why: 'Ctrl-C again' };
      question?.abort();
    } else if (decided.choice === 'cancel') {
      stopWaiting = true;
    }
    nudge();
  });
  const pollMs = io.pollIntervalMs ?? 1_000;
  // The first read answers at once (the progress line); later ones are long-polls: the Dispatcher answers
  // as soon as the job ends, or after pollMs to refresh the progress. An older Dispatcher, which refuses
  // ?wait, is polled every pollMs instead.
  let longPoll = false;
  let canLongPoll = true;
  try {
    for (;;) {
      nudged = false;
      if (decided?.choice === 'detach') return { detached: true, why: decided.why };
      if (decided?.choice === 'cancel' && !cancelSent) {
        cancelSent = true;
        io.stderr.write(`cancelling ${jobLabel}…\n`);
        try {
          await client.cancelJob(jobId);
        } catch (e) {
          // It ended meanwhile: the next poll shows how.
          if (!(e instanceof ConflictError)) throw e;
        }
      }
      if (stopWaiting) {
        return { detached: true, why: `Ctrl-C again while the job was being cancelled (the cancellation goes on)` };
      }
      let details: JobDetails | undefined;
      let failed = false;
      const askedAt = Date.now();
      const held = longPoll && !nudged;
      try {
        if (held) {
          waiting = new AbortController();
          try {
            details = await client.getJob(jobId, { waitMs: pollMs, signal: waiting.signal });
          } catch (e) {
            if (waiting.signal.aborted) {
              details = undefined; // nudged: act on it, then read again
            } else if (e instanceof InvalidRequestError && /'wait'/.test(e.message)) {
              canLongPoll = false;
              details = await client.getJob(jobId);
            } else {
              throw e;
            }
          } finally {
            waiting = undefined;
          }
        } else {
          details = await client.getJob(jobId);
        }
        failingSince = undefined;
      } catch (e) {
        if (!(e instanceof FloeError && e.retryable)) throw e;
        failed = true;
        failingSince ??= Date.now();
        if (Date.now() - failingSince > retryForMs) throw e;
      }
      if (details !== undefined) {
        const asking = question !== undefined && decided === undefined;
        if (!asking) printer.update(formatProgress(details, Date.now() - started, options.shape));
        if (isGloballyTerminal(details.status)) {
          question?.abort();
          return { detached: false, details, interrupted: decided !== undefined };
        }
      }
      // A long-poll that came back early without the end was not held (a server that ignores ?wait):
      // the rest of the interval is slept, so a job is never asked about more than once per pollMs.
      const pauseMs = failed || !canLongPoll ? pollMs : held ? pollMs - (Date.now() - askedAt) : 0;
      longPoll = canLongPoll;
      if (nudged || pauseMs <= 0) continue;
      await new Promise<void>((r) => {
        waiting = new AbortController();
        const timer = setTimeout(r, pauseMs);
        waiting.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          r();
        });
      });
      waiting = undefined;
    }
  } finally {
    unsubscribe?.();
    question?.abort();
    printer.finish();
  }
}
