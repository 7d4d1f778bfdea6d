// The client side of the Dispatcher's REST API, as the CLI (and tests) use it.
import type { Agent } from 'node:http';
import { processHoldingClock } from '../core/clock.js';
import { FloeError, LibraryNotStoredError, RpcConnectionError, RpcTimeoutError, fromErrorInfo, remoteError } from '../core/errors.js';
import { retrying, type RetryPolicy } from '../core/retry.js';
import type { JobId } from '../core/ids.js';
import { DEFAULT_IDLE_SOCKET_TIMEOUT_MS, failedOnStaleConnection } from '../core/keep-alive.js';
import { MAX_JOB_PAGE_SIZE, type JobException } from '../ha/job-store.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { CheckpointingStatisticsResponse } from '../protocol/checkpoint-rest.js';
import type {
  ArtifactUploadRequest,
  ArtifactUploadResponse,
  CancelJobResponse,
  ClusterInfo,
  ErrorResponse,
  HealthResponse,
  JobDetails,
  JobExceptionsResponse,
  JobResult,
  JobThroughputResponse,
  JobResultResponse,
  JobSummary,
  ListJobsResponse,
  OverviewResponse,
  SavepointStatusResponse,
  SavepointTriggerResponse,
  SubmitJobRequest,
  SubmitJobResponse,
} from '../protocol/rest-api.js';
import type { RequestSigner } from '../protocol/request-signer.js';
import { FloeEnv } from '../core/floe-env.js';

/** `https://<api id>.execute-api.<region>.amazonaws.com[.cn]`: a deployed cluster's API (IAM-authorized); group 1 is the region. */
export const EXECUTE_API_HOST = /^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$/;

export interface RestClientOptions {
  /** e.g. `http://127.0.0.1:8081` */
  readonly baseUrl: string;
  /** The cluster secret; sent with every request but GET /health. */
  readonly secret?: string;
  /**
   * Signs every request to the Dispatcher instead of sending the secret (a deployed cluster, whose API
   * takes IAM credentials). Never used on a presigned upload URL, which carries its own signature.
   * @default - requests are not signed
   */
  readonly signer?: RequestSigner;
  /** Deadline of each request. @default 30_000 */
  readonly timeoutMs?: number;
  /** Larger libraries are uploaded through POST /artifacts instead of inline in POST /jobs. @default 4 MiB */
  readonly inlineLibraryMaxBytes?: number;
  /**
   * A library larger than this is left out of the first POST /jobs, in case the Dispatcher has it already;
   * it is sent only when the Dispatcher answers LIBRARY_NOT_STORED. @default 16 KiB
   */
  readonly libraryCheckMinBytes?: number;
  /**
   * Where the Dispatcher serves now, asked when a request cannot reach it: a local cluster's Dispatcher
   * started again (after a crash) serves at another address, which its state dir names. The request is
   * then sent there, and so is every later one.
   * @default - the Dispatcher is only ever at `baseUrl`
   */
  readonly relocate?: () => { readonly baseUrl: string; readonly secret?: string } | undefined;
}

/** A lost answer to POST /jobs is retried with the same job id for about 10 s. */
const SUBMIT_RETRY: RetryPolicy = { initialIntervalMs: 250, backoffCoefficient: 2, maximumIntervalMs: 4_000, jitter: 0.2, maximumAttempts: 5 };

interface RequestOptions {
  readonly body?: unknown;
  readonly authorized?: boolean;
  readonly notFoundAsUndefined?: boolean;
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
}

/** Inline base64 grows a library by a third; 4 MiB keeps POST /jobs under Lambda's 6 MB request cap. */
export const DEFAULT_INLINE_LIBRARY_MAX_BYTES = 4 * 1024 * 1024;

/** The Dispatcher answered with something that is not the API's JSON. */
export class UnexpectedResponseError extends FloeError {
  constructor(message: string) {
    super('UNEXPECTED_RESPONSE', message);
  }
}

export class RestClient {
  private baseUrl: string;
  private secret: string | undefined;
  private readonly signer: RequestSigner | undefined;
  private readonly timeoutMs: number;
  private readonly inlineLibraryMaxBytes: number;
  private readonly libraryCheckMinBytes: number;
  private readonly relocate: RestClientOptions['relocate'];

  constructor(options: RestClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.secret = options.signer === undefined ? options.secret : undefined;
    this.signer = options.signer;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.inlineLibraryMaxBytes = options.inlineLibraryMaxBytes ?? DEFAULT_INLINE_LIBRARY_MAX_BYTES;
    this.libraryCheckMinBytes = options.libraryCheckMinBytes ?? 16 * 1024;
    this.relocate = options.relocate;
  }

