// Text from users (job and operator names, exception messages, records) as the CLI prints it: control
// characters and the characters that reorder a line are shown as escapes, so nothing a job carries can
// move the cursor, recolour or rewrite the terminal, or pass for another line of the CLI's output.

/**
 * C0 and C1 controls (ESC, CSI, BEL, CR, …), DEL, lone surrogates, the bidirectional overrides and
 * isolates (which can make a line read differently from its bytes) and the Unicode line separators.
 */
const UNSAFE = /[\p{Cc}\p{Cs}\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/gu;
/** What JSON.stringify leaves as it is among those: it escapes C0 and lone surrogates already. */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeChar(c: string): string {
  const named = NAMED[c];
  if (named !== undefined) return named;
  const code = c.codePointAt(0)!;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/**
 * `text` with every unsafe character written as an escape (`\x1b`, `\n`, `\u{202e}`). With
 * `keepNewlines`, line feeds stay (multi-line messages and stacks keep their lines).
 */
export function escapeText(text: string, options: { readonly keepNewlines?: boolean } = {}): string {
  return text.replace(UNSAFE, (c) => (options.keepNewlines && c === '\n' ? c : escapeChar(c)));
}

/** JSON.stringify whose output holds no unsafe character either (still valid JSON: they become \uXXXX). */
export function safeJson(value: unknown, indent?: number): string | undefined {
  const json = JSON.stringify(value, null, indent) as string | undefined;
  if (json === undefined) return undefined;
  return json.replace(UNSAFE_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
