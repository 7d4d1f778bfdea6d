// Keep-alive between Floe's HTTP clients and servers (RPC and the REST API alike). A server that closes
// an idle connection at the very moment its client reuses it makes the client's request fail with
// "socket hang up" from a live peer; so every client lets its idle connections go far earlier than any
// Floe server closes them, and retries once a request whose reused connection was reset before an answer.

/** How long a Floe server keeps an idle keep-alive connection open (ms). */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 30_000;
/** How long a Floe client keeps an idle pooled connection (ms); well below every Floe server's keep-alive timeout. */
export const DEFAULT_IDLE_SOCKET_TIMEOUT_MS = 4_000;

/**
 * Whether a request failed because the pooled connection it reused was closed by the server as it went
 * out: reset or broken before any answer. Only a resend on a fresh connection tells a dead server apart.
 */
export function failedOnStaleConnection(request: { readonly reusedSocket: boolean }, error: NodeJS.ErrnoException): boolean {
  return request.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
}
