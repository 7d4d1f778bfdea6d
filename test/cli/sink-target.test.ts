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
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../../runtime/dispatcher/embedded-dispatcher.js';
import { killLeftovers, processesOfCluster } from '../support/cluster-processes.js';

const root = mkdtempSync(join(tmpdir(), 'floe-cli-sink-'));
const clusterDir = join(root, 'cluster');
const project = join(root, 'project');
let cluster: EmbeddedDispatcher;

const files: Record<string, string> = {
  'job.ts': [
    "import { defineJob } from 'floe';",
    "export default defineJob('shout', (env, args) => {",
    '  env.readTextFile(args[0]!).map((line) => line.toUpperCase()).writeAsText(args[1]!);',
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
});
