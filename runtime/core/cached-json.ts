// Values sent in many messages, serialized once: stringifyWithCachedParts writes the JSON text a
// CachedJson computed the first time instead of walking the value again. The JobMaster sends one
// description of an all-to-all edge's producers in each of its consumers' deployment descriptors;
// without this, deploying N consumers of N producers would serialize N × N entries.
import { randomBytes } from 'node:crypto';

interface EncodingContext {
  /**
   * Marks this call's placeholders: a random part drawn once per process (no string of the caller's can
   * pass for one without reading this process's memory) and a count that differs per call. Drawing
   * random bytes per call cost more than the serialization it saves for small messages.
   */
  marker: string | undefined;
  readonly texts: string[];
}

let encoding: EncodingContext | undefined;
const processMarker = `\u0000cached-json:${randomBytes(12).toString('base64')}:`;
let calls = 0;

/**
 * A value whose JSON text is computed once. Plain JSON.stringify writes it as `plain()`;
 * stringifyWithCachedParts reuses the text. The value must not change after it was first serialized.
 */
export abstract class CachedJson {
  #text: string | undefined;

  /** The plain value this stands for (what JSON.stringify writes, and what a receiver parses). */
  protected abstract plain(): unknown;

  /** This value's JSON text, computed on the first call. */
  get jsonText(): string {
    return (this.#text ??= JSON.stringify(this.plain()));
  }

  toJSON(): unknown {
    const ctx = encoding;
    if (ctx === undefined) return this.plain();
    ctx.marker ??= `${processMarker}${(calls = (calls + 1) % Number.MAX_SAFE_INTEGER)}:`;
    ctx.texts.push(this.jsonText);
    return `${ctx.marker}${ctx.texts.length - 1}`;
  }
}

/** JSON.stringify(value), with each CachedJson inside written from its cached text. */
export function stringifyWithCachedParts(value: unknown): string {
  const outer = encoding;
  const ctx: EncodingContext = { marker: undefined, texts: [] };
  encoding = ctx;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } finally {
    encoding = outer;
  }
  if (ctx.marker === undefined) return json;
  // A placeholder is written as a JSON string, `"<marker, escaped><n>"`: splice the texts in its place.
  // (String.replace with a pattern took ~4 ms per 400 KB text; slicing and joining takes a copy.)
  const open = `"${JSON.stringify(ctx.marker).slice(1, -1)}`;
  const parts: string[] = [];
  let from = 0;
  for (let at = json.indexOf(open); at >= 0; at = json.indexOf(open, from)) {
    const close = json.indexOf('"', at + open.length);
    parts.push(json.slice(from, at), ctx.texts[Number(json.slice(at + open.length, close))]!);
    from = close + 1;
  }
  parts.push(json.slice(from));
  return parts.join('');
}
