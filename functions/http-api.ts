// The Dispatcher's REST API as one Lambda function behind an API Gateway HTTP API (payload v2): each
// event becomes a RestRequest for the same router the local server uses, so routes and answers match.
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { randomUUID } from 'node:crypto';
import { registerFileSystem } from '../runtime/blob/file-systems.js';
import { InvalidRequestError } from '../runtime/core/errors.js';
import { createLogger, type Logger } from '../runtime/core/logger.js';
import type { RestHandler, RestRequest, RestResponse } from '../runtime/dispatcher/rest-request.js';
import type { AwsDispatcher } from '../runtime/aws/aws-dispatcher.js';
import { s3FileSystem } from '../runtime/aws/s3-file-system.js';
import { localFileSystem } from '../runtime/local/fs-file-system.js';
import {
  createCapacityFreedHandler,
  createJobEndedHandler,
  createReconcileHandler,
  createTaskStateChangeHandler,
  isCapacityFreed,
  isJobEnded,
  isReconcileEvent,
  isTaskStateChange,
  type CapacityFreedEvent,
  type JobEndedEvent,
  type ReconcileEvent,
  type TaskStateChangeEvent,
} from './ecs-task-events.js';
import { FloeEnv } from '../runtime/core/floe-env.js';

// The file systems the Dispatcher checks sink targets on: local paths (the TaskExecutors' disks), and S3.
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);

export type HttpApiEvent = APIGatewayProxyEventV2;
export type HttpApiResult = APIGatewayProxyStructuredResultV2;

/** Checks the event is an HTTP API v2 event and maps it; throws InvalidRequestError naming what is off. */
export function toRestRequest(event: unknown): RestRequest {
  if (event === null || typeof event !== 'object')
    throw new InvalidRequestError('the Lambda event is not an object; expected an API Gateway HTTP API payload v2 event');
  const e = event as Partial<APIGatewayProxyEventV2>;
  if (e.version !== '2.0')
    throw new InvalidRequestError(
      `the Lambda event has version ${JSON.stringify(e.version)}; expected an API Gateway HTTP API payload v2 event (version "2.0")`,
    );
  const method = e.requestContext?.http?.method;
  if (typeof method !== 'string' || method === '') throw new InvalidRequestError('the event has no requestContext.http.method');
  if (typeof e.rawPath !== 'string' || !e.rawPath.startsWith('/'))
    throw new InvalidRequestError(`the event's rawPath must start with '/', found ${JSON.stringify(e.rawPath)}`);
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(e.headers ?? {})) headers[name.toLowerCase()] = value;
  // Payload v2 takes the Cookie header apart into `cookies`.
  if (Array.isArray(e.cookies) && e.cookies.length > 0) headers['cookie'] = e.cookies.join('; ');
  const rawQuery = typeof e.rawQueryString === 'string' ? e.rawQueryString : '';
  const query: Record<string, string | undefined> = Object.fromEntries(new URLSearchParams(rawQuery));
  let body: Uint8Array | undefined;
  if (typeof e.body === 'string' && e.body !== '') body = Buffer.from(e.body, e.isBase64Encoded === true ? 'base64' : 'utf8');
  else if (e.body !== undefined && e.body !== null && typeof e.body !== 'string') throw new InvalidRequestError('the event body must be a string');
  // Set by API Gateway alone, on a route with IAM authorization, once it has checked the SigV4 signature:
  // the request then needs no cluster secret (its authorization header is the signature).
  const iam = (e.requestContext as { authorizer?: { iam?: { userArn?: unknown } } } | undefined)?.authorizer?.iam;
  const caller = typeof iam?.userArn === 'string' && iam.userArn !== '' ? iam.userArn : undefined;
  // The raw path and query go to the router as sent, so it decodes (and refuses) them as the local server's do.
  return {
    method: method.toUpperCase(),
    path: e.rawPath,
    query,
    rawQuery,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(caller !== undefined ? { authenticatedCaller: caller } : {}),
  };
}

