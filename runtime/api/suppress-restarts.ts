// Flink's SuppressRestartsException: a user function throws it to say that its failure would recur on
// any retry, so the job ends at once whatever its restart strategy allows.

/**
 * Marks errors as not restartable across copies of this module: each job library bundles its own copy
 * of the API, so the runtime recognises the mark, not the class.
 */
const SUPPRESS_RESTARTS: symbol = Symbol.for('floe.suppress-restarts');

/**
 * Thrown by a user function, fails the job without a restart; the exception history shows `cause` (its
 * message and stack) as not restartable. Plain errors restart under the job's restart strategy.
 */
export class SuppressRestartsException extends Error {
  override readonly cause: unknown;

  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'SuppressRestartsException';
    this.cause = cause;
    Object.defineProperty(this, SUPPRESS_RESTARTS, { value: true });
    // What the user sees is where the cause was made, not where it was wrapped.
    if (cause instanceof Error && cause.stack !== undefined) this.stack = cause.stack;
  }
}

/** Whether `error` is a SuppressRestartsException from any copy of this module. */
export function suppressesRestarts(error: unknown): error is Error & { readonly cause: unknown } {
  return error instanceof Error && (error as unknown as Record<symbol, unknown>)[SUPPRESS_RESTARTS] === true;
}
