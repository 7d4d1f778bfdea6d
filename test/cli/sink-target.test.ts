// `floe run job.ts -- input.txt .` from a project folder: the sink target is the folder holding the job
// file, its input and the user's notes. The CLI must refuse it with a clear message and a non-zero exit
// code; the cluster runs nothing and every file stays.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { loadConfig } from '../../runtime/core/config.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../../runtime/local/embedded-dispatcher.js';
import { killLeftovers, processesOfCluster } from '../support/cluster-processes.js';

const root = mkdtempSync(join(tmpdir(), 'floe-cli-sink-'));
const clusterDir = join(root, 'cluster');
const project = join(root, 'project');
let cluster: EmbeddedDispatcher;

const files: Record<string, string> = {
  'job.ts': [
    "import { defineJob } from 'floe';",
    "export default defineJob('shout', (env, args) => {",
    "  const writeMode = args[2] === 'overwrite' ? 'overwrite' : 'no-overwrite';",
    '  env.readTextFile(args[0]!).map((line) => line.toUpperCase()).writeAsText(args[1]!, { writeMode });',
    '});',
    '',
  ].join('\n'),
  'input.txt': 'one line\nanother line\n',
  'notes.md': '# notes\nthe only copy of my notes\n',
};

beforeAll(async () => {
  mkdirSync(project);
  for (const [f, text] of Object.entries(files)) writeFileSync(join(project, f), text);
  cluster = await startEmbeddedDispatcher({ stateDir: clusterDir, config: loadConfig({ 'taskmanager.numberOfTaskSlots': 2 }), logger: silentLogger });
});

afterAll(async () => {
  await cluster?.close();
  killLeftovers(clusterDir);
  rmSync(root, { recursive: true, force: true });
});

async function floe(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env: { FLOE_HOME: join(root, 'no-local-cluster'), PATH: process.env['PATH'], FLOE_SECRET: cluster.secret },
    cwd: project,
    pollIntervalMs: 20,
  };
  return { code: await main(['--url', cluster.url, ...argv], io), stdout, stderr };
}

describe('floe run into a folder that holds other files', () => {
  it('exits non-zero naming the folder, runs no job, and leaves the job file, the input and the notes in place', async () => {
    const run = await floe('run', 'job.ts', '-p', '2', '--', 'input.txt', '.');
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(`'${project}'`);
    expect(run.stderr).toMatch(/notes\.md/);
    expect(run.stderr).toMatch(/writeMode/);
    expect(run.stderr).not.toMatch(/submitted job/);
    expect(readdirSync(project).sort()).toEqual(Object.keys(files).sort());
    for (const [f, text] of Object.entries(files)) expect(readFileSync(join(project, f), 'utf8')).toBe(text);
    const list = await floe('list', '--json');
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([]);
    expect(processesOfCluster(clusterDir)).toEqual([]);
  });

  it('writes a new folder, refuses to write it again, and replaces it with overwrite, keeping nothing of the old output', async () => {
    const first = await floe('run', 'job.ts', '-p', '2', '--', 'input.txt', 'out');
    expect(first.code, first.stderr).toBe(0);
    const out = join(project, 'out');
    expect(readdirSync(out).sort()).toEqual(['_SUCCESS', 'part-0', 'part-1']);
    expect(
      readdirSync(out)
        .filter((f) => f.startsWith('part-'))
        .map((f) => readFileSync(join(out, f), 'utf8'))
        .join('')
        .split('\n')
        .filter(Boolean)
        .sort(),
    ).toEqual(['ANOTHER LINE', 'ONE LINE']);

    const again = await floe('run', 'job.ts', '-p', '2', '--', 'input.txt', 'out');
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/holds the output of Floe job [0-9a-f]+ .*writeMode: 'overwrite'/);

    writeFileSync(join(project, 'input.txt'), 'a third line\n');
    const replaced = await floe('run', 'job.ts', '-p', '1', '--', 'input.txt', 'out', 'overwrite');
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['_SUCCESS', 'part-0']);
    expect(readFileSync(join(out, 'part-0'), 'utf8')).toBe('A THIRD LINE\n');
    // Nothing of either job's staging is left beside the output.
    expect(readdirSync(project).filter((f) => f.includes('staging'))).toEqual([]);
    writeFileSync(join(project, 'input.txt'), files['input.txt']!);
  }, 120_000);
});