  /** A client of a local cluster; with `current` (its state dir's registration, read again), it follows a Dispatcher started again elsewhere. */
  static forCluster(info: ClusterInfo, timeoutMs?: number, current?: () => ClusterInfo | undefined): RestClient {
    return new RestClient({
      baseUrl: info.restUrl,
      secret: info.secret,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      ...(current === undefined
        ? {}
        : {
            relocate: () => {
              const now = current();
              return now === undefined ? undefined : { baseUrl: now.restUrl, secret: now.secret };
            },
          }),
    });
  }

  /** The Dispatcher's address as this client uses it now. */
  get url(): string {
    return this.baseUrl;
  }

  health(): Promise<HealthResponse> {
    return this.request<HealthResponse>('GET', '/health', { authorized: false });
  }

  /**
   * Submits a job. A library above `inlineLibraryMaxBytes` goes through POST /artifacts first (a Lambda
   * request is capped at 6 MB, a third of it eaten by base64), then the job is submitted without it.
   */
  async submitJob(jobGraph: JobGraph, library?: Uint8Array): Promise<SubmitJobResponse> {
    const withoutLibrary = (): Promise<SubmitJobResponse> =>
      this.resubmitting(() => this.request<SubmitJobResponse>('POST', '/jobs', { body: { jobGraph } satisfies SubmitJobRequest }));
    if (library !== undefined && library.byteLength > this.inlineLibraryMaxBytes) {
      await this.uploadLibrary(jobGraph.library.sha256, library);
      return withoutLibrary();
    }
    // A library the Dispatcher may have already (the same job run again) is not sent at first: the job goes
    // without it, which costs one request when it is stored, and when it is not, a refusal that wrote
    // nothing (LIBRARY_NOT_STORED) and the job sent again with it. Sending costs the bytes, and locally a
    // body over 64 KiB is parsed on a worker thread.
    if (library !== undefined && library.byteLength > this.libraryCheckMinBytes) {
      try {
        return await withoutLibrary();
      } catch (error) {
        if (!(error instanceof LibraryNotStoredError)) throw error;
      }
    }
    const body: SubmitJobRequest =
      library === undefined ? { jobGraph } : { jobGraph, library: Buffer.from(library.buffer, library.byteOffset, library.byteLength).toString('base64') };
    return this.resubmitting(() => this.request<SubmitJobResponse>('POST', '/jobs', { body }));
  }

  /**
   * A submission whose answer was lost (connection reset, timeout, a 5xx) is sent again as it was: the
   * same job id and JobGraph, which the Dispatcher takes as the same job — never a second one.
   */
  private resubmitting(send: () => Promise<SubmitJobResponse>): Promise<SubmitJobResponse> {
    return retrying(send, { policy: SUBMIT_RETRY, clock: processHoldingClock, what: 'submitting the job' });
  }

  /** Stores a library through POST /artifacts and the upload URL it answers (nothing to do when stored). */
  async uploadLibrary(sha256: string, library: Uint8Array): Promise<void> {
    const offer = await this.request<ArtifactUploadResponse>('POST', '/artifacts', {
      body: { sha256, sizeBytes: library.byteLength } satisfies ArtifactUploadRequest,
    });
    if (offer.exists || offer.upload === undefined) return;
    const target = new URL(offer.upload.url, `${this.baseUrl}/`);
    // A relative URL is the Dispatcher's own route and needs the secret or a signature; a presigned one
    // carries its own signature and must get neither.
    const own = target.origin === new URL(this.baseUrl).origin;
    let headers: Record<string, string> = { 'content-type': 'application/octet-stream', ...lowerCased(offer.upload.headers) };
    if (own && this.secret !== undefined) headers['authorization'] = `Bearer ${this.secret}`;
    if (own && this.signer !== undefined) headers = await this.signer.sign({ method: offer.upload.method, url: target, headers, body: library });
    let response: Response;
    try {
      response = await fetch(target, { method: offer.upload.method, headers, body: library, signal: AbortSignal.timeout(Math.max(this.timeoutMs, 120_000)) });
    } catch (e) {
      throw new RpcConnectionError(`the library upload URL ${target.origin}${target.pathname}`, { cause: e });
    }
    if (!response.ok) {
      throw new UnexpectedResponseError(
        `uploading the library to ${target.origin}${target.pathname} answered ${response.status}: ${(await response.text()).slice(0, 200)}`,
      );
    }
  }

