// The error vocabulary. Every error crossing a process boundary is a FloeError with a stable
// `code` registered in error-codes.ts with its HTTP status, so the receiving side rebuilds the same class
// (see toErrorInfo / fromErrorInfo).

import { httpStatusOf, type ErrorCode } from './error-codes.js';

export { ERROR_CODES, isErrorCode, type ErrorCode } from './error-codes.js';

export interface ErrorInfo {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly stack?: string;
  readonly details?: unknown;
  /** The job's operator that raised it, by name (a task's failure; its chain may hold several operators). */
  readonly operator?: string;
}

export interface FloeErrorOptions {
  readonly cause?: unknown;
  readonly retryable?: boolean;
  readonly details?: unknown;
}

export class FloeError extends Error {
  /** Stable machine-readable code, e.g. `FENCING_TOKEN_MISMATCH`. */
  readonly code: ErrorCode;
  /** Whether trying the same thing again may succeed. */
  readonly retryable: boolean;
  readonly details?: unknown;
  /** HTTP status at the REST edge, registered with the code; only 4xx expose their message. */
  readonly httpStatus: number;

  constructor(code: ErrorCode, message: string, options: FloeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.httpStatus = httpStatusOf(code);
    this.retryable = options.retryable ?? false;
    this.details = options.details;
  }
}

/** A call reached a fenced component with another leader's token, or none. */
export class FencingTokenError extends FloeError {
  constructor(component: string, expected: number | undefined, received: number | undefined) {
    super(
      'FENCING_TOKEN_MISMATCH',
      `${component} rejected a call fenced with token ${received ?? 'none'}: the current leader's token is ${expected ?? 'unknown (not leading)'}; look up the current leader and retry`,
      { details: { component, expected, received } },
    );
  }
}

/** This process lost (or never held) the lease it needs to act. */
export class LeadershipLostError extends FloeError {
  constructor(message: string, options?: FloeErrorOptions) {
    super('LEADERSHIP_LOST', message, options);
  }
}

/** A write conditioned on an epoch found a newer writer. */
export class StaleWriterError extends FloeError {
  constructor(message: string, options?: FloeErrorOptions) {
    super('STALE_WRITER', message, options);
  }
}

export class RpcTimeoutError extends FloeError {
  constructor(target: string, timeoutMs: number) {
    super('RPC_TIMEOUT', `call to ${target} got no answer within ${timeoutMs} ms`, { retryable: true });
  }
}

/** The peer is unreachable (connection refused, reset, or no route). Heartbeats lose a refused peer at once. */
export class RpcConnectionError extends FloeError {
  constructor(target: string, options?: FloeErrorOptions) {
    super('RPC_CONNECTION', `cannot reach ${target}`, { retryable: true, ...options });
  }
}

export class RpcUnauthorizedError extends FloeError {
  constructor(message?: string) {
    super(
      'UNAUTHORIZED',
      message ??
        'missing or wrong credential: a call must carry the cluster secret or the key of a TaskExecutor the callee accepts (a TaskExecutor accepts only its own, for the job it serves); check that caller and callee belong to the same cluster',
    );
  }
}

/** An authenticated caller asked for something its identity may not do (a TaskExecutor acting as another). */
export class RpcForbiddenError extends FloeError {
  constructor(message: string) {
    super('FORBIDDEN', message);
  }
}

export class NoResourceAvailableError extends FloeError {
  constructor(message: string, options?: FloeErrorOptions) {
    super('NO_RESOURCE_AVAILABLE', message, options);
  }
}

/** One error listing every problem of a submitted JobGraph. */
export class InvalidJobGraphError extends FloeError {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super('INVALID_JOB_GRAPH', `invalid job graph: ${problems.join('; ')}`, { details: { problems } });
    this.problems = problems;
  }
}

/** Malformed input at an API edge: says which field and what was expected. */
export class InvalidRequestError extends FloeError {
  constructor(message: string, options?: FloeErrorOptions) {
    super('INVALID_REQUEST', message, options);
  }
}

/**
 * A submission named a library by its hash without sending it, and the Dispatcher does not have it (or
 * has other bytes under its key). Nothing was written; a client sends the library (inline or through
 * POST /artifacts) and submits again.
 */
export class LibraryNotStoredError extends FloeError {
  constructor(
    readonly sha256: string,
    message = `library ${sha256} is not stored yet: send it base64-encoded in the field 'library', or upload it first through POST /artifacts`,
  ) {
    super('LIBRARY_NOT_STORED', message, { details: { sha256 } });
  }
}

