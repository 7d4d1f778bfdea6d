// Ctrl-C while `floe run` follows a job: it asks whether to cancel the job or to detach and leave it
// running. Detaching is what happens whenever nobody answers (no terminal, a second Ctrl-C, end of
// input): it loses nothing, while cancelling discards the job's uncommitted output.
export type InterruptChoice = 'cancel' | 'detach';

/** Ctrl-C (SIGINT) as the CLI sees it; injectable, so tests need neither signals nor a terminal. */
export interface Interrupts {
  /** Calls `handler` on every Ctrl-C until the returned function is called; meanwhile Ctrl-C does not end the process. */
  subscribe(handler: () => void): () => void;
}

/** What Prompt.ask resolves to when Ctrl-C is pressed at the question. */
export const INTERRUPTED: unique symbol = Symbol('interrupted');

/** A question to the person at the terminal. */
export interface Prompt {
  /** False when there is no terminal to ask on (stdin or stderr is not a TTY). */
  readonly interactive: boolean;
  /**
   * Shows `question`; resolves to the line typed, INTERRUPTED on a Ctrl-C at the question, or undefined
   * when the input ends or `signal` aborts it.
   */
  ask(question: string, signal: AbortSignal): Promise<string | typeof INTERRUPTED | undefined>;
}

export const processInterrupts: Interrupts = {
  subscribe(handler) {
    process.on('SIGINT', handler);
    return () => {
      process.off('SIGINT', handler);
    };
  },
};

export const noPrompt: Prompt = { interactive: false, ask: async () => undefined };

/**
 * Asks on a terminal with readline. A Ctrl-C at the prompt (readline reads it as a key) answers nothing.
 * readline is loaded at the first question: most runs ask none, and the CLI's start-up is on every run.
 */
export function terminalPrompt(input: NodeJS.ReadStream, output: NodeJS.WriteStream): Prompt {
  return {
    interactive: input.isTTY === true && output.isTTY === true,
    async ask(question, signal) {
      const { createInterface } = await import('node:readline');
      return new Promise((resolve) => {
        const rl = createInterface({ input, output, terminal: true });
        let settled = false;
        const settle = (answer: string | typeof INTERRUPTED | undefined): void => {
          if (settled) return;
          settled = true;
          signal.removeEventListener('abort', onAbort);
          rl.close();
          resolve(answer);
        };
        const onAbort = (): void => {
          output.write('\n');
          settle(undefined);
        };
        if (signal.aborted) return settle(undefined);
        signal.addEventListener('abort', onAbort, { once: true });
        // In a terminal's raw mode a Ctrl-C is a key, not a signal: readline reports it here.
        rl.on('SIGINT', () => {
          output.write('^C\n');
          settle(INTERRUPTED);
        });
        rl.on('close', () => settle(undefined));
        rl.question(question, (answer) => settle(answer));
      });
    },
  };
}

/**
 * What to do after a Ctrl-C: 'cancel' only when the person at the terminal says so; 'detach' on 'd',
 * an empty answer, no answer, or without a terminal. `why` says which, for the message.
 */
export async function askCancelOrDetach(prompt: Prompt, jobLabel: string, signal: AbortSignal): Promise<{ choice: InterruptChoice; why: string }> {
  if (!prompt.interactive) return { choice: 'detach', why: 'Ctrl-C with no terminal to ask on' };
  for (let attempt = 0; attempt < 3; attempt++) {
    const answer = await prompt.ask(`Ctrl-C: cancel ${jobLabel}, or detach and leave it running? [c]ancel / [D]etach: `, signal);
    if (answer === INTERRUPTED) return { choice: 'detach', why: 'Ctrl-C again' };
    if (answer === undefined) return { choice: 'detach', why: 'no answer' };
    const a = answer.trim().toLowerCase();
    if (a === 'c' || a === 'cancel') return { choice: 'cancel', why: 'as asked' };
    if (a === '' || a === 'd' || a === 'detach') return { choice: 'detach', why: 'as asked' };
  }
  return { choice: 'detach', why: 'no answer that reads as cancel or detach' };
}
