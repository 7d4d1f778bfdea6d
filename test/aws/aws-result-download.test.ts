// GET /jobs/:id/result on the AWS backend (emulators): a result too large for a Lambda response (6 MB)
// is answered with a presigned S3 GET of its object, which the client follows, getting every record; a
// small one comes inline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAMBDA_RESULT_INLINE_MAX_BYTES } from '../../runtime/aws/aws-dispatcher.js';
import { RestClient } from '../../runtime/cli/rest-client.js';
import { resultResponseBytes } from '../../runtime/dispatcher/views.js';
import { runFixtureToEnd } from '../support/aws-jobs.js';
import { LAMBDA_MAX_PAYLOAD_BYTES, type ApiGatewayAdapter } from './apigw-adapter.js';
import { awsTestApiSigner, startAwsTestCluster, type AwsFront, type AwsTestCluster } from './aws-test-cluster.js';

let cluster: AwsTestCluster;
let front: AwsFront;

beforeAll(async () => {
  cluster = await startAwsTestCluster();
  front = await cluster.front();
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

/** What the fixture job collects: `count` records of `width` characters, quotes inside. */
function expected(count: number, width: number): string[] {
  return Array.from({ length: count }, (_, i) => `${i + 1} "${'x'.repeat(Math.max(0, width - String(i + 1).length - 3))}"`);
}

function runToEnd(count: number, width: number): Promise<string> {
  return runFixtureToEnd(cluster, front, 'big-result.ts', [String(count), String(width)]);
}

const sorted = (records: readonly unknown[]): string[] => (records as string[]).slice().sort();

describe('GET /jobs/:id/result on AWS', () => {
  it('answers a result above the cap with a presigned GET that holds it whole, and the client returns every record', async () => {
    // 70,000 records of 100 characters: 7 MB of JSON, above Lambda's 6 MB response cap.
    const [count, width] = [70_000, 100];
    const jobId = await runToEnd(count, width);
    const adapter: ApiGatewayAdapter = front.adapter;
    const oversizedBefore = adapter.oversizedResponses;

    const answer = await front.api('GET', `/jobs/${jobId}/result`);
    expect(answer.status).toBe(200);
    expect(answer.body.records).toBeUndefined();
    const { url, sizeBytes, expiresAtMs } = answer.body.download as { url: string; sizeBytes: number; expiresAtMs: number };
    expect(sizeBytes).toBeGreaterThan(LAMBDA_MAX_PAYLOAD_BYTES);
    expect(expiresAtMs).toBeGreaterThan(Date.now());
    // A presigned GET of the job's result object on S3 (s3rver), with its own signature in the query.
    const path = new URL(url).pathname;
    expect(path.startsWith(`/${cluster.emulators.bucket}/`) && path.endsWith(`jobs/${jobId}/result.json`), path).toBe(true);
    expect(new URL(url).searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    // Valid for 15 minutes: the client fetches it at once.
    expect(new URL(url).searchParams.get('X-Amz-Expires')).toBe('900');
    expect(expiresAtMs - Date.now()).toBeGreaterThan(14 * 60_000);
    expect(expiresAtMs - Date.now()).toBeLessThanOrEqual(15 * 60_000);

    // Fetched without credentials, as the client does: the whole result.
    const fetched = await fetch(url);
    expect(fetched.status).toBe(200);
    const text = await fetched.text();
    expect(Buffer.byteLength(text)).toBe(sizeBytes);
    const whole = JSON.parse(text) as { records: string[]; truncated: boolean };
    expect(whole.truncated).toBe(false);
    expect(sorted(whole.records)).toEqual(sorted(expected(count, width)));

    // The client follows the link: the caller gets the records as if they had come inline.
    const client = new RestClient({ baseUrl: adapter.url, signer: awsTestApiSigner() });
    const result = await client.getJobResult(jobId);
    expect(result?.truncated).toBe(false);
    expect(result?.records).toHaveLength(count);
    expect(sorted(result!.records)).toEqual(sorted(expected(count, width)));
    // No answer went over Lambda's cap on the way.
    expect(adapter.oversizedResponses).toBe(oversizedBefore);
  });

  it('answers a result under the cap inline, its records in the response', async () => {
    const [count, width] = [2_000, 50];
    const jobId = await runToEnd(count, width);
    const answer = await front.api('GET', `/jobs/${jobId}/result`);
    expect(answer.status).toBe(200);
    expect(answer.body.download).toBeUndefined();
    expect(answer.body.truncated).toBe(false);
    expect(sorted(answer.body.records)).toEqual(sorted(expected(count, width)));
  });

  it('counts a result as the response carries it: escaped once more inside the JSON envelope, with room left under 6 MB', () => {
    // A quote is 2 bytes in the body (\") and 4 in the envelope (\\\"): 3 MiB of body is 6 MiB there.
    const quotes = JSON.stringify({ records: ['"'.repeat(1.5 * 1024 * 1024)], truncated: false });
    expect(Buffer.byteLength(quotes)).toBeLessThan(LAMBDA_RESULT_INLINE_MAX_BYTES);
    expect(resultResponseBytes(quotes)).toBeGreaterThan(LAMBDA_RESULT_INLINE_MAX_BYTES);
    expect(LAMBDA_RESULT_INLINE_MAX_BYTES).toBeLessThanOrEqual(LAMBDA_MAX_PAYLOAD_BYTES - 1024 * 1024);
  });
});
