// `floe logs` against a deployed cluster: the job's lines from CloudWatch Logs. Every JobManager and
// TaskExecutor task writes its JSON log lines to the cluster's task log group (the stack's TaskLogGroup
// output); FilterLogEvents with a JSON pattern on the job id picks the job's lines out of every stream.
import { CloudWatchLogsClient, FilterLogEventsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { parseLogLine, processOf, type JobLogEntry, type JobLogSource } from '../protocol/job-log-source.js';
import { ConfigurationError } from '../core/errors.js';
import { credentialsFromEnv } from './aws-env.js';
import { baseClientOptions } from './clients.js';
import { awsCall } from './aws-errors.js';
import { FloeEnv } from '../core/floe-env.js';

/** The calls of the CloudWatch Logs API this adapter makes (tests pass a client pointed at a stand-in). */
export type FilterLogEvents = (input: { logGroupName: string; filterPattern: string; startTime?: number; nextToken?: string }) => Promise<{
  events?: { eventId?: string; timestamp?: number; message?: string; logStreamName?: string }[];
  nextToken?: string;
}>;

export class CloudWatchJobLogs implements JobLogSource {
  readonly location: string;
  /** The newest event time read so far, and the ids of the events at that time (a later read starts there). */
  private sinceMs: number | undefined;
  private seenAtSince = new Set<string>();

  constructor(
    private readonly filter: FilterLogEvents,
    private readonly logGroupName: string,
    private readonly jobId: string,
  ) {
    this.location = `CloudWatch Logs group ${logGroupName}`;
  }

  /** From the environment: FLOE_LOG_GROUP, the region (FLOE_AWS_REGION or AWS_REGION) and the SDK's credentials. */
  static fromEnv(env: Readonly<Record<string, string | undefined>>, jobId: string): CloudWatchJobLogs {
    const logGroupName = env[FloeEnv.LOG_GROUP];
    const region = env[FloeEnv.AWS_REGION] || env['AWS_REGION'] || env['AWS_DEFAULT_REGION'];
    if (!logGroupName || !region) {
      throw new ConfigurationError(
        `floe logs on a deployed cluster needs ${FloeEnv.LOG_GROUP} (the stack's TaskLogGroup output) and a region (${FloeEnv.AWS_REGION} or AWS_REGION) in the environment, and AWS credentials that may logs:FilterLogEvents on that group`,
      );
    }
    const endpoint = env[FloeEnv.CLOUDWATCH_LOGS_ENDPOINT] || env[FloeEnv.AWS_ENDPOINT] || undefined;
    const credentials = credentialsFromEnv(env as NodeJS.ProcessEnv);
    const client = new CloudWatchLogsClient(
      baseClientOptions({ region, ...(endpoint !== undefined ? { endpoint } : {}), ...(credentials !== undefined ? { credentials } : {}) }),
    );
    const filter: FilterLogEvents = (input) =>
      awsCall('CloudWatch Logs', 'FilterLogEvents', `log group ${input.logGroupName}`, () => client.send(new FilterLogEventsCommand(input)));
    return new CloudWatchJobLogs(filter, logGroupName, jobId);
  }

  async poll(): Promise<{ entries: JobLogEntry[]; found: boolean }> {
    const entries: JobLogEntry[] = [];
    const ids: { id: string; timeMs: number }[] = [];
    let nextToken: string | undefined;
    do {
      const page = await this.filter({
        logGroupName: this.logGroupName,
        // Job ids are hex: nothing in one can break out of the quoted pattern.
        filterPattern: `{ $.jobId = "${this.jobId}" }`,
        ...(this.sinceMs !== undefined ? { startTime: this.sinceMs } : {}),
        ...(nextToken !== undefined ? { nextToken } : {}),
      });
      for (const event of page.events ?? []) {
        const timeMs = event.timestamp ?? 0;
        const id = event.eventId ?? `${event.logStreamName}/${timeMs}/${event.message}`;
        if (timeMs === this.sinceMs && this.seenAtSince.has(id)) continue;
        ids.push({ id, timeMs });
        const line = (event.message ?? '').replace(/\n$/, '');
        const parsed = parseLogLine(line);
        if (parsed === undefined || parsed.fields['jobId'] !== this.jobId) continue;
        entries.push({
          timeMs: parsed.timeMs ?? timeMs,
          process: processOf(parsed.fields) ?? event.logStreamName ?? '?',
          level: parsed.level,
          message: parsed.message,
          fields: parsed.fields,
        });
      }
      nextToken = page.nextToken;
    } while (nextToken !== undefined);
    const newest = Math.max(this.sinceMs ?? -Infinity, ...ids.map((e) => e.timeMs));
    if (Number.isFinite(newest)) {
      if (newest !== this.sinceMs) this.seenAtSince = new Set();
      this.sinceMs = newest;
      for (const e of ids) if (e.timeMs === newest) this.seenAtSince.add(e.id);
    }
    return { entries, found: this.sinceMs !== undefined };
  }
}
