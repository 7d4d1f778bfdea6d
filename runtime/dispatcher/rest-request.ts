// A REST request and response as every front (the local HTTP server, the Lambda handlers) hands them to
// the router, and the strict reading of their parts: path segments, the raw query string, the headers that
// describe a body. Each refusal names the part at fault and what it must be.
import { FloeError, InvalidRequestError } from '../core/errors.js';

export interface RestRequest {
  readonly method: string;
  /** Path without the query string, still percent-encoded as sent, e.g. `/jobs/abc`. */
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  /**
   * The query string as sent, without the `?`. When a front passes it, the router reads the query from
   * it, so a parameter given twice or malformed percent-encoding is refused instead of silently merged.
   */
  readonly rawQuery?: string;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body?: Uint8Array;
  /**
   * Who the front in front of the router already authenticated, e.g. the ARN API Gateway's IAM
   * authorizer verified the request's SigV4 signature for. Such a request needs no secret. Only a front
   * sets it, from what its own infrastructure vouches for (never from anything a client sends).
   */
  readonly authenticatedCaller?: string;
}

export interface RestResponse {
  readonly status: number;
  /** Sent as JSON, unless `bytes` is set. */
  readonly body: unknown;
  /**
   * The body as it goes on the wire (a dashboard file, a JSON body already serialized for its etag, or
   * empty for a 304 or a redirect); `headers` then carry its content-type.
   */
  readonly bytes?: Uint8Array;
  /** Headers beyond content-type, e.g. `allow` on a 405 or `www-authenticate` on a 401. */
  readonly headers?: Readonly<Record<string, string>>;
}

export type RestHandler = (request: RestRequest) => Promise<RestResponse>;

export class UnsupportedMediaTypeError extends FloeError {
  constructor(message: string) {
    super('UNSUPPORTED_MEDIA_TYPE', message);
  }
}

/** Echoes client text in a message: short, and visibly quoted. */
export const shown = (text: string): string => `'${text.length > 80 ? `${text.slice(0, 77)}...` : text}'`;

/** How a route is named in messages, e.g. `/jobs/:id`. */
export const routeName = (route: { readonly pattern: readonly string[] }): string => `/${route.pattern.join('/')}`;

/** Decodes each segment of a raw path; empty segments (`//`, a trailing `/`) are skipped. */
export function decodePath(path: string): { segments: string[] } | { error: InvalidRequestError } {
  const segments: string[] = [];
  for (const raw of path.split('/')) {
    if (raw === '') continue;
    try {
      segments.push(decodeURIComponent(raw));
    } catch {
      return {
        error: new InvalidRequestError(
          `path segment ${shown(raw)} is not valid percent-encoding: each '%' must start a '%XX' escape of two hex digits, and the escapes must spell UTF-8`,
        ),
      };
    }
  }
  return { segments };
}

/** Reads a raw query string strictly: every name once, every escape valid. */
export function parseRawQuery(raw: string): Record<string, string> {
  // No prototype: a parameter named '__proto__' is a parameter like any other (and refused as unknown).
  const query = Object.create(null) as Record<string, string>;
  for (const pair of raw.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const [rawName, rawValue] = eq < 0 ? [pair, ''] : [pair.slice(0, eq), pair.slice(eq + 1)];
    let name: string;
    let value: string;
    try {
      name = decodeURIComponent(rawName.replaceAll('+', ' '));
      value = decodeURIComponent(rawValue.replaceAll('+', ' '));
    } catch {
      throw new InvalidRequestError(
        `query parameter ${shown(pair)} is not valid percent-encoding: each '%' must start a '%XX' escape of two hex digits, and the escapes must spell UTF-8`,
      );
    }
    if (Object.hasOwn(query, name)) throw new InvalidRequestError(`query parameter ${shown(name)} is given more than once; give it once`);
    query[name] = value;
  }
  return query;
}

export type BodyKind = 'none' | 'json' | 'bytes';

const mediaType = (header: string): { type: string; charset?: string } => {
  const [type, ...params] = header.split(';');
  const charset = params.map((p) => /^\s*charset\s*=\s*"?([^";\s]*)"?\s*$/i.exec(p)?.[1]).find((c) => c !== undefined);
  return { type: (type ?? '').trim().toLowerCase(), ...(charset !== undefined ? { charset: charset.toLowerCase() } : {}) };
};

export function checkBodyHeaders(method: string, name: string, kind: BodyKind, headers: RestRequest['headers']): void {
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding.trim() !== '' && encoding.trim().toLowerCase() !== 'identity') {
    throw new UnsupportedMediaTypeError(
      `header 'content-encoding' is ${shown(encoding)}; ${method} ${name} takes the body as it is (identity), not compressed`,
    );
  }
  if (kind !== 'json') return;
  const contentType = headers['content-type'];
  if (contentType === undefined || contentType.trim() === '') return;
  const { type, charset } = mediaType(contentType);
  if (type !== 'application/json')
    throw new UnsupportedMediaTypeError(`header 'content-type' is ${shown(contentType)}; ${method} ${name} takes 'application/json'`);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new UnsupportedMediaTypeError(`header 'content-type' names charset ${shown(charset)}; JSON bodies are UTF-8`);
  }
}
