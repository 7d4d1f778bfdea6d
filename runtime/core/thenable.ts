// Whether a value is a promise (or any thenable): user functions and chain steps return one only when the
// caller must wait, so the hot paths check before awaiting.

export const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';
