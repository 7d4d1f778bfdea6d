// Structured JSON-lines logs on stderr; every line names its component, and the job and fencing token where known.
import { FloeEnv } from './floe-env.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

function threshold(): number {
  const level = (process.env[FloeEnv.LOG_LEVEL] ?? 'info') as LogLevel;
  return LEVELS[level] ?? LEVELS.info;
}

export function createLogger(bindings: Record<string, unknown>, sink: (line: string) => void = (l) => process.stderr.write(l + '\n')): Logger {
  const min = threshold();
  const emit = (level: LogLevel, msg: string, fields?: Record<string, unknown>): void => {
    if (LEVELS[level] < min) return;
    const entry: Record<string, unknown> = { t: new Date().toISOString(), level, ...bindings, msg };
    if (fields) {
      for (const [k, v] of Object.entries(fields)) entry[k] = v instanceof Error ? { message: v.message, stack: v.stack } : v;
    }
    sink(JSON.stringify(entry));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ ...bindings, ...fields }, sink),
  };
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};

/**
 * A logger whose bound fields can be replaced later, for a process that moves on to another job (a warm
 * TaskExecutor): it and every child made from it log with the fields set last.
 */
export function switchableLogger(base: Logger, fields: Record<string, unknown>): { readonly logger: Logger; rebind(fields: Record<string, unknown>): void } {
  let bound = base.child(fields);
  const make = (extra: Record<string, unknown> | undefined): Logger => {
    const target = (): Logger => (extra === undefined ? bound : bound.child(extra));
    return {
      debug: (msg, f) => target().debug(msg, f),
      info: (msg, f) => target().info(msg, f),
      warn: (msg, f) => target().warn(msg, f),
      error: (msg, f) => target().error(msg, f),
      child: (more) => make({ ...extra, ...more }),
    };
  };
  return {
    logger: make(undefined),
    rebind: (next) => {
      bound = base.child(next);
    },
  };
}
