// Text that users control (job and operator names, exception messages, records) never reaches the
// terminal raw: escape sequences and control characters are printed as escapes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { escapeText, safeJson } from '../../runtime/cli/escape.js';
import { formatException, formatJobDetails, formatJobList, formatRecord } from '../../runtime/cli/format.js';
import type { JobDetails } from '../../runtime/protocol/rest-api.js';
import type { JobId } from '../../runtime/core/ids.js';
import { CliHarness } from './cli-harness.js';

/** Anything a terminal would act on: C0/C1 controls (ESC, CSI, BEL, CR, …), DEL, bidi overrides and isolates. */
// eslint-disable-next-line no-control-regex -- the control characters a terminal acts on are what this test looks for
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
const HOSTILE_NAME = 'evil\u001b[2J\u001b[31mname\nsecond line\r\u0007\u202egnp.exe';

const harness = new CliHarness('floe-cli-escape-');
afterAll(() => harness.cleanup());

describe('escaping user-supplied text', () => {
  it('writes control characters, escape sequences and bidi controls as visible escapes', () => {
    expect(escapeText(HOSTILE_NAME)).toBe('evil\\x1b[2J\\x1b[31mname\\nsecond line\\r\\x07\\u{202e}gnp.exe');
    expect(escapeText('a\nb\tc', { keepNewlines: true })).toBe('a\nb\\tc');
    expect(escapeText('plain ünïcödé, emoji 👩‍👩‍👧 and CJK 漢字')).toBe('plain ünïcödé, emoji 👩‍👩‍👧 and CJK 漢字');
    expect(escapeText('\u009b31m\u007f')).toBe('\\x9b31m\\x7f');
    const json = safeJson({ name: HOSTILE_NAME, c1: '\u009b', bidi: '\u2067' })!;
    expect(json).not.toMatch(RAW);
    expect(JSON.parse(json)).toEqual({ name: HOSTILE_NAME, c1: '\u009b', bidi: '\u2067' });
  });

  it('escapes names, vertex names, exception messages and records in every printed form', () => {
    const jobId = 'a'.repeat(32) as JobId;
    const details: JobDetails = {
      jobId,
      name: HOSTILE_NAME,
      status: 'FAILED',
      submittedAtMs: 0,
      updatedAtMs: 1,
      endedAtMs: 1,
      durationMs: 1,
      parallelism: 1,
      exceptions: 1,
      vertices: [
        {
          id: 'v',
          name: 'map\u001b[8m',
          parallelism: 1,
          region: 0,
          tasks: { total: 1, scheduled: 0, deploying: 0, running: 0, finished: 0, canceled: 0, failed: 1 },
          recordsIn: 0,
          recordsOut: 0,
          buffersSent: 0,
          maxBuffersInFlight: 0,
        },
      ],
    };
    for (const text of [
      formatJobList([details]),
      formatJobDetails(details),
      formatException({
        timestampMs: 0,
        taskName: 'op\u001b]0;title\u0007 (1/1)',
        message: 'bad\u001b[31m',
        stack: 'Error: bad\u001b[31m\n    at f (job.ts:1:1)',
      }),
      formatRecord('\u001b[31mred'),
      formatRecord({ s: '\u009b2J' }),
    ]) {
      expect(text).not.toMatch(RAW);
    }
    expect(formatJobList([details])).toContain('evil\\x1b[2J\\x1b[31mname\\nsecond line');
    // a stack keeps its lines; only what is inside them is escaped
    expect(formatException({ timestampMs: 0, message: 'm', stack: 'Error: m\u001b[0m\n    at f (job.ts:1:1)' })).toContain(
      '  Error: m\\x1b[0m\n      at f (job.ts:1:1)',
    );
  });

  it('floe run prints a hostile job name and hostile records escaped', async () => {
    const jobFile = join(harness.root, 'hostile.ts');
    writeFileSync(
      jobFile,
      `import { defineJob } from 'floe';\nexport default defineJob(${JSON.stringify(`hostile ${HOSTILE_NAME}`)}, (env) => { env.fromSequence(1, 3).collect(); });\n`,
    );
    const run = await harness.cli(['run', jobFile]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("submitted job 'hostile evil\\x1b[2J\\x1b[31mname\\nsecond line\\r\\x07\\u{202e}gnp.exe' as");
    expect(run.stderr).not.toMatch(RAW);
    expect(run.stdout).toBe('\\x1b[31mred\\x1b[0m\ntwo\\nlines\n{"s":"\\u009b2J","bidi":"\\u202e"}\n');
    const list = await harness.cli(['list']);
    expect(list.stdout).toContain('hostile evil\\x1b[2J');
    expect(list.stdout).not.toMatch(RAW);
    const json = await harness.cli(['list', '--json']);
    expect(json.stdout).not.toMatch(RAW);
    expect((JSON.parse(json.stdout) as { name: string }[])[0]!.name).toBe(`hostile ${HOSTILE_NAME}`);
  });
});