export function toHttpApiResult(response: RestResponse): HttpApiResult {
  if (response.bytes === undefined) {
    return {
      statusCode: response.status,
      headers: { ...response.headers, 'content-type': 'application/json' },
      body: JSON.stringify(response.body),
      isBase64Encoded: false,
    };
  }
  // A cookie goes in `cookies` (payload v2); text stays text, anything else travels base64.
  const { 'set-cookie': cookie, ...headers }: Record<string, string> = { 'content-type': 'application/json', ...response.headers };
  const text = /^(text\/|application\/json|image\/svg)/.test(headers['content-type'] ?? '');
  return {
    statusCode: response.status,
    headers,
    ...(cookie !== undefined ? { cookies: [cookie] } : {}),
    body: Buffer.from(response.bytes).toString(text ? 'utf8' : 'base64'),
    isBase64Encoded: !text,
  };
}

export interface HttpApiHandlerOptions {
  /** Builds the router once per Lambda container (cold start) and reuses it. */
  readonly router: () => Promise<RestHandler>;
  readonly logger?: Logger;
}

/** The middy handler over a router; what the router itself cannot answer becomes a 4xx or "internal error". */
export function createHttpApiHandler(options: HttpApiHandlerOptions): middy.MiddyfiedHandler<HttpApiEvent, HttpApiResult, Error, Context> {
  const log = (options.logger ?? createLogger({ process: 'lambda' })).child({ component: 'http-api' });
  let router: Promise<RestHandler> | undefined;
  const routerOnce = (): Promise<RestHandler> => {
    router ??= options.router().catch((error: unknown) => {
      router = undefined; // a failed cold start is tried again by the next request
      throw error;
    });
    return router;
  };
  return middy<HttpApiEvent, HttpApiResult, Error, Context>()
    .use({
      onError: (request) => {
        const error = request.error;
        if (error instanceof InvalidRequestError) {
          request.response = toHttpApiResult({ status: 400, body: { error: { code: error.code, message: error.message } } });
          return;
        }
        const requestId = request.context?.awsRequestId ?? randomUUID();
        log.error('request failed outside the router', { requestId, error });
        request.response = toHttpApiResult({ status: 500, body: { error: { code: 'INTERNAL', message: 'internal error', requestId } } });
      },
    })
    .handler(async (event) => {
      const request = toRestRequest(event);
      const handle = await routerOnce();
      return toHttpApiResult(await handle(request));
    });
}

// The deployed function: the Dispatcher on DynamoDB, S3 and ECS, configured by the environment (see
// runtime/aws/aws-env.ts). It answers the REST API and hears the cluster's ECS task state changes.
let awsDispatcher: Promise<AwsDispatcher> | undefined;
const dispatcherOnce = (): Promise<AwsDispatcher> => {
  awsDispatcher ??= import('../runtime/aws/aws-dispatcher.js')
    .then(({ startAwsDispatcher }) => startAwsDispatcher({ env: process.env }))
    .catch((error: unknown) => {
      awsDispatcher = undefined; // a failed cold start is tried again by the next event
      throw error;
    });
  return awsDispatcher;
};
const httpApi = createHttpApiHandler({ router: async () => (await dispatcherOnce()).router });
const taskStateChanges = createTaskStateChangeHandler({ dispatcher: async () => (await dispatcherOnce()).dispatcher });
const reconcile = createReconcileHandler({ dispatcher: async () => (await dispatcherOnce()).dispatcher });
const capacityFreed = createCapacityFreedHandler({ dispatcher: async () => (await dispatcherOnce()).dispatcher });
const jobEnded = createJobEndedHandler({ cluster: () => process.env[FloeEnv.ECS_CLUSTER] });

export const handler = (
  event: HttpApiEvent | TaskStateChangeEvent | ReconcileEvent | CapacityFreedEvent | JobEndedEvent,
  context: Context,
): Promise<HttpApiResult | void> =>
  isTaskStateChange(event)
    ? taskStateChanges(event, context)
    : isReconcileEvent(event)
      ? reconcile(event, context)
      : isCapacityFreed(event)
        ? capacityFreed(event, context)
        : isJobEnded(event)
          ? jobEnded(event, context)
          : httpApi(event, context);
