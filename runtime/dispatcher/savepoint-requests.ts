// The Dispatcher's savepoint requests in Flink's REST shape: POST /jobs/:id/savepoints and /stop reach the
// job's JobMaster the way a cancel does (its leader lease names its address) and answer a request id; GET
// /jobs/:id/savepoints/:requestId reads the operation from the job record, where the JobMaster keeps it, so
// any Dispatcher answers and the answer outlives the job.
import { randomUUID } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import { ConflictError, errorMessage, FloeError, InvalidRequestError, NotFoundError } from '../core/errors.js';
import { retrieveLeader } from '../ha/leader-election.js';
import type { JobRecord } from '../ha/job-store.js';
import { leaseNames, type LeaseStore } from '../ha/lease-store.js';
import { isGloballyTerminal } from '../jobgraph/job-status.js';
import type { JobMasterGateway, SavepointTriggerRequest } from '../protocol/jobmaster-gateway.js';
import type { SavepointStatusResponse, SavepointTriggerResponse } from '../protocol/rest-api.js';
import { EndpointName, type RpcService } from '../rpc/rpc-service.js';

export type { SavepointStatusResponse };

/** How long a savepoint request waits for the JobMaster to record it (a write to the job record). */
const SAVEPOINT_REQUEST_TIMEOUT_MS = 15_000;

export interface SavepointRequestDeps {
  readonly leaseStore: LeaseStore;
  readonly rpc: RpcService;
  readonly clock: Clock;
  /** The job's record (NotFoundError when there is none). */
  readonly record: (jobId: string) => Promise<JobRecord>;
}

/** The body of POST /jobs/:id/savepoints: `target-directory` (optional), `cancel-job` (optional boolean). */
export function parseSavepointBody(body: unknown): Omit<SavepointTriggerRequest, 'requestId'> {
  const b = bodyObject(body);
  const targetDirectory = optionalDirectory(b, 'target-directory');
  const cancel = b['cancel-job'];
  if (cancel !== undefined && typeof cancel !== 'boolean')
    throw new InvalidRequestError(`field 'cancel-job' must be true or false, found ${JSON.stringify(cancel)}`);
  return { ...(targetDirectory !== undefined && { targetDirectory }), ...(cancel === true && { then: 'cancel' as const }) };
}

/** The body of POST /jobs/:id/stop: `targetDirectory` (optional), `drain` (optional boolean). */
export function parseStopBody(body: unknown): Omit<SavepointTriggerRequest, 'requestId'> {
  const b = bodyObject(body);
  const targetDirectory = optionalDirectory(b, 'targetDirectory');
  const drain = b['drain'];
  if (drain !== undefined && typeof drain !== 'boolean') throw new InvalidRequestError(`field 'drain' must be true or false, found ${JSON.stringify(drain)}`);
  return { ...(targetDirectory !== undefined && { targetDirectory }), then: drain === true ? 'drain' : 'suspend' };
}

/** Asks the job's JobMaster for a savepoint; answers the request id once the JobMaster recorded it. */
export async function requestSavepoint(
  deps: SavepointRequestDeps,
  jobId: string,
  request: Omit<SavepointTriggerRequest, 'requestId'>,
): Promise<SavepointTriggerResponse> {
  const record = await deps.record(jobId);
  if (isGloballyTerminal(record.status)) throw new ConflictError(`job ${jobId} already ended ${record.status}; a savepoint needs a running job`);
  const leader = await retrieveLeader(deps.leaseStore, leaseNames.jobMaster(jobId), deps.clock);
  if (leader === undefined)
    throw new ConflictError(`job ${jobId} has no JobMaster now (it is ${record.status}, waiting or recovering); ask again once it runs`);
  const jobMaster = deps.rpc.connect<JobMasterGateway>(leader.address, EndpointName.JOB_MASTER, {
    fencingToken: leader.token,
    timeoutMs: SAVEPOINT_REQUEST_TIMEOUT_MS,
  });
  const requestId = randomUUID();
  try {
    await jobMaster.triggerSavepoint({ requestId, ...request });
  } catch (error) {
    if (error instanceof FloeError && error.httpStatus < 500) throw error;
    throw new ConflictError(`the JobMaster of job ${jobId} at ${leader.address} could not be asked for a savepoint (${errorMessage(error)}); ask again`);
  }
  return { 'request-id': requestId };
}

/** Where savepoint operation `requestId` of the job stands, from the job record. */
export async function savepointStatus(deps: SavepointRequestDeps, jobId: string, requestId: string): Promise<SavepointStatusResponse> {
  const record = await deps.record(jobId);
  const op = record.savepoints?.find((o) => o.requestId === requestId);
  if (op === undefined)
    throw new NotFoundError(`job ${jobId} has no savepoint operation ${requestId}; the request id is the one POST /jobs/${jobId}/savepoints or /stop answered`);
  switch (op.state) {
    case 'IN_PROGRESS':
      return { status: { id: 'IN_PROGRESS' } };
    case 'COMPLETED':
      return { status: { id: 'COMPLETED' }, operation: { location: op.location ?? '' } };
    case 'FAILED':
      return {
        status: { id: 'COMPLETED' },
        operation: { 'failure-cause': { class: 'CheckpointFailureError', 'stack-trace': op.failureCause ?? 'the savepoint failed' } },
      };
    default:
      return op.state satisfies never;
  }
}

function bodyObject(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body))
    throw new InvalidRequestError(`the request body must be a JSON object, found ${Array.isArray(body) ? 'an array' : typeof body}`);
  return body as Record<string, unknown>;
}

function optionalDirectory(b: Record<string, unknown>, field: string): string | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v === '' || v.length > 2_048) {
    throw new InvalidRequestError(`field '${field}' must be a path or URI of 1-2048 characters, found ${JSON.stringify(v)}`);
  }
  if (!v.startsWith('/') && !/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(v)) {
    throw new InvalidRequestError(`field '${field}' must be an absolute path or a URI (file://…, s3://…), found ${JSON.stringify(v)}`);
  }
  return v;
}
