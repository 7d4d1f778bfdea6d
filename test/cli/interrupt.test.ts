// Ctrl-C while `floe run` follows a job: it asks whether to cancel the job or detach; a second Ctrl-C,
// or no terminal to ask on, detaches (the job keeps running) and says so. The question's I/O is
// injected here; one test sends a real SIGINT to a CLI process without a terminal.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INTERRUPTED, type Interrupts, type Prompt } from '../../runtime/cli/interrupt.js';
import { CliHarness, waitUntil } from './cli-harness.js';

const harness = new CliHarness('floe-cli-interrupt-');
const endlessJob = join(harness.root, 'endless.ts');
const shortJob = join(harness.root, 'short.ts');

beforeAll(async () => {
  writeFileSync(
    endlessJob,
    "import { defineJob } from 'floe';\nexport default defineJob('endless', (env) => { env.generate((i) => i).map((i) => i * 2).collect(); });\n",
  );
  writeFileSync(shortJob, "import { defineJob } from 'floe';\nexport default defineJob('short', (env) => { env.fromSequence(1, 3).collect(); });\n");
  expect((await harness.cli(['cluster', 'start'])).code).toBe(0);
});
afterAll(() => harness.cleanup());

class TestInterrupts implements Interrupts {
  private readonly handlers = new Set<() => void>();
  subscribe(handler: () => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }
  get subscribed(): boolean {
    return this.handlers.size > 0;
  }
  /** A Ctrl-C. */
  fire(): void {
    for (const h of [...this.handlers]) h();
  }
}

/** Answers each question with the next scripted answer; 'wait' leaves it open until it is aborted. */
class ScriptedPrompt implements Prompt {
  readonly questions: string[] = [];
  aborted = 0;
  constructor(
    private readonly answers: (string | typeof INTERRUPTED | 'wait')[],
    readonly interactive = true,
  ) {}
  ask(question: string, signal: AbortSignal): Promise<string | typeof INTERRUPTED | undefined> {
    this.questions.push(question);
    const answer = this.answers.shift();
    if (answer !== 'wait') return Promise.resolve(answer);
    return new Promise((resolve) =>
      signal.addEventListener('abort', () => {
        this.aborted++;
        resolve(undefined);
      }),
    );
  }
}

/** Runs `floe run <job>` and presses Ctrl-C `presses` times once the job is being followed. */
async function runAndInterrupt(job: string, prompt: Prompt, presses = 1, pollIntervalMs = 10) {
  const interrupts = new TestInterrupts();
  let pressed = false;
  const result = await harness.cli(['run', job], {
    interrupts,
    prompt,
    pollIntervalMs,
    onStderr: (text) => {
      if (!pressed && interrupts.subscribed && /RUNNING/.test(text)) {
        pressed = true;
        for (let i = 0; i < presses; i++) interrupts.fire();
      }
    },
  });
  expect(pressed).toBe(true);
  expect(interrupts.subscribed).toBe(false);
  const jobId = /submitted job '\w+' as ([0-9a-f]{32})/.exec(result.stderr)![1]!;
  const status = JSON.parse((await harness.cli(['status', jobId, '--json'])).stdout) as { status: string };
  return { ...result, jobId, status: status.status };
}

describe('Ctrl-C on floe run', () => {
  it('asks, and cancels the job when told to: it follows the job until it is CANCELED', async () => {
    const prompt = new ScriptedPrompt(['c']);
    const run = await runAndInterrupt(endlessJob, prompt);
    expect(prompt.questions).toEqual([`Ctrl-C: cancel job 'endless' (${run.jobId}), or detach and leave it running? [c]ancel / [D]etach: `]);
    expect(run.stderr).toContain(`cancelling job 'endless' (${run.jobId})…`);
    expect(run.stderr).toMatch(/job 'endless' \([0-9a-f]{32}\) ended CANCELED/);
    expect(run.status).toBe('CANCELED');
    expect(run.code).toBe(130);
  });

  it('detaches when told to (or on Enter): the job keeps running, and the message says how to reach it', async () => {
    for (const answer of ['d', '']) {
      const run = await runAndInterrupt(endlessJob, new ScriptedPrompt([answer]));
      expect(run.stderr).toContain(
        `as asked: detached from job 'endless' (${run.jobId}), which keeps running. Follow it with 'floe status ${run.jobId}', cancel it with 'floe cancel ${run.jobId}'`,
      );
      expect(run.stderr).not.toContain('cancelling');
      expect(run.status).toBe('RUNNING');
      expect(run.code).toBe(130);
    }
  });

  it('asks again when the answer is neither', async () => {
    const prompt = new ScriptedPrompt(['maybe', 'c']);
    const run = await runAndInterrupt(endlessJob, prompt);
    expect(prompt.questions).toHaveLength(2);
    expect(run.status).toBe('CANCELED');
  });

  it('a second Ctrl-C while it asks detaches, as a signal or as a key at the question', async () => {
    const prompt = new ScriptedPrompt(['wait']);
    const run = await runAndInterrupt(endlessJob, prompt, 2);
    expect(prompt.aborted).toBe(1);
    expect(run.stderr).toContain(`Ctrl-C again: detached from job 'endless' (${run.jobId}), which keeps running`);
    expect(run.status).toBe('RUNNING');
    expect(run.code).toBe(130);

    const atTheQuestion = await runAndInterrupt(endlessJob, new ScriptedPrompt([INTERRUPTED]));
    expect(atTheQuestion.stderr).toContain(`Ctrl-C again: detached from job 'endless' (${atTheQuestion.jobId}), which keeps running`);
    expect(atTheQuestion.status).toBe('RUNNING');
  });

  it('without a terminal to ask on, it detaches at once', async () => {
    const prompt = new ScriptedPrompt([], false);
    const run = await runAndInterrupt(endlessJob, prompt);
    expect(prompt.questions).toEqual([]);
    expect(run.stderr).toContain(`Ctrl-C with no terminal to ask on: detached from job 'endless' (${run.jobId}), which keeps running`);
    expect(run.status).toBe('RUNNING');
  });

  it('a job that ends while the question is open ends the question, and the run reports the job', async () => {
    // The stand-in Dispatcher finishes a job on its third poll: 300 ms apart, the question is open by then.
    const prompt = new ScriptedPrompt(['wait']);
    const run = await runAndInterrupt(shortJob, prompt, 1, 300);
    expect(prompt.aborted).toBe(1);
    expect(run.stderr).toMatch(/job 'short' \([0-9a-f]{32}\) FINISHED/);
    expect(run.stdout).toBe('first\n{"n":2}\n');
    expect(run.code).toBe(0);
  });

  it('a CLI process without a terminal that gets SIGINT detaches, says so and exits 130', async () => {
    const cli = join(import.meta.dirname, '..', '..', 'dist', 'cli.js');
    const child = spawn(process.execPath, [cli, '--dir', harness.stateDir, 'run', endlessJob], {
      cwd: harness.root,
      env: { PATH: process.env['PATH'] },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    try {
      await waitUntil('the CLI to follow the job', () => /RUNNING/.test(stderr));
      child.kill('SIGINT');
      expect(await exited).toEqual({ code: 130, signal: null });
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    const jobId = /as ([0-9a-f]{32})/.exec(stderr)![1]!;
    expect(stderr).toContain(
      `Ctrl-C with no terminal to ask on: detached from job 'endless' (${jobId}), which keeps running. Follow it with 'floe status ${jobId}'`,
    );
    expect(JSON.parse((await harness.cli(['status', jobId, '--json'])).stdout)).toMatchObject({ status: 'RUNNING' });
  });
});
