import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseArgs, resolveStateDir, UsageError } from '../../runtime/cli/args.js';

const usageError = (argv: string[]): string => {
  try {
    parseArgs(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error(`expected a usage error for ${argv.join(' ')}`);
};

describe('parseArgs', () => {
  it('parses run with its options, -D pairs and job args after --', () => {
    expect(
      parseArgs([
        '--dir',
        'state',
        'run',
        'job.ts',
        '-p',
        '4',
        '--detached',
        '-D',
        'heartbeat.timeout=5000',
        '-Drest.port=0',
        '--export=other',
        '--',
        'in.txt',
        '--out',
        'x',
      ]),
    ).toEqual({
      stateDir: 'state',
      command: {
        kind: 'run',
        jobFile: 'job.ts',
        parallelism: 4,
        detached: true,
        config: { 'heartbeat.timeout': '5000', 'rest.port': '0' },
        exportName: 'other',
        jobArgs: ['in.txt', '--out', 'x'],
        typecheck: true,
        useCache: true,
        verbose: false,
      },
    });
    expect(parseArgs(['run', 'job.ts'])).toEqual({
      command: {
        kind: 'run',
        jobFile: 'job.ts',
        detached: false,
        config: {},
        exportName: 'default',
        jobArgs: [],
        typecheck: true,
        useCache: true,
        verbose: false,
      },
    });
    expect(parseArgs(['run', 'job.ts', '--no-cache', '--verbose']).command).toMatchObject({ useCache: false, verbose: true });
    expect(parseArgs(['run', 'job.ts', '--no-typecheck', '--max-records', '0']).command).toMatchObject({ typecheck: false, maxRecords: 0 });
    expect(parseArgs(['run', 'job.ts', '--max-records=250000']).command).toMatchObject({ typecheck: true, maxRecords: 250_000 });
    expect(parseArgs(['run', '--parallelism=3', 'job.ts', '--dir=/s']).command).toMatchObject({ parallelism: 3 });
  });

  it('parses dashboard: a link, for a job, or every session revoked, and refuses what does not go with it', () => {
    expect(parseArgs(['dashboard']).command).toEqual({ kind: 'dashboard', signOutEverywhere: false });
    expect(parseArgs(['dashboard', '--job', 'job-1', '--url', 'https://abc.execute-api.eu-west-1.amazonaws.com'])).toEqual({
      url: 'https://abc.execute-api.eu-west-1.amazonaws.com',
      command: { kind: 'dashboard', jobId: 'job-1', signOutEverywhere: false },
    });
    expect(parseArgs(['dashboard', '--sign-out-everywhere', '--aws-iam']).command).toEqual({ kind: 'dashboard', signOutEverywhere: true });
    expect(() => parseArgs(['dashboard', '--job', 'a', '--sign-out-everywhere'])).toThrow(/--job and --sign-out-everywhere do not go together/);
    expect(() => parseArgs(['dashboard', '--job='])).toThrow(/--job needs a job id/);
    expect(() => parseArgs(['dashboard', 'extra'])).toThrow(/unexpected argument 'extra' for 'dashboard'/);
    expect(() => parseArgs(['list', '--sign-out-everywhere'])).toThrow(/option --sign-out-everywhere does not apply to 'list'/);
  });

  it('parses the other commands', () => {
    expect(parseArgs(['init']).command).toEqual({ kind: 'init' });
    expect(parseArgs(['init', 'my-job']).command).toEqual({ kind: 'init', dir: 'my-job' });
    expect(parseArgs(['list', '--json']).command).toEqual({ kind: 'list', json: true });
    expect(parseArgs(['status', 'abc']).command).toEqual({ kind: 'status', jobId: 'abc', json: false });
    expect(parseArgs(['cancel', 'abc']).command).toEqual({ kind: 'cancel', jobId: 'abc' });
    expect(parseArgs(['cluster', 'status', '--json']).command).toEqual({ kind: 'cluster', action: 'status', json: true, config: {} });
    expect(parseArgs(['cluster', 'start', '-D', 'taskmanager.numberOfTaskSlots=4']).command).toEqual({
      kind: 'cluster',
      action: 'start',
      json: false,
      config: { 'taskmanager.numberOfTaskSlots': '4' },
    });
    expect(parseArgs(['example']).command).toEqual({ kind: 'example', name: 'wordcount' });
    expect(parseArgs(['example', 'log-levels']).command).toEqual({ kind: 'example', name: 'log-levels' });
    expect(() => parseArgs(['example', 'nope'])).toThrow(/unknown example 'nope' \(examples: wordcount, log-levels\)/);
    expect(parseArgs([]).command).toEqual({ kind: 'help' });
    expect(parseArgs(['run', '--help']).command).toEqual({ kind: 'help', topic: 'run' });
    expect(parseArgs(['help', 'logs']).command).toEqual({ kind: 'help', topic: 'logs' });
    expect(parseArgs(['help', 'toString']).command).toEqual({ kind: 'help' });
    expect(parseArgs(['check', 'job.ts']).command).toEqual({ kind: 'check', jobFile: 'job.ts' });
    expect(parseArgs(['--version']).command).toEqual({ kind: 'version' });
  });

  it('parses savepoint, stop and run --from-savepoint; a relative path is made absolute, a URI stays', () => {
    const here = (p: string): string => resolve(p);
    expect(parseArgs(['savepoint', 'abc']).command).toEqual({ kind: 'savepoint', jobId: 'abc' });
    expect(parseArgs(['savepoint', 'abc', '/sp']).command).toEqual({ kind: 'savepoint', jobId: 'abc', targetDirectory: '/sp' });
    expect(parseArgs(['savepoint', 'abc', 'sp']).command).toEqual({ kind: 'savepoint', jobId: 'abc', targetDirectory: here('sp') });
    expect(parseArgs(['stop', 'abc', '--savepoint', 's3://b/sp']).command).toEqual({ kind: 'stop', jobId: 'abc', drain: false, targetDirectory: 's3://b/sp' });
    expect(parseArgs(['stop', 'abc', '--drain']).command).toEqual({ kind: 'stop', jobId: 'abc', drain: true });
    const run = parseArgs(['run', 'job.ts', '--from-savepoint', '/sp/savepoint-abcdef-1', '--allow-non-restored-state']).command;
    expect(run).toMatchObject({ kind: 'run', savepointRestore: { path: '/sp/savepoint-abcdef-1', allowNonRestoredState: true } });
    expect(parseArgs(['run', 'job.ts', '--from-savepoint', 'sp']).command).toMatchObject({
      savepointRestore: { path: here('sp'), allowNonRestoredState: false },
    });
    expect(usageError(['run', 'job.ts', '--allow-non-restored-state'])).toBe('--allow-non-restored-state applies only with --from-savepoint <path>');
    expect(usageError(['savepoint'])).toBe("'savepoint' needs a job id: floe savepoint <jobId> [dir]");
    expect(usageError(['stop', 'a', 'b', 'c'])).toBe("unexpected argument 'c' for 'stop'");
    expect(usageError(['savepoint', 'abc', '--drain'])).toBe("option --drain does not apply to 'savepoint'");
  });

  it('explains what is wrong with a command line', () => {
    expect(usageError(['deploy'])).toMatch(/unknown command 'deploy'/);
    expect(usageError(['run'])).toMatch(/'run' needs a job file/);
    expect(usageError(['run', 'job.ts', 'in.txt'])).toMatch(/unexpected argument 'in.txt': pass job arguments after --, e.g. floe run job.ts -- in.txt/);
    expect(usageError(['run', 'job.ts', '-p', 'zero'])).toMatch(/--parallelism needs an integer >= 1, found 'zero'/);
    expect(usageError(['run', 'job.ts', '-p', '0'])).toMatch(/found '0'/);
    expect(usageError(['run', 'job.ts', '-D', 'novalue'])).toMatch(/-D needs key=value/);
    expect(usageError(['run', 'job.ts', '--parallelism'])).toMatch(/--parallelism needs a value/);
    expect(usageError(['list', '--detached'])).toMatch(/option --detached does not apply to 'list'/);
    expect(usageError(['list', '--frobnicate'])).toMatch(/unknown option '--frobnicate'/);
    expect(usageError(['status'])).toMatch(/needs a job id/);
    expect(usageError(['cluster', 'restart'])).toMatch(/unknown cluster action 'restart'/);
    expect(usageError(['cluster', 'stop', '--json'])).toMatch(/--json applies to 'cluster status' only/);
    expect(usageError(['cancel', 'a', '--', 'x'])).toMatch(/takes no job arguments/);
    expect(usageError(['list', '--json=yes'])).toMatch(/takes no value/);
    expect(usageError(['run', 'job.ts', '--max-records', '-1'])).toMatch(/--max-records needs an integer >= 0, found '-1'/);
    expect(usageError(['run', 'job.ts', '--max-records', '1e3'])).toMatch(/found '1e3'/);
    expect(usageError(['list', '--no-typecheck'])).toMatch(/option --no-typecheck does not apply to 'list'/);
    expect(usageError(['init', 'a', 'b'])).toMatch(/unexpected argument 'b' for 'init'/);
    expect(usageError(['cluster', 'start', '--aws-iam'])).toMatch(/option --aws-iam does not apply to 'cluster'/);
  });

  it('says which command or option a mistyped one most likely meant', () => {
    expect(usageError(['lsit'])).toBe("unknown command 'lsit': did you mean 'list'?");
    expect(usageError(['stauts', 'abc'])).toBe("unknown command 'stauts': did you mean 'status'?");
    expect(usageError(['deploy'])).toBe(
      "unknown command 'deploy' (commands: init, check, run, list, status, cancel, savepoint, stop, logs, dashboard, cluster, example)",
    );
    expect(usageError(['run', 'job.ts', '--paralelism', '2'])).toBe("unknown option '--paralelism': did you mean '--parallelism'?");
    expect(usageError(['logs', 'abc', '--follwo'])).toBe("unknown option '--follwo': did you mean '--follow'?");
    // Only the command's own options are suggested: --follow is no option of 'list'.
    expect(usageError(['list', '--follwo'])).toBe("unknown option '--follwo'");
    expect(usageError(['list', '-x'])).toBe("unknown option '-x'");
    expect(usageError(['cluster', 'stpo'])).toBe("unknown cluster action 'stpo': did you mean 'stop'?");
    expect(usageError(['example', 'log-level'])).toBe("unknown example 'log-level': did you mean 'log-levels'?");
  });

  it('reads option values as written: attached to a short option (-Da=1, -p3), after =, or the next argument even when it starts with -', () => {
    expect(parseArgs(['cluster', 'start', '-Da=1', '-D', 'b=2']).command).toMatchObject({ config: { a: '1', b: '2' } });
    expect(parseArgs(['run', 'job.ts', '-p', '2', '-p3']).command).toMatchObject({ parallelism: 3 });
    expect(usageError(['run', 'job.ts', '-p', '--'])).toBe('option -p needs a value');
    expect(usageError(['run', 'job.ts', '--parallelism=-2'])).toBe("--parallelism needs an integer >= 1, found '-2'");
    expect(usageError(['--D', 'a=1', 'run', 'job.ts'])).toMatch(/^unknown option '--D'/);
    expect(parseArgs(['run', 'job.ts', '--', '--help', '-p']).command).toMatchObject({ kind: 'run', jobArgs: ['--help', '-p'] });
  });

  it('takes --aws-iam beside --url for the commands that talk to a cluster', () => {
    expect(parseArgs(['list', '--url', 'https://floe.example.com', '--aws-iam'])).toMatchObject({
      url: 'https://floe.example.com',
      awsIam: true,
      command: { kind: 'list' },
    });
    expect(parseArgs(['list', '--url', 'https://floe.example.com'])).not.toHaveProperty('awsIam');
  });
});

describe('resolveStateDir', () => {
  it('takes --dir, else FLOE_HOME, else ~/.floe, relative to the cwd', () => {
    expect(resolveStateDir('rel', { FLOE_HOME: '/h' }, '/cwd', '/home/u')).toBe('/cwd/rel');
    expect(resolveStateDir(undefined, { FLOE_HOME: '/h' }, '/cwd', '/home/u')).toBe('/h');
    expect(resolveStateDir(undefined, { FLOE_HOME: '' }, '/cwd', '/home/u')).toBe('/home/u/.floe');
    expect(resolveStateDir(undefined, {}, '/cwd', '/home/u')).toBe('/home/u/.floe');
  });
});
