// `floe list` against a REST endpoint follows GET /jobs page by page until no `next` is left.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RestClient } from '../../runtime/cli/rest-client.js';

/** Answers GET /jobs from a list of pages; records each query it got. */
let server: Server;
let baseUrl: string;
const queries: string[] = [];
const pages: Record<string, { jobs: { jobId: string }[]; next?: string }> = {
  '': { jobs: [{ jobId: 'job-c' }, { jobId: 'job-b' }], next: 'cursor-1' },
  'cursor-1': { jobs: [{ jobId: 'job-a' }], next: 'cursor-2' },
  'cursor-2': { jobs: [] },
};

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    queries.push(url.search);
    const page = url.pathname === '/jobs' ? pages[url.searchParams.get('next') ?? ''] : undefined;
    res.writeHead(page === undefined ? 404 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(page ?? { error: { code: 'NOT_FOUND', message: 'no such page' } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('RestClient.listJobs', () => {
  it('follows `next` through every page, asking for the largest pages', async () => {
    const client = new RestClient({ baseUrl, secret: 's' });
    expect((await client.listJobs()).map((j) => j.jobId)).toEqual(['job-c', 'job-b', 'job-a']);
    expect(queries).toEqual(['?limit=1000', '?limit=1000&next=cursor-1', '?limit=1000&next=cursor-2']);
  });
});
