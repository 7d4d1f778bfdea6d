// Builds dist/ once before the suite: process-level tests start the built entry points.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  execFileSync(process.execPath, [fileURLToPath(new URL('../runtime/build.mjs', import.meta.url))], { stdio: 'inherit' });
}
