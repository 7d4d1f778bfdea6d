// The REST API's JSON bodies as their schemas check them: what a route refuses, with which message (the
// field, what it must be, what was found), which problem is reported first, and what it hands on.
import { describe, expect, it } from 'vitest';
import { InvalidJobGraphError, InvalidRequestError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { ARTIFACT_UPLOAD_BODY, LOGIN_BODY, parseBody, SUBMIT_JOB_BODY } from '../../runtime/dispatcher/rest-bodies.js';

const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return (error as Error).message;
  }
  throw new Error('expected an InvalidRequestError');
};

const SHA = 'a'.repeat(64);

const jobGraph: JobGraph = {
  jobId: JobId.of('job-1'),
  name: 'test',
  library: { sha256: 'b'.repeat(64), sizeBytes: 10 },
  program: { export: 'default', args: [] },
  vertices: [
    {
      id: 'v1',
      name: 'v1',
      parallelism: 1,
      maxParallelism: 128,
      slotSharingGroup: 'default',
      operators: [{ kind: 'source.sequence', id: 'v1-op', name: 'seq', from: 1, to: 10 }],
    },
  ],
  edges: [],
};

describe('POST /artifacts', () => {
  const artifactsShape = 'request body must be a JSON object { "sha256": "<64 hex digits>", "sizeBytes": <bytes> }';

  it('refuses what is not an object, an array too', () => {
    for (const body of [null, [], 'x', 5, true]) expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, body))).toBe(artifactsShape);
  });

  it('names the first bad field and what was found, left out or sent', () => {
    expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, {}))).toBe("field 'sha256' must be 64 lowercase hex digits, found undefined");
    expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, { sha256: 'ABC', sizeBytes: 0 }))).toBe(`field 'sha256' must be 64 lowercase hex digits, found "ABC"`);
    expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, { sha256: 5 }))).toBe("field 'sha256' must be 64 lowercase hex digits, found 5");
    expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, { sha256: SHA }))).toBe("field 'sizeBytes' must be a positive integer, found undefined");
    expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, { sha256: SHA, sizeBytes: 0 }))).toBe("field 'sizeBytes' must be a positive integer, found 0");
    expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, { sha256: SHA, sizeBytes: 1.5 }))).toBe("field 'sizeBytes' must be a positive integer, found 1.5");
    expect(refusal(() => parseBody(ARTIFACT_UPLOAD_BODY, { sha256: SHA, sizeBytes: '3' }))).toBe(`field 'sizeBytes' must be a positive integer, found "3"`);
  });

  it('hands on the two fields', () => {
    expect(parseBody(ARTIFACT_UPLOAD_BODY, { sha256: SHA, sizeBytes: 3 })).toEqual({ sha256: SHA, sizeBytes: 3 });
  });
});

describe('POST /jobs', () => {
  const jobsShape = 'request body must be a JSON object { "jobGraph": {...}, "library": "<base64>" }';
  const libraryMessage = "field 'library' must be the library's bytes, base64-encoded";

  it('refuses what is not an object, and an object without a JobGraph', () => {
    for (const body of [null, [], 'x']) expect(refusal(() => parseBody(SUBMIT_JOB_BODY, body))).toBe(jobsShape);
    expect(refusal(() => parseBody(SUBMIT_JOB_BODY, {}))).toBe("field 'jobGraph' is missing");
    expect(refusal(() => parseBody(SUBMIT_JOB_BODY, { library: 'AAAA' }))).toBe("field 'jobGraph' is missing");
  });

  it('decodes the JobGraph first: a malformed one is refused with its problems before the library is looked at', () => {
    expect(() => parseBody(SUBMIT_JOB_BODY, { jobGraph: [], library: 5 })).toThrow(InvalidJobGraphError);
    expect(refusal(() => parseBody(SUBMIT_JOB_BODY, { jobGraph, library: 5 }))).toBe(libraryMessage);
    expect(refusal(() => parseBody(SUBMIT_JOB_BODY, { jobGraph, library: 'not base64!' }))).toBe(libraryMessage);
  });

  it('hands on the decoded JobGraph, and the library when it came', () => {
    expect(parseBody(SUBMIT_JOB_BODY, { jobGraph })).toEqual({ jobGraph: parseJobGraph(jobGraph) });
    expect(parseBody(SUBMIT_JOB_BODY, { jobGraph, library: 'AAAA' })).toEqual({ jobGraph: parseJobGraph(jobGraph), library: 'AAAA' });
  });
});

describe('POST /login', () => {
  it('gives one answer to every body but an object with a non-empty string secret', () => {
    for (const body of [null, [], 'x', {}, { secret: '' }, { secret: 5 }]) {
      expect(refusal(() => parseBody(LOGIN_BODY, body))).toBe("field 'secret' must be the cluster secret, a non-empty string");
    }
    expect(parseBody(LOGIN_BODY, { secret: 's' })).toEqual({ secret: 's' });
  });
});
