// Example: the warnings and errors of a service log, parsed, filtered and normalised in parallel.
// Run: floe run examples/log-levels.ts -- <log file>   (or `npm start`, which generates a log first)
import { defineJob } from 'floe';

export interface LogEvent {
  readonly level: 'ERROR' | 'WARN';
  readonly service: string;
  readonly timestamp: string;
  readonly message: string;
}

// "<ISO timestamp> <level> [<service>] <message>"; other lines (stack frames, blanks) are not events.
const HEADER = /^(\d{4}-\d\d-\d\dT[\d:.]+Z)\s+(\w+)\s+\[([^\]]+)\]\s+(.*)$/;

const LEVELS: Readonly<Record<string, 'ERROR' | 'WARN' | undefined>> = {
  error: 'ERROR',
  err: 'ERROR',
  fatal: 'ERROR',
  warn: 'WARN',
  warning: 'WARN',
};

export default defineJob('log-levels', (env, args) => {
  env
    .readTextFile(args[0] ?? '.floe/example/logs.txt', { splitSizeBytes: 512 * 1024 })
    .flatMap((line) => {
      const m = HEADER.exec(line);
      return m === null ? [] : [{ timestamp: m[1]!, level: m[2]!, service: m[3]!, message: m[4]! }];
    })
    .name('parse')
    .filter((e) => LEVELS[e.level.toLowerCase()] !== undefined)
    .name('warnings and errors')
    .map((e): LogEvent => ({
      level: LEVELS[e.level.toLowerCase()]!,
      service: e.service.trim().toLowerCase(),
      timestamp: e.timestamp,
      message: e.message.replace(/\s+/g, ' ').trim(),
    }))
    .name('normalise')
    .collect({ maxRecords: 1_000_000 })
    .setParallelism(1);
});
