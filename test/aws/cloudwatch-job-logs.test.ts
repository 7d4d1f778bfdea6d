// `floe logs` against a deployed cluster: the job's lines from CloudWatch Logs (here a stand-in that speaks
// its JSON protocol and applies the `{ $.jobId = "…" }` pattern, as no emulator of ours serves the API).
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { CloudWatchJobLogs } from '../../runtime/aws/cloudwatch-job-logs.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

const JOB = 'a'.repeat(32);
const GROUP = 'FloeStack-TaskLogs1234';
const at = (s: number): number => Date.UTC(2026, 11, 1, 12, 0, s);
const line = (s: number, fields: Record<string, unknown>): string => JSON.stringify({ t: new Date(at(s)).toISOString(), level: 'info', ...fields });

interface Event {
  eventId: string;
  timestamp: number;
  logStreamName: string;
  message: string;
}

/** FilterLogEvents over a list of events: the JSON job-id pattern, startTime, and pages of two events. */
class LogsStandIn {
  readonly events: Event[] = [];
  readonly requests: Record<string, unknown>[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<LogsStandIn> {
    let self: LogsStandIn | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          logGroupName: string;
          filterPattern: string;
          startTime?: number;
          nextToken?: string;
        };
        self!.requests.push({ target: req.headers['x-amz-target'], ...input });
        const job = /^\{ \$\.jobId = "([0-9a-f]+)" \}$/.exec(input.filterPattern)?.[1];
        const matching = self!.events.filter(
          (e) => (input.startTime === undefined || e.timestamp >= input.startTime) && (JSON.parse(e.message) as { jobId?: string }).jobId === job,
        );
        const from = Number(input.nextToken ?? 0);
        const page = matching.slice(from, from + 2);
        res.writeHead(input.logGroupName === GROUP ? 200 : 400, { 'content-type': 'application/x-amz-json-1.1' });
        res.end(
          JSON.stringify(
            input.logGroupName === GROUP
              ? { events: page, ...(from + 2 < matching.length ? { nextToken: String(from + 2) } : {}) }
              : { __type: 'ResourceNotFoundException', message: 'The specified log group does not exist.' },
          ),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new LogsStandIn(server, `http://127.0.0.1:${(server.address() as { port: number }).port}`);
    return self;
  }

  add(s: number, stream: string, fields: Record<string, unknown>): void {
    this.events.push({ eventId: `e${this.events.length}`, timestamp: at(s), logStreamName: stream, message: line(s, fields) });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

let cw: LogsStandIn;
const root = mkdtempSync(join(tmpdir(), 'floe-cw-logs-'));
beforeAll(async () => {
  cw = await LogsStandIn.start();
  cw.add(1, 'jobmanager/floe/t1', { process: 'jobmanager', jobId: JOB, msg: 'job RUNNING' });
  cw.add(2, 'taskexecutor/floe/t2', { process: 'taskexecutor', resourceId: 'te-1', jobId: JOB, msg: 'slot offered' });
  cw.add(2, 'taskexecutor/floe/t9', { process: 'taskexecutor', resourceId: 'te-9', jobId: 'b'.repeat(32), msg: 'another job' });
  cw.add(3, 'taskexecutor/floe/t2', { process: 'taskexecutor', resourceId: 'te-1', jobId: JOB, level: 'warn', msg: 'slow consumer' });
});
afterAll(async () => {
  await cw.close();
  rmSync(root, { recursive: true, force: true });
});

const env = (): Record<string, string> => ({
  [FloeEnv.LOG_GROUP]: GROUP,
  [FloeEnv.CLOUDWATCH_LOGS_ENDPOINT]: cw.url,
  [FloeEnv.AWS_REGION]: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'test',
  AWS_SECRET_ACCESS_KEY: 'test',
});

describe('floe logs on a deployed cluster', () => {
  it("prints the job's lines from the task log group, every page, merged by time", async () => {
    let stdout = '';
    let stderr = '';
    const io: CliIo = {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
      env: { ...env(), FLOE_SECRET: 's' },
      cwd: root,
    };
    // The REST endpoint is not asked: the lines come from CloudWatch Logs.
    expect(await main(['--url', 'http://127.0.0.1:9/', 'logs', JOB], io)).toBe(0);
    expect(stderr).toBe('');
    expect(stdout.split('\n').filter((l) => l !== '')).toEqual([
      '2026-12-01 12:00:01.000  jobmanager  INFO   job RUNNING',
      '2026-12-01 12:00:02.000  taskexecutor te-1  INFO   slot offered',
      '2026-12-01 12:00:03.000  taskexecutor te-1  WARN   slow consumer',
    ]);
    expect(cw.requests[0]).toMatchObject({ target: 'Logs_20140328.FilterLogEvents', logGroupName: GROUP, filterPattern: `{ $.jobId = "${JOB}" }` });
  });

  it('reads only newer lines on the next call, none twice, even at the same millisecond', async () => {
    const logs = CloudWatchJobLogs.fromEnv(env(), JOB);
    expect((await logs.poll()).entries).toHaveLength(3);
    expect((await logs.poll()).entries).toEqual([]);
    cw.add(3, 'taskexecutor/floe/t3', { process: 'taskexecutor', resourceId: 'te-2', jobId: JOB, msg: 'same millisecond' });
    cw.add(4, 'jobmanager/floe/t1', { process: 'jobmanager', jobId: JOB, msg: 'job FINISHED' });
    expect((await logs.poll()).entries.map((e) => e.message)).toEqual(['same millisecond', 'job FINISHED']);
    expect(cw.requests.at(-1)).toMatchObject({ startTime: at(3) });
  });

  it('says what to set when the log group is not named, and names a log group that is not there', async () => {
    let stderr = '';
    const io: CliIo = { stdout: { write: () => true }, stderr: { write: (t: string) => (stderr += t) }, env: { FLOE_SECRET: 's' }, cwd: root };
    expect(await main(['--url', 'http://127.0.0.1:9/', 'logs', JOB], io)).toBe(1);
    expect(stderr).toMatch(/set FLOE_LOG_GROUP to the stack's TaskLogGroup output/);
    const wrong = CloudWatchJobLogs.fromEnv({ ...env(), [FloeEnv.LOG_GROUP]: 'gone' }, JOB);
    await expect(wrong.poll()).rejects.toThrow(/FilterLogEvents.*log group gone|log group gone.*FilterLogEvents/);
  });
});
