// Builds the dashboard into <outDir>: index.html, assets/app-<hash>.js and .css (content-hashed, no source
// maps), and manifest.json with each file's size raw and gzipped. `node runtime/dashboard/build.mjs <outDir>`
// does the same and prints the sizes.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';

const here = dirname(fileURLToPath(import.meta.url));

/**
 * @param {{ outDir: string, minify?: boolean }} options
 * @returns {Promise<{ files: { path: string, bytes: number, gzipBytes: number }[], totalBytes: number, totalGzipBytes: number }>}
 */
export async function buildDashboard({ outDir, minify = true }) {
  const out = resolve(outDir);
  const assets = join(out, 'assets');
  // Hashed names never collide, so old builds would pile up here.
  rmSync(assets, { recursive: true, force: true });
  mkdirSync(assets, { recursive: true });

  const result = await build({
    absWorkingDir: here,
    entryPoints: { app: join(here, 'app/main.tsx') },
    outdir: assets,
    entryNames: '[name]-[hash]',
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2020',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify,
    sourcemap: false,
    legalComments: 'eof',
    charset: 'utf8',
    metafile: true,
    logLevel: 'warning',
  });

  const outputs = Object.keys(result.metafile.outputs).map((p) => resolve(here, p));
  const script = outputs.find((p) => p.endsWith('.js'));
  const style = outputs.find((p) => p.endsWith('.css'));
  if (!script || !style) throw new Error(`the dashboard build should write one .js and one .css file; it wrote ${outputs.join(', ') || 'nothing'}`);

  // Relative URLs: the page works wherever the Dispatcher serves it, under a path prefix too.
  const url = (file) => relative(out, file).split('\\').join('/');
  writeFileSync(
    join(out, 'index.html'),
    [
      '<!doctype html>',
      '<html lang="en">',
      '<head>',
      '<meta charset="utf-8">',
      '<meta name="viewport" content="width=device-width, initial-scale=1">',
      '<meta name="color-scheme" content="light dark">',
      '<meta name="referrer" content="no-referrer">',
      '<title>Floe</title>',
      `<link rel="icon" href="${FAVICON}">`,
      `<link rel="stylesheet" href="${url(style)}">`,
      `<script type="module" src="${url(script)}"></script>`,
      '</head>',
      '<body>',
      '<div id="app"></div>',
      '<noscript>The Floe dashboard needs JavaScript.</noscript>',
      '</body>',
      '</html>',
      '',
    ].join('\n'),
  );

  const files = [join(out, 'index.html'), script, style].map((file) => {
    const bytes = readFileSync(file);
    return { path: url(file), bytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length };
  });
  const manifest = {
    files,
    totalBytes: files.reduce((n, f) => n + f.bytes, 0),
    totalGzipBytes: files.reduce((n, f) => n + f.gzipBytes, 0),
  };
  writeFileSync(join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/** Three waves, as a data URL: the CSP allows `img-src data:`, and the browser asks for no /favicon.ico. */
const FAVICON = `data:image/svg+xml,${encodeURIComponent(
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#2f7cf0" stroke-width="2.2" stroke-linecap="round"><path d="M3 7c3-3 6 3 9 0s6-3 9 0M3 12c3-3 6 3 9 0s6-3 9 0M3 17c3-3 6 3 9 0s6-3 9 0"/></svg>',
)}`;

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const outDir = process.argv[2];
  if (!outDir) {
    console.error('usage: node runtime/dashboard/build.mjs <outDir>');
    process.exit(2);
  }
  const manifest = await buildDashboard({ outDir });
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`.padStart(9);
  for (const f of manifest.files) console.log(`${f.path.padEnd(32)} ${kb(f.bytes)} ${kb(f.gzipBytes)} gzip`);
  console.log(`${'total'.padEnd(32)} ${kb(manifest.totalBytes)} ${kb(manifest.totalGzipBytes)} gzip`);
}
