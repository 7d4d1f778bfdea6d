// The file paths a JobGraph names (text sources and sinks): absolute and normalised, so that the path a
// user reads in a message is the one a task opens, and so that no '..' can lead a sink out of the folder
// it names. The client resolves and normalises (runtime/api/translate.ts); validation refuses the rest.
import { posix, win32 } from 'node:path';

const S3_PREFIX = 's3://';

export const isS3Uri = (path: string): boolean => path.startsWith(S3_PREFIX);

const isWindowsAbsolute = (p: string): boolean => /^[A-Za-z]:[\\/]/.test(p) || p.startsWith('\\\\');

/** The normal form of an absolute local path or an s3:// URI: no '.', no empty segments, no trailing separator. */
export function normalisePath(path: string): string {
  if (isS3Uri(path)) {
    const rest = path
      .slice(S3_PREFIX.length)
      .split('/')
      .filter((s) => s !== '' && s !== '.');
    return S3_PREFIX + rest.join('/');
  }
  const flavour = isWindowsAbsolute(path) ? win32 : posix;
  const n = flavour.normalize(path);
  const root = flavour.parse(n).root;
  return n.length > root.length ? n.replace(/[\\/]+$/, '') : n;
}

/** The segments of a path, without its root or scheme. */
function segmentsOf(path: string): string[] {
  if (isS3Uri(path)) return path.slice(S3_PREFIX.length).split('/');
  return path.split(isWindowsAbsolute(path) ? /[\\/]/ : '/').slice(1);
}

/**
 * What is wrong with a path a submitted JobGraph names, or undefined when it is fine: `at` names the
 * field in the message.
 */
export function pathProblem(path: string, at: string, allowS3: boolean): string | undefined {
  if (isS3Uri(path)) {
    if (!allowS3) return undefined;
  } else if (!path.startsWith('/') && !isWindowsAbsolute(path)) {
    return `${at} must be absolute (tasks run in other processes), found '${path}'`;
  }
  if (segmentsOf(path).includes('..')) {
    return `${at} holds '..' segments, which could lead out of the folder it names (found '${path}'); submit the path without them`;
  }
  const normal = normalisePath(path);
  if (normal !== path) return `${at} must be normalised, found '${path}' (its normal form is '${normal}')`;
  return undefined;
}

/** '/', 'C:\\' and the like: no sink may name one as its folder. */
export function isFilesystemRoot(path: string): boolean {
  if (isS3Uri(path)) return false;
  const flavour = isWindowsAbsolute(path) ? win32 : posix;
  return flavour.parse(path).root === path;
}

/** Whether `inner` lies inside `outer` (or is it). Both normalised. */
export function isWithin(inner: string, outer: string): boolean {
  if (inner === outer) return true;
  const sep = isS3Uri(outer) || !isWindowsAbsolute(outer) ? '/' : '\\';
  return inner.startsWith(outer.endsWith(sep) ? outer : outer + sep);
}