  /** Every job, newest first, following GET /jobs page by page. */
  async listJobs(): Promise<readonly JobSummary[]> {
    const jobs: JobSummary[] = [];
    const seen = new Set<string>();
    let next: string | undefined;
    do {
      const page = await this.listJobsPage({ limit: MAX_JOB_PAGE_SIZE, ...(next !== undefined ? { next } : {}) });
      // An older Dispatcher answers every job at once and no `next`: that is the last page too.
      for (const j of page.jobs) {
        if (seen.has(j.jobId)) continue;
        seen.add(j.jobId);
        jobs.push(j);
      }
      next = page.next;
    } while (next !== undefined);
    return jobs;
  }

  /** One page of GET /jobs: up to `limit` jobs (default 100), newest first, after the cursor `next`. */
  listJobsPage(query: { limit?: number; next?: string } = {}): Promise<ListJobsResponse> {
    const params = new URLSearchParams();
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    if (query.next !== undefined) params.set('next', query.next);
    const qs = params.toString();
    return this.request<ListJobsResponse>('GET', qs === '' ? '/jobs' : `/jobs?${qs}`);
  }

  /**
   * The job's details. With `waitMs`, a long-poll: the Dispatcher answers once the job has ended or that
   * long has passed (it holds a request at most 20 s). `signal` abandons the request (an AbortError).
   */
  getJob(jobId: JobId | string, options: { readonly waitMs?: number; readonly signal?: AbortSignal } = {}): Promise<JobDetails> {
    const wait = options.waitMs === undefined ? '' : `?wait=${Math.max(0, Math.round(options.waitMs))}`;
    return this.request<JobDetails>('GET', `/jobs/${encodeURIComponent(jobId)}${wait}`, {
      ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
  }

  /** GET /jobs/:id/checkpoints: the job's checkpoint counts, summary, latest ones and history (Flink's shape). */
  getJobCheckpoints(jobId: JobId | string): Promise<CheckpointingStatisticsResponse> {
    return this.request<CheckpointingStatisticsResponse>('GET', `/jobs/${encodeURIComponent(jobId)}/checkpoints`);
  }

  /** GET /jobs/:id/throughput: the job's cumulative record counts per vertex over time, oldest first. */
  getJobThroughput(jobId: JobId | string): Promise<JobThroughputResponse> {
    return this.request<JobThroughputResponse>('GET', `/jobs/${encodeURIComponent(jobId)}/throughput`);
  }

  async getJobExceptions(jobId: JobId | string): Promise<readonly JobException[]> {
    return (await this.request<JobExceptionsResponse>('GET', `/jobs/${encodeURIComponent(jobId)}/exceptions`)).exceptions;
  }

  /**
   * The collect sink's records, or undefined when the job has no result (404: it has no collect sink,
   * or has not FINISHED). With `waitMs`, a long-poll like getJob's: answered once the job has ended or
   * that long has passed. A result the API answers with a link (too large for one response) is fetched
   * from it, so the caller gets the records either way.
   */
  async getJobResult(jobId: JobId | string, options: { readonly waitMs?: number; readonly signal?: AbortSignal } = {}): Promise<JobResult | undefined> {
    const wait = options.waitMs === undefined ? '' : `?wait=${Math.max(0, Math.round(options.waitMs))}`;
    const answer = await this.request<JobResultResponse>('GET', `/jobs/${encodeURIComponent(jobId)}/result${wait}`, {
      notFoundAsUndefined: true,
      ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    if (answer === undefined || !('download' in answer)) return answer;
    return fetchResultDownload(jobId, answer.download, options.signal);
  }

  cancelJob(jobId: JobId | string): Promise<CancelJobResponse> {
    return this.request<CancelJobResponse>('PATCH', `/jobs/${encodeURIComponent(jobId)}?mode=cancel`);
  }

  /** POST /jobs/:id/savepoints: a savepoint into `targetDirectory` (default 'state.savepoints.dir'). */
  triggerSavepoint(jobId: JobId | string, targetDirectory?: string): Promise<SavepointTriggerResponse> {
    return this.request('POST', `/jobs/${encodeURIComponent(jobId)}/savepoints`, {
      body: targetDirectory === undefined ? {} : { 'target-directory': targetDirectory },
    });
  }

  /** POST /jobs/:id/stop: a savepoint, then the job stops (with `drain`, its windows and timers fire first). */
  stopWithSavepoint(jobId: JobId | string, targetDirectory: string | undefined, drain: boolean): Promise<SavepointTriggerResponse> {
    return this.request('POST', `/jobs/${encodeURIComponent(jobId)}/stop`, {
      body: { ...(targetDirectory === undefined ? {} : { targetDirectory }), drain },
    });
  }

  /** GET /jobs/:id/savepoints/:requestId. */
  savepointStatus(jobId: JobId | string, requestId: string): Promise<SavepointStatusResponse> {
    return this.request('GET', `/jobs/${encodeURIComponent(jobId)}/savepoints/${encodeURIComponent(requestId)}`);
  }

  /**
   * A one-time link that logs a browser in to the cluster's dashboard (valid for minutes), opening a
   * job's page when `jobId` is given.
   */
  async dashboardLink(jobId?: JobId | string): Promise<string> {
    const { path } = await this.request<{ path: string }>('POST', '/login-links');
    return `${this.baseUrl}${path}${jobId === undefined ? '' : `&job=${encodeURIComponent(jobId)}`}`;
  }

  /** Ends every dashboard session of the cluster: each browser must sign in again. */
  async revokeDashboardSessions(): Promise<void> {
    await this.request<{ revoked: string }>('DELETE', '/sessions');
  }

  overview(): Promise<OverviewResponse> {
    return this.request<OverviewResponse>('GET', '/overview');
  }

  private async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    try {
      return await this.requestAt<T>(method, path, opts);
    } catch (error) {
      if (!(error instanceof RpcConnectionError) || opts.signal?.aborted === true || !this.moved()) throw error;
      return this.requestAt<T>(method, path, opts);
    }
  }

  /** Whether the Dispatcher serves elsewhere now (`relocate`); this client then goes there. */
  private moved(): boolean {
    const now = this.relocate?.();
    const baseUrl = now?.baseUrl.replace(/\/+$/, '');
    if (now === undefined || baseUrl === undefined || baseUrl === this.baseUrl) return false;
    this.baseUrl = baseUrl;
    if (this.signer === undefined) this.secret = now.secret;
    return true;
  }

  private async requestAt<T>(method: string, path: string, opts: RequestOptions): Promise<T> {
    const url = `${this.baseUrl}${path}`;
    let headers: Record<string, string> = { accept: 'application/json' };
    if (opts.authorized !== false && this.secret !== undefined) headers['authorization'] = `Bearer ${this.secret}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    // Signed even where the route is public: the signature then covers exactly what is sent.
    if (this.signer !== undefined) headers = await this.signer.sign({ method, url: new URL(url), headers, ...(body === undefined ? {} : { body }) });
    let response: { status: number; ok: boolean; text: () => Promise<string> };
    // A long-poll may be held for its wait on top of the usual deadline.
    const deadlineMs = this.timeoutMs + (opts.waitMs ?? 0);
    const timeout = AbortSignal.timeout(deadlineMs);
    try {
      response = await send(new URL(url), {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        signal: opts.signal === undefined ? timeout : AbortSignal.any([timeout, opts.signal]),
      });
    } catch (e) {
      if (timeout.aborted) throw new RpcTimeoutError(`${method} ${url}`, deadlineMs);
      if (opts.signal?.aborted) throw e;
      throw new RpcConnectionError(`the Dispatcher at ${this.baseUrl}`, { cause: e });
    }
    const text = await response.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new UnexpectedResponseError(`${method} ${path} answered ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`);
    }
    if (response.ok) {
      if (json === undefined) throw new UnexpectedResponseError(`${method} ${path} answered ${response.status} with an empty body`);
      return json as T;
    }
    if (response.status === 404 && opts.notFoundAsUndefined) return undefined as T;
    const error = (json as Partial<ErrorResponse> | undefined)?.error;
    if (response.status >= 500) {
      const requestId = error?.requestId;
      throw remoteError(
        error?.code ?? 'INTERNAL',
        `the Dispatcher failed on ${method} ${path} (HTTP ${response.status}${requestId ? `, request id ${requestId}` : ''}); its log has the details`,
        { retryable: true },
      );
    }
    if (error && typeof error.code === 'string' && typeof error.message === 'string') {
      throw fromErrorInfo({ code: error.code, message: error.message, retryable: false, ...(error.details === undefined ? {} : { details: error.details }) });
    }
    // API Gateway's own refusals ({"message": ...}): its IAM authorizer, its throttling, its limits.
    const gatewayMessage = (json as { message?: unknown } | undefined)?.message;
    if (response.status === 403 && typeof gatewayMessage === 'string') {
      const hint =
        this.signer === undefined
          ? `the API takes requests signed with IAM credentials: use an execute-api URL, or --aws-iam / ${FloeEnv.AWS_IAM}=1`
          : 'the credentials floe found (the AWS SDK chain: environment, profile, SSO, role) must be valid and allow execute-api:Invoke on the API';
      // API Gateway quotes a malformed authorization header back, and that may be our bearer secret.
      const quoted = this.secret === undefined ? gatewayMessage : gatewayMessage.replaceAll(this.secret, '<secret>');
      throw new UnexpectedResponseError(`${method} ${path} was refused by the API (HTTP 403: ${quoted.slice(0, 300)}); ${hint}`);
    }
    throw new UnexpectedResponseError(`${method} ${path} answered ${response.status}: ${text.slice(0, 200)}`);
  }
}

/** The client's connection pools, one per protocol, made on first use. */
const agents = new Map<string, Agent>();

async function agentFor(protocol: string): Promise<{ request: typeof import('node:http').request; agent: Agent }> {
  const mod = protocol === 'https:' ? await import('node:https') : await import('node:http');
  let agent = agents.get(protocol);
  if (agent === undefined) {
    // Idle connections go after DEFAULT_IDLE_SOCKET_TIMEOUT_MS, well before a Floe server drops them
    // (Node's global agent would keep them 5 s, the same as servers that close after 5 s).
    agent = new mod.Agent({ keepAlive: true, timeout: DEFAULT_IDLE_SOCKET_TIMEOUT_MS });
    agents.set(protocol, agent);
  }
  return { request: mod.request, agent };
}

/**
 * One request with node:http (or node:https), not fetch: fetch's first call in a process loads and
 * compiles undici, about 100-200 ms, most of what a `floe run` against a local cluster spends waiting on
 * its own side. Idle keep-alive sockets of the agent are unref'd, so they never hold the process.
 *
 * A pooled connection the server closed just as this request went out on it fails before any answer
 * (ECONNRESET or EPIPE, "socket hang up"): the server most likely never read it, so it is sent once
 * more, on a new connection of its own. Every request of this client may be sent twice: reads, and
 * writes that are idempotent (a submission carries its job id, a library its hash, a cancel is a flag).
 */
async function send(
  url: URL,
  init: { readonly method: string; readonly headers: Readonly<Record<string, string>>; readonly body?: string | Uint8Array; readonly signal: AbortSignal },
): Promise<{ status: number; ok: boolean; text: () => Promise<string> }> {
  const { request, agent } = await agentFor(url.protocol);
  const body = init.body === undefined ? undefined : typeof init.body === 'string' ? Buffer.from(init.body) : init.body;
  const once = (pooled: boolean): Promise<{ status: number; ok: boolean; text: () => Promise<string> }> =>
    new Promise((resolve, reject) => {
      const req = request(
        url,
        {
          method: init.method,
          agent: pooled ? agent : false,
          headers: { ...init.headers, ...(body === undefined ? {} : { 'content-length': String(body.byteLength) }) },
          signal: init.signal,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({ status, ok: status >= 200 && status < 300, text: async () => text });
          });
        },
      );
      req.on('error', (error: NodeJS.ErrnoException) =>
        reject(failedOnStaleConnection(req, error) && !init.signal.aborted ? new StaleConnectionError(error) : error),
      );
      req.end(body);
    });
  try {
    return await once(true);
  } catch (error) {
    if (!(error instanceof StaleConnectionError)) throw error;
    // On a connection of its own: the pool may hold more that the server has closed.
    return once(false);
  }
}

/** A reused pooled connection was reset before any answer: the request most likely never reached the server. */
class StaleConnectionError extends Error {
  constructor(readonly reset: Error) {
    super(reset.message, { cause: reset });
  }
}

const lowerCased = (headers: Readonly<Record<string, string>>): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));

/**
 * A result the API answered with a link: a presigned URL, fetched without this client's credentials (the
 * URL carries its own signature, and a second one would be refused).
 */
async function fetchResultDownload(
  jobId: JobId | string,
  download: { readonly url: string; readonly sizeBytes: number },
  signal?: AbortSignal,
): Promise<JobResult> {
  const res = await fetch(download.url, signal === undefined ? {} : { signal });
  const text = await res.text();
  if (!res.ok) {
    throw new UnexpectedResponseError(
      `the result of job ${jobId} (${download.sizeBytes} bytes) could not be fetched from its link: expected 200, found ${res.status} ${text.slice(0, 200)}; ask GET /jobs/${jobId}/result again for a fresh link (it expires)`,
    );
  }
  if (Buffer.byteLength(text) !== download.sizeBytes) {
    throw new UnexpectedResponseError(
      `the result of job ${jobId} fetched from its link holds ${Buffer.byteLength(text)} bytes, expected ${download.sizeBytes}; ask GET /jobs/${jobId}/result again`,
    );
  }
  return JSON.parse(text) as JobResult;
}
