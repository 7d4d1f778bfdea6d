// Reads the names a user-code library exports without running it: what the Dispatcher checks a
// JobGraph's function references against. Kept apart from library.ts so the Dispatcher (a Lambda
// function on AWS) bundles neither esbuild nor anything that evaluates user code.
import { init as initLexer, parse as parseModule } from 'es-module-lexer';
import { InvalidRequestError } from '../core/errors.js';

export async function listLibraryExports(code: Uint8Array): Promise<string[]> {
  await initLexer;
  const source = Buffer.from(code.buffer, code.byteOffset, code.byteLength).toString('utf8');
  try {
    const [, exports] = parseModule(source);
    return exports.map((e) => e.n);
  } catch (e) {
    throw new InvalidRequestError(`the library is not a valid ES module: ${(e as Error).message}; submit the output of bundleJobFile`, { cause: e });
  }
}
