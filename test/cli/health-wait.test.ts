// How the CLI tells a stopped cluster from a slow one: "down" (no cluster.json, its pid gone, nothing
// listening) is started afresh; "busy" (pid alive, socket accepting, no answer yet) is waited for and
// never replaced by a second cluster.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { probeCluster, readClusterInfo } from '../../runtime/cli/cluster.js';
import { CliHarness, FAKE_DISPATCHER, waitUntil } from './cli-harness.js';

const harness = new CliHarness('floe-cli-health-');
afterAll(() => harness.cleanup());

function register(stateDir: string, pid: number, port: number): void {
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(join(stateDir, 'cluster.json'), JSON.stringify({ pid, restUrl: `http://127.0.0.1:${port}`, secret: 's', startedAtMs: 0 }));
}

function listen(server: Server | HttpServer): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

describe('probing the registered cluster', () => {
  it('is down without cluster.json, when its pid is gone, and when nothing listens at its URL', async () => {
    const dir = join(harness.root, 'probe-down');
    expect(await probeCluster(dir)).toMatchObject({ state: 'down', reason: expect.stringContaining('no Dispatcher is registered') });
    register(dir, 2 ** 22 + 777, 1);
    expect(await probeCluster(dir)).toMatchObject({ state: 'down', reason: expect.stringContaining('has exited') });
    const closed = createServer();
    const port = await listen(closed);
    await new Promise((r) => closed.close(r));
    // a live pid (this test's) whose port refuses connections: the Dispatcher that registered is gone
    register(dir, process.pid, port);
    expect(await probeCluster(dir)).toMatchObject({
      state: 'down',
      reason: `nothing listens at http://127.0.0.1:${port}, where the Dispatcher (pid ${process.pid}) served`,
    });
  });

  it('is busy while its socket accepts but nothing answers, and unresponsive when something else answers', async () => {
    const dir = join(harness.root, 'probe-busy');
    const sockets = new Set<Socket>();
    const silent = createServer((s) => sockets.add(s));
    register(dir, process.pid, await listen(silent));
    try {
      expect(await probeCluster(dir, 300)).toMatchObject({ state: 'busy', cause: 'GET /health had no answer within 300 ms' });
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
    const other = createHttpServer((_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>not here</h1>'));
    register(dir, process.pid, await listen(other));
    try {
      expect(await probeCluster(dir)).toMatchObject({ state: 'unresponsive', cause: expect.stringContaining('404') });
    } finally {
      await new Promise((r) => other.close(r));
    }
  });
});

describe('floe run against a busy Dispatcher', () => {
  it('waits for it, saying so, and never starts a second cluster beside it', async () => {
    const job = join(harness.root, 'job.ts');
    writeFileSync(job, "import { defineJob } from 'floe';\nexport default defineJob('patient', (env) => { env.fromSequence(1, 3).collect(); });\n");
    mkdirSync(harness.stateDir, { recursive: true });
    // A Dispatcher that registers and listens, then answers nothing while the hold file exists (as
    // under the load that made /health take over 2 s).
    const hold = join(harness.root, 'hold');
    writeFileSync(hold, '');
    const dispatcher = spawn(process.execPath, [FAKE_DISPATCHER], {
      env: { FLOE_STATE_DIR: harness.stateDir, FAKE_DISPATCHER_HOLD_FILE: hold, PATH: process.env['PATH'] },
      stdio: 'ignore',
    });
    harness.addPid(dispatcher.pid!);
    await waitUntil('the Dispatcher to register', () => existsSync(join(harness.stateDir, 'cluster.json')));
    const pid = readClusterInfo(harness.stateDir)!.pid;
    expect(pid).toBe(dispatcher.pid);

    // A short wait runs out: it says the cluster is there but busy, and starts nothing.
    const impatient = await harness.cli(['run', job], { busyWaitMs: 1_000 });
    expect(impatient.stderr).toMatch(/the cluster at http:\/\/127\.0\.0\.1:\d+ \(pid \d+\) is running but busy \(.*\): waiting up to 1 s for it to answer…/);
    expect(impatient.stderr).toMatch(
      /is running but did not answer within 1 s .* No second cluster was started: retry when it is less busy, or stop it with 'floe cluster stop'/,
    );
    expect(impatient.stderr).not.toContain('starting one');
    expect(impatient.code).toBe(1);

    // The default wait outlasts the busy spell: the job runs on the same Dispatcher once it answers.
    let waiting = false;
    const patient = harness.cli(['run', job, '--no-typecheck'], { onStderr: (text) => (waiting ||= text.includes('waiting up to 60 s for it to answer')) });
    await waitUntil('floe run to wait for the busy Dispatcher', () => waiting, 60_000);
    rmSync(hold);
    const run = await patient;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('no cluster is running');
    expect(run.stderr).toMatch(/job 'patient' \([0-9a-f]{32}\) FINISHED/);
    expect(JSON.parse(readFileSync(join(harness.stateDir, 'cluster.json'), 'utf8'))).toMatchObject({ pid });
    expect(await harness.cli(['cluster', 'stop'])).toMatchObject({ code: 0, stdout: `cluster stopped (pid ${pid})\n` });
  });
});
