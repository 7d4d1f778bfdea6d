// The JSON bodies the REST API takes, each a valibot schema that gives both the check and the type; the
// output types are checked against the protocol's request types (protocol/rest-api.ts) at compile time.
// A refusal names the field, what it must be and what was found; the fields are checked in the order
// written here, and the first problem is the one reported.
//
// What stays code, in json-body.ts: the bounds on a body's bytes (encoding, nesting depth, number of
// values), which are checked by a scan before the body is parsed (a schema sees only a parsed value), and
// the length of every string and the size of every number at any depth, named by its path, with the
// fields a route lets be long. Checks that need the store or the JobGraph (a library's hash and size
// against jobGraph.library, a size against 'rest.server.max-content-length') stay with the code that
// has them.
import * as v from 'valibot';
import { InvalidRequestError } from '../core/errors.js';
import { parseJobGraph } from '../jobgraph/job-graph-schema.js';
import type { ArtifactUploadRequest, SubmitJobRequest } from '../protocol/rest-api.js';

export const SHA256_HEX = /^[0-9a-f]{64}$/;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

type Entries = Record<string, v.GenericSchema>;

/**
 * A body that must be a JSON object (not an array, not null) with these fields. A field left out is
 * reported with its own schema's message for `undefined`, as a field sent with a wrong value is.
 */
function jsonObject<E extends Entries>(entries: E, shape: string) {
  const missing = (issue: v.BaseIssue<unknown>): string => {
    const key = issue.path?.[0]?.key;
    const schema = typeof key === 'string' ? entries[key] : undefined;
    const message = schema === undefined ? undefined : v.safeParse(schema, undefined).issues?.[0]?.message;
    return message ?? `request body must be a JSON object ${shape}`;
  };
  return v.pipe(
    v.custom<Record<string, unknown>>(
      (body) => body !== null && typeof body === 'object' && !Array.isArray(body),
      `request body must be a JSON object ${shape}`,
    ),
    v.object(entries, missing),
  );
}

/** Checks `body` against `schema`; throws an InvalidRequestError with the first problem's message. */
export function parseBody<S extends v.GenericSchema>(schema: S, body: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, body, { abortEarly: true });
  if (!result.success) throw new InvalidRequestError(result.issues[0].message);
  return result.output;
}

const sha256Field = (issue: v.BaseIssue<unknown>): string => `field 'sha256' must be 64 lowercase hex digits, found ${JSON.stringify(issue.input)}`;
const sizeBytesField = (issue: v.BaseIssue<unknown>): string => `field 'sizeBytes' must be a positive integer, found ${JSON.stringify(issue.input)}`;

/** POST /artifacts. */
export const ARTIFACT_UPLOAD_BODY = jsonObject(
  {
    sha256: v.pipe(v.string(sha256Field), v.regex(SHA256_HEX, sha256Field)),
    sizeBytes: v.pipe(v.number(sizeBytesField), v.integer(sizeBytesField), v.minValue(1, sizeBytesField)),
  },
  '{ "sha256": "<64 hex digits>", "sizeBytes": <bytes> }',
) satisfies v.GenericSchema<unknown, ArtifactUploadRequest>;

const libraryField = "field 'library' must be the library's bytes, base64-encoded";

/**
 * POST /jobs. The JobGraph is decoded by parseJobGraph (which lists every problem of a malformed one)
 * before the library is looked at, so a bad graph is reported first.
 */
export const SUBMIT_JOB_BODY = jsonObject(
  {
    jobGraph: v.pipe(
      v.custom<unknown>((graph) => graph !== undefined, "field 'jobGraph' is missing"),
      v.transform((graph) => parseJobGraph(graph)),
    ),
    library: v.optional(v.pipe(v.string(libraryField), v.regex(BASE64, libraryField))),
  },
  '{ "jobGraph": {...}, "library": "<base64>" }',
) satisfies v.GenericSchema<unknown, SubmitJobRequest>;

const secretField = "field 'secret' must be the cluster secret, a non-empty string";

/** POST /login: any body but an object with a non-empty string `secret` gets the same answer. */
export const LOGIN_BODY = v.object({ secret: v.pipe(v.string(secretField), v.nonEmpty(secretField)) }, secretField);
