// The REST API through the Lambda handler behind the API Gateway stand-in: the same bad-input suite as
// the router and the local server, plus what only the Lambda edge can get wrong (events, cold starts).
import { describe, expect, it } from 'vitest';
import type { Context } from 'aws-lambda';
import { silentLogger } from '../../runtime/core/logger.js';
import { createHttpApiHandler, toRestRequest } from '../../functions/http-api.js';
import { describeRestBadInputContract, httpCall } from '../dispatcher/rest-contract.js';
import { startApiGatewayAdapter } from './apigw-adapter.js';

describeRestBadInputContract('Lambda handler behind API Gateway', async (router) => {
  const adapter = await startApiGatewayAdapter(createHttpApiHandler({ router: async () => router, logger: silentLogger }));
  return { call: httpCall(adapter.url), close: () => adapter.close() };
});

const context = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 10_000 } as unknown as Context;

describe('HTTP API Lambda handler', () => {
  it('answers 400 to an event that is not an HTTP API v2 event', async () => {
    const handler = createHttpApiHandler({ router: async () => async () => ({ status: 200, body: {} }), logger: silentLogger });
    const res = await handler({ version: '1.0', path: '/jobs', httpMethod: 'GET' } as never, context);
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.body!).error.message).toMatch(/payload v2 event/);
  });

  it('maps path, query, lowercased headers and a base64 body', () => {
    const request = toRestRequest({
      version: '2.0',
      rawPath: '/jobs/a',
      rawQueryString: 'mode=cancel',
      headers: { Authorization: 'Bearer x' },
      requestContext: { http: { method: 'patch' } },
      body: Buffer.from('hi').toString('base64'),
      isBase64Encoded: true,
    });
    expect(request).toEqual({
      method: 'PATCH',
      path: '/jobs/a',
      query: { mode: 'cancel' },
      rawQuery: 'mode=cancel',
      headers: { authorization: 'Bearer x' },
      body: Buffer.from('hi'),
    });
  });

  it("answers with the router's headers beside its JSON content type (allow on a 405, www-authenticate on a 401)", async () => {
    const handler = createHttpApiHandler({
      router: async () => async () => ({
        status: 405,
        body: { error: { code: 'METHOD_NOT_ALLOWED', message: "method 'PUT' is not allowed on /jobs" } },
        headers: { allow: 'GET, POST' },
      }),
      logger: silentLogger,
    });
    const event = { version: '2.0', rawPath: '/jobs', rawQueryString: '', headers: {}, requestContext: { http: { method: 'PUT' } } } as never;
    const res = await handler(event, context);
    expect(res.statusCode).toBe(405);
    expect(res.headers).toEqual({ allow: 'GET, POST', 'content-type': 'application/json' });
  });

  it('hides a failed cold start behind "internal error" with the request id, and tries again next time', async () => {
    let builds = 0;
    const handler = createHttpApiHandler({
      router: async () => {
        if (++builds === 1) throw new Error('cannot reach DynamoDB at 10.0.0.1');
        return async () => ({ status: 200, body: { status: 'ok' } });
      },
      logger: silentLogger,
    });
    const event = { version: '2.0', rawPath: '/health', rawQueryString: '', headers: {}, requestContext: { http: { method: 'GET' } } } as never;
    const first = await handler(event, context);
    expect(first.statusCode).toBe(500);
    expect(JSON.parse(first.body!)).toEqual({ error: { code: 'INTERNAL', message: 'internal error', requestId: 'req-1' } });
    const second = await handler(event, context);
    expect(second.statusCode).toBe(200);
    expect(builds).toBe(2);
  });
});
