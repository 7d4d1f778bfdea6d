// What a user sees of `floe`'s command line, from the built CLI (dist/cli.js) as a shell runs it: each
// command's own --help page made from its declaration, the global page, and "did you mean" for a
// mistyped command or option, which exits 2 and does nothing.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { floeProcess } from '../support/floe-process.js';

const stateDir = mkdtempSync(join(tmpdir(), 'floe-help-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));
const floe = floeProcess(stateDir, { env: { PATH: process.env['PATH'], FLOE_HOME: stateDir } });

describe('floe <command> --help', () => {
  it("prints each command's synopsis, what it does and the options it takes, and no other command's", async () => {
    const list = await floe('list', '--help');
    expect(list.code).toBe(0);
    expect(list.stderr).toBe('');
    expect(list.stdout).toMatch(/^Usage: floe \[--dir <stateDir>\] list \[--json\]\n/);
    expect(list.stdout).toMatch(/\nList options:\n {2}--json {18}print the jobs as JSON\n/);
    expect(list.stdout).toContain('\n  --url <restUrl> ');
    expect(list.stdout).not.toContain('--parallelism');

    const logs = await floe('logs', '-h');
    expect(logs.stdout).toMatch(/^Usage: floe \[--dir <stateDir>\] logs <jobId> \[-f\|--follow\]\n/);
    expect(logs.stdout).toContain('\n  -f, --follow ');

    const dashboard = await floe('help', 'dashboard');
    expect(dashboard.stdout).toContain('\n  --job <jobId> ');
    expect(dashboard.stdout).toContain('\n  --sign-out-everywhere ');

    // A command that never talks to a deployed cluster lists no --url; every page lists --dir.
    const init = await floe('init', '--help');
    expect(init.stdout).not.toContain('--url');
    expect(init.stdout).not.toContain(' options:\n');
    expect(init.stdout).toContain('\n  --dir <stateDir> ');
    const cluster = await floe('cluster', 'start', '--help');
    expect(cluster.stdout).toMatch(/\nCluster options:\n {2}-D key=value {12}/);
    expect(cluster.stdout).not.toContain('--url');

    // An option too wide for the column has its help on the next line, never run into its name.
    const run = await floe('run', '--help');
    expect(run.stdout).toMatch(/\n {2}--allow-non-restored-state\n {26}with --from-savepoint: skip state/);
  });

  it('lists every command on the global page', async () => {
    const global = await floe('--help');
    expect(global.code).toBe(0);
    expect(global.stdout).toMatch(/^Usage: floe \[--dir <stateDir>\] <command>\n\nCommands:\n/);
    for (const command of ['init', 'check', 'run', 'list', 'status', 'cancel', 'logs', 'dashboard', 'cluster', 'example']) {
      expect(global.stdout).toMatch(new RegExp(`\\n {2}${command} `));
    }
    expect((await floe()).stdout).toBe(global.stdout);
  });
});

describe('did you mean', () => {
  it('names the nearest command for a mistyped one, exits 2 and does nothing', async () => {
    const typo = await floe('lsit');
    expect(typo).toEqual({ code: 2, stdout: '', stderr: "floe: unknown command 'lsit': did you mean 'list'?\nrun 'floe --help' for usage\n" });
    const far = await floe('deploy');
    expect(far.code).toBe(2);
    expect(far.stderr).toContain(
      "unknown command 'deploy' (commands: init, check, run, list, status, cancel, savepoint, stop, logs, dashboard, cluster, example)",
    );
    expect((await floe('clutser', 'start')).stderr).toContain("did you mean 'cluster'?");
    expect(existsSync(join(stateDir, 'cluster.json'))).toBe(false);
  });

  it("names the nearest of the command's options for a mistyped one, exits 2 and does nothing", async () => {
    const typo = await floe('run', 'job.ts', '--detatched');
    expect(typo).toEqual({ code: 2, stdout: '', stderr: "floe: unknown option '--detatched': did you mean '--detached'?\nrun 'floe --help' for usage\n" });
    expect((await floe('logs', 'abc', '--folow')).stderr).toContain("unknown option '--folow': did you mean '--follow'?");
    expect((await floe('list', '--jsno')).stderr).toContain("did you mean '--json'?");
    const far = await floe('list', '--frobnicate');
    expect(far.code).toBe(2);
    expect(far.stderr).toContain("unknown option '--frobnicate'\n");
    expect((await floe('cluster', 'strat')).stderr).toContain("unknown cluster action 'strat': did you mean 'start'?");
    expect((await floe('example', 'wordcont')).stderr).toContain("unknown example 'wordcont': did you mean 'wordcount'?");
    expect(readdirSync(stateDir)).toEqual([]);
  });
});