export class PayloadTooLargeError extends FloeError {
  constructor(what: string, sizeBytes: number, limitBytes: number, hint = '') {
    super('PAYLOAD_TOO_LARGE', `${what} is ${sizeBytes} bytes, the limit is ${limitBytes} bytes${hint ? `; ${hint}` : ''}`);
  }
}

export class NotFoundError extends FloeError {
  constructor(message: string) {
    super('NOT_FOUND', message);
  }
}

export class ConflictError extends FloeError {
  constructor(message: string) {
    super('CONFLICT', message);
  }
}

/**
 * A sink target the job may not write: it holds what the write mode must not replace, is a regular file,
 * or changed under a commit. The message names the target, what is in the way and what to do.
 */
export class OutputTargetError extends FloeError {
  constructor(message: string, options?: FloeErrorOptions) {
    super('OUTPUT_TARGET', message, options);
  }
}

/**
 * A text source path the job cannot read: it does not exist, may not be listed or read, or this backend
 * cannot read that kind of path. The message names the path, the reason and what to do.
 */
export class InputSourceError extends FloeError {
  constructor(message: string, options?: FloeErrorOptions) {
    super('INPUT_SOURCE', message, options);
  }
}

/** A file or folder did not open (or answer) within its deadline: the filesystem there hangs. */
export class IoTimeoutError extends FloeError {
  constructor(message: string, options?: FloeErrorOptions) {
    super('IO_TIMEOUT', message, { retryable: true, ...options });
  }
}

export class ConfigurationError extends FloeError {
  constructor(message: string) {
    super('CONFIGURATION', message);
  }
}

/** User code failed; message and stack are the user's. */
export class UserCodeError extends FloeError {
  constructor(message: string, stack: string | undefined) {
    super('USER_CODE', message);
    if (stack !== undefined) this.stack = stack;
  }
}

export function toErrorInfo(error: unknown): ErrorInfo {
  if (error instanceof FloeError) {
    return { code: error.code, message: error.message, retryable: error.retryable, stack: error.stack, details: error.details };
  }
  if (error instanceof Error) {
    return { code: 'INTERNAL', message: error.message, retryable: false, stack: error.stack };
  }
  return { code: 'INTERNAL', message: String(error), retryable: false };
}

/** Rebuilds a FloeError received from another process; the class follows the code. */
export function fromErrorInfo(info: ErrorInfo): FloeError {
  let error: FloeError;
  const d = (info.details ?? {}) as Record<string, unknown>;
  switch (info.code) {
    case 'FENCING_TOKEN_MISMATCH':
      error = new FencingTokenError(String(d['component'] ?? 'component'), d['expected'] as number | undefined, d['received'] as number | undefined);
      break;
    case 'INVALID_JOB_GRAPH':
      error = new InvalidJobGraphError((d['problems'] as string[] | undefined) ?? [info.message]);
      break;
    case 'LEADERSHIP_LOST':
      error = new LeadershipLostError(info.message);
      break;
    case 'STALE_WRITER':
      error = new StaleWriterError(info.message);
      break;
    case 'UNAUTHORIZED':
      error = new RpcUnauthorizedError(info.message);
      break;
    case 'FORBIDDEN':
      error = new RpcForbiddenError(info.message);
      break;
    case 'NO_RESOURCE_AVAILABLE':
      error = new NoResourceAvailableError(info.message);
      break;
    case 'INVALID_REQUEST':
      error = new InvalidRequestError(info.message);
      break;
    case 'LIBRARY_NOT_STORED':
      error = new LibraryNotStoredError(String(d['sha256'] ?? ''), info.message);
      break;
    case 'NOT_FOUND':
      error = new NotFoundError(info.message);
      break;
    case 'CONFLICT':
      error = new ConflictError(info.message);
      break;
    case 'OUTPUT_TARGET':
      error = new OutputTargetError(info.message);
      break;
    case 'INPUT_SOURCE':
      error = new InputSourceError(info.message);
      break;
    case 'IO_TIMEOUT':
      error = new IoTimeoutError(info.message);
      break;
    case 'CONFIGURATION':
      error = new ConfigurationError(info.message);
      break;
    case 'USER_CODE':
      error = new UserCodeError(info.message, info.stack);
      break;
    default:
      error = remoteError(info.code, info.message, { retryable: info.retryable, details: info.details });
  }
  if (info.stack !== undefined) error.stack = info.stack;
  return error;
}

/**
 * A FloeError under a code another process sent, kept as sent: a peer of another version may send a code
 * this build does not register, which answers HTTP 500.
 */
export function remoteError(code: string, message: string, options: FloeErrorOptions = {}): FloeError {
  return new FloeError(code as ErrorCode, message, options);
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
