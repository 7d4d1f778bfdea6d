// Command-line parsing for `floe`: pure, so every rule is unit-tested.
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { FloeError } from '../core/errors.js';
import { FloeEnv } from '../core/floe-env.js';

/** The command line is wrong: exit code 2 and a pointer to the usage text. */
export class UsageError extends FloeError {
  constructor(message: string) {
    super('USAGE', message);
  }
}

export type ClusterAction = 'start' | 'stop' | 'status';

export const EXAMPLES = ['wordcount', 'log-levels'] as const;
export type ExampleName = (typeof EXAMPLES)[number];

export type Command =
  | {
      readonly kind: 'run';
      readonly jobFile: string;
      readonly parallelism?: number;
      readonly detached: boolean;
      /** -D key=value options, validated later against the config options. */
      readonly config: Readonly<Record<string, string>>;
      /** The job file's export that defines the job. */
      readonly exportName: string;
      readonly jobArgs: readonly string[];
      /** Type-check the job file before bundling it (off with --no-typecheck). */
      readonly typecheck: boolean;
      /** Records kept by a collect sink that sets no maxRecords (--max-records). */
      readonly maxRecords?: number;
      /** Use the cache of bundled libraries (off with --no-cache). */
      readonly useCache: boolean;
      /** Print how long each step took (--verbose). */
      readonly verbose: boolean;
    }
  | { readonly kind: 'init'; readonly dir?: string }
  | { readonly kind: 'list'; readonly json: boolean }
  | { readonly kind: 'status'; readonly jobId: string; readonly json: boolean }
  | { readonly kind: 'cancel'; readonly jobId: string }
  | { readonly kind: 'logs'; readonly jobId: string; readonly follow: boolean }
  /** A one-time dashboard login link (for a job's page with `jobId`), or every session revoked. */
  | { readonly kind: 'dashboard'; readonly jobId?: string; readonly signOutEverywhere: boolean }
  | { readonly kind: 'cluster'; readonly action: ClusterAction; readonly json: boolean; readonly config: Readonly<Record<string, string>> }
  | { readonly kind: 'example'; readonly name: ExampleName }
  | { readonly kind: 'check'; readonly jobFile: string }
  /** The global page, or one command's page (`floe run --help`, `floe help run`). */
  | { readonly kind: 'help'; readonly topic?: HelpTopic }
  | { readonly kind: 'version' };

export interface ParsedArgs {
  /** From --dir; undefined means the default (see resolveStateDir). */
  readonly stateDir?: string;
  /** From --url: a running cluster's REST endpoint (e.g. a deployed one); no local cluster is used. */
  readonly url?: string;
  /** From --aws-iam: sign requests to the --url cluster with AWS credentials (SigV4) instead of sending its secret. */
  readonly awsIam?: boolean;
  readonly command: Command;
}

/** What `floe <command> --help` prints for each command: its synopsis, what it does, and its own options. */
const COMMAND_HELP = {
  init: {
    synopsis: 'init [dir]',
    summary: `write a starter job (job.ts), its sample input (input.txt) and a
tsconfig.json that type-checks it against this Floe's API (floe check
job.ts), in dir (default: here); never overwrites a file`,
    options: '',
  },
  check: {
    synopsis: 'check <job.ts>',
    summary: `type-check a job file as floe run does (the nearest tsconfig.json above
it, 'floe' resolving to this Floe's API) and print its errors; submits
nothing, exits 1 on errors`,
    options: '',
  },
  run: {
    synopsis: `run <job.ts> [-p|--parallelism N] [--detached] [--export NAME] [--max-records N] [--no-typecheck]
             [--no-cache] [--verbose] [-D key=value]... [-- job args...]`,
    summary: 'type-check and bundle the job file, submit it, and follow it until it ends',
    options: `Run options:
  -p, --parallelism N     parallelism of operators that set none
  -d, --detached          submit, print the job id and return without following the job
  --export NAME           the job file's export that defines the job (default: default)
  --max-records N         records a collect() sink keeps when it sets no maxRecords (default 10000)
  --no-typecheck          bundle the job without type-checking it first
  --no-cache              bundle the job again even if its files did not change since the last run
                          (bundles are kept in <stateDir>/cache/libraries; delete it to clear them)
  --verbose               print how long each step took (bundle cache, type-check, submit, wait)
  -D key=value            a config option for a cluster this command starts
  -- args...              the job's arguments (the builder's args). Paths that readTextFile and
                          writeAsText get are relative to the folder floe runs in, not the job file's
  Ctrl-C while a job is followed asks whether to cancel the job or detach from it (it keeps running);
  a second Ctrl-C, or no terminal to ask on, detaches (exit code 130).
`,
  },
  list: { synopsis: 'list [--json]', summary: `list the cluster's jobs (from the stored records when the cluster is stopped)`, options: '' },
  status: {
    synopsis: 'status <jobId> [--json]',
    summary: `show a job's state, tasks and latest exceptions (stored records,
likewise); a job id may be any prefix that names one job`,
    options: '',
  },
  cancel: { synopsis: 'cancel <jobId>', summary: 'cancel a job (its id, or a prefix that names one job)', options: '' },
  logs: {
    synopsis: 'logs <jobId> [-f|--follow]',
    summary: `show the job's log lines from its JobManager and TaskExecutors (and the
Dispatcher's lines about it), merged by time; --follow keeps printing new
lines until the job ends. With --url: from CloudWatch Logs, the group in
$${FloeEnv.LOG_GROUP} (the stack's TaskLogGroup output), with AWS credentials`,
    options: '',
  },
  dashboard: {
    synopsis: 'dashboard [--job <jobId>] [--sign-out-everywhere]',
    summary: `print a one-time link that signs a browser in to the cluster's dashboard
(it works once, within ten minutes; with --job it opens that job's page).
With --url to a deployed cluster the request is signed with your AWS
credentials, which need execute-api:Invoke on the API; the link is the only
way in. --sign-out-everywhere ends every dashboard session instead (on AWS;
a local cluster's sessions are signed with its secret and end after 12 hours)`,
    options: '',
  },
  cluster: {
    synopsis: 'cluster start [-D key=value]... | stop | status [--json]',
    summary: 'manage the local cluster (its Dispatcher runs in the background)',
    options: '',
  },
  example: {
    synopsis: 'example [wordcount | log-levels]',
    summary: `generate sample input under <stateDir>/example and run
examples/<name>.ts on a local cluster (default: wordcount, and the state dir
the checkout's .floe unless --dir or $${FloeEnv.HOME} says otherwise), checking
its result against a direct count`,
    options: '',
  },
} as const satisfies Record<string, { synopsis: string; summary: string; options: string }>;

export type HelpTopic = keyof typeof COMMAND_HELP;

const SHARED_OPTIONS = `Options:
  --dir <stateDir>        the cluster's state folder (default: $${FloeEnv.HOME}, else ~/.floe)
  --url <restUrl>         use the cluster serving at this URL (e.g. the ApiUrl of a deployed one;
                          default: $${FloeEnv.URL}) instead of a local one; its secret comes from $${FloeEnv.SECRET},
                          except for an execute-api URL (a deployed cluster): requests to it are signed
                          with your AWS credentials (SigV4; the SDK's chain: environment, profile, SSO,
                          role), which need execute-api:Invoke on the API
  --aws-iam               sign requests to the --url cluster with AWS credentials, whatever its URL
                          (default: $${FloeEnv.AWS_IAM}=1); the region is the URL's, else $AWS_REGION
  -h, --help              show this text (floe <command> --help: that command's own)
  --version               show Floe's version
`;

const indent = (text: string, by: number): string => text.split('\n').map((l) => ' '.repeat(by) + l).join('\n');

/** A command's line on the global page: the synopsis, and the summary beside it or under it. */
function commandLine(spec: { synopsis: string; summary: string }): string {
  const first = `  ${spec.synopsis}`;
  if (!spec.synopsis.includes('\n') && first.length < 26 && !spec.summary.includes('\n')) return `${first.padEnd(26)}${spec.summary}\n`;
  if (!spec.synopsis.includes('\n') && first.length < 26) {
    const [head, ...rest] = spec.summary.split('\n');
    return `${first.padEnd(26)}${head}\n${rest.length > 0 ? `${indent(rest.join('\n'), 26)}\n` : ''}`;
  }
  return `${first}\n${indent(spec.summary, 26)}\n`;
}

export const USAGE = `Usage: floe [--dir <stateDir>] <command>

Commands:
${Object.values(COMMAND_HELP).map(commandLine).join('')}
${COMMAND_HELP.run.options}
${SHARED_OPTIONS}`;

/** `floe <command> --help` (or `floe help <command>`): that command's synopsis, what it does, its options. */
export function commandUsage(topic: HelpTopic): string {
  const spec: { synopsis: string; summary: string; options: string } = COMMAND_HELP[topic];
  return `Usage: floe [--dir <stateDir>] ${spec.synopsis}\n\n${indent(spec.summary, 2)}\n\n${spec.options === '' ? '' : `${spec.options}\n`}${SHARED_OPTIONS}`;
}

interface OptionSpec {
  readonly takesValue: boolean;
  readonly commands: readonly Command['kind'][] | 'all';
}

const OPTIONS: Record<string, OptionSpec> = {
  '--dir': { takesValue: true, commands: 'all' },
  '--url': { takesValue: true, commands: ['run', 'list', 'status', 'cancel', 'logs', 'dashboard'] },
  '--aws-iam': { takesValue: false, commands: ['run', 'list', 'status', 'cancel', 'logs', 'dashboard'] },
  '--job': { takesValue: true, commands: ['dashboard'] },
  '--sign-out-everywhere': { takesValue: false, commands: ['dashboard'] },
  '--follow': { takesValue: false, commands: ['logs'] },
  '-f': { takesValue: false, commands: ['logs'] },
  '--parallelism': { takesValue: true, commands: ['run'] },
  '-p': { takesValue: true, commands: ['run'] },
  '--detached': { takesValue: false, commands: ['run'] },
  '-d': { takesValue: false, commands: ['run'] },
  '--export': { takesValue: true, commands: ['run'] },
  '--max-records': { takesValue: true, commands: ['run'] },
  '--no-typecheck': { takesValue: false, commands: ['run'] },
  '--no-cache': { takesValue: false, commands: ['run'] },
  '--verbose': { takesValue: false, commands: ['run'] },
  '-D': { takesValue: true, commands: ['run', 'cluster'] },
  '--json': { takesValue: false, commands: ['list', 'status', 'cluster'] },
  '--help': { takesValue: false, commands: 'all' },
  '-h': { takesValue: false, commands: 'all' },
  '--version': { takesValue: false, commands: 'all' },
};

const COMMANDS = ['init', 'check', 'run', 'list', 'status', 'cancel', 'logs', 'dashboard', 'cluster', 'example', 'help'] as const;

function parseConfigPair(raw: string, into: Record<string, string>): void {
  const eq = raw.indexOf('=');
  if (eq <= 0) throw new UsageError(`-D needs key=value (e.g. -D parallelism.default=4), found '${raw}'`);
  into[raw.slice(0, eq)] = raw.slice(eq + 1);
}

export function parseArgs(argv: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const flags = new Map<string, string[]>();
  const config: Record<string, string> = {};
  let jobArgs: string[] | undefined;

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      jobArgs = argv.slice(i + 1);
      break;
    }
    if (arg.startsWith('-D') && arg.length > 2) {
      parseConfigPair(arg.slice(2), config);
      flags.set('-D', [...(flags.get('-D') ?? []), arg.slice(2)]);
      continue;
    }
    if (arg.startsWith('-') && arg !== '-') {
      const eq = arg.indexOf('=');
      const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
      const spec = OPTIONS[name];
      if (spec === undefined) throw new UsageError(`unknown option '${name}'`);
      let value = '';
      if (spec.takesValue) {
        if (arg.startsWith('--') && eq > 0) value = arg.slice(eq + 1);
        else {
          const next = argv[i + 1];
          if (next === undefined || next === '--') throw new UsageError(`option ${name} needs a value`);
          value = next;
          i++;
        }
        if (name === '-D') parseConfigPair(value, config);
      } else if (eq > 0) {
        throw new UsageError(`option ${name} takes no value`);
      }
      flags.set(name, [...(flags.get(name) ?? []), value]);
      continue;
    }
    positionals.push(arg);
  }

  const dirValues = flags.get('--dir');
  const stateDir = dirValues?.at(-1);
  const url = flags.get('--url')?.at(-1);
  if (url !== undefined && !/^https?:\/\/[^\s/]+/.test(url)) throw new UsageError(`--url needs an http(s) URL, found '${url}'`);
  const base = { ...(stateDir === undefined ? {} : { stateDir }), ...(url === undefined ? {} : { url }), ...(flags.has('--aws-iam') ? { awsIam: true } : {}) };
  if (flags.has('--version')) return { ...base, command: { kind: 'version' } };
  const name = positionals[0];
  if (flags.has('--help') || flags.has('-h') || name === undefined || name === 'help') {
    // The command the help is asked about: `floe run --help`, `floe help run`; an unknown one gets the global page.
    const topic = name === 'help' ? positionals[1] : name;
    return { ...base, command: topic !== undefined && Object.hasOwn(COMMAND_HELP, topic) ? { kind: 'help', topic: topic as HelpTopic } : { kind: 'help' } };
  }
  if (!(COMMANDS as readonly string[]).includes(name)) {
    throw new UsageError(`unknown command '${name}' (commands: ${COMMANDS.filter((c) => c !== 'help').join(', ')})`);
  }
  const kind = name as Command['kind'];

  for (const flag of flags.keys()) {
    const spec = OPTIONS[flag]!;
    if (spec.commands !== 'all' && !spec.commands.includes(kind)) throw new UsageError(`option ${flag} does not apply to '${kind}'`);
  }
  if (jobArgs !== undefined && kind !== 'run') throw new UsageError(`'${kind}' takes no job arguments after --`);
  const rest = positionals.slice(1);
  const json = flags.has('--json');
  const expectArgs = (n: number, what: string): void => {
    if (rest.length < n) throw new UsageError(`'${kind}' needs ${what}`);
    if (rest.length > n) {
      const extra = rest[n]!;
      throw new UsageError(kind === 'run' ? `unexpected argument '${extra}': pass job arguments after --, e.g. floe run job.ts -- ${extra}` : `unexpected argument '${extra}' for '${kind}'`);
    }
  };

  switch (kind) {
    case 'run': {
      expectArgs(1, 'a job file: floe run <job.ts>');
      const p = flags.get('--parallelism')?.at(-1) ?? flags.get('-p')?.at(-1);
      let parallelism: number | undefined;
      if (p !== undefined) {
        parallelism = Number(p);
        if (!/^\d+$/.test(p) || !Number.isSafeInteger(parallelism) || parallelism < 1) {
          throw new UsageError(`--parallelism needs an integer >= 1, found '${p}'`);
        }
      }
      const exportName = flags.get('--export')?.at(-1) ?? 'default';
      if (exportName === '') throw new UsageError('--export needs a name');
      const m = flags.get('--max-records')?.at(-1);
      let maxRecords: number | undefined;
      if (m !== undefined) {
        maxRecords = Number(m);
        if (!/^\d+$/.test(m) || !Number.isSafeInteger(maxRecords)) throw new UsageError(`--max-records needs an integer >= 0, found '${m}'`);
      }
      return {
        ...base,
        command: {
          kind,
          jobFile: rest[0]!,
          ...(parallelism === undefined ? {} : { parallelism }),
          detached: flags.has('--detached') || flags.has('-d'),
          config,
          exportName,
          jobArgs: jobArgs ?? [],
          typecheck: !flags.has('--no-typecheck'),
          useCache: !flags.has('--no-cache'),
          verbose: flags.has('--verbose'),
          ...(maxRecords === undefined ? {} : { maxRecords }),
        },
      };
    }
    case 'init':
      if (rest.length > 1) expectArgs(1, '');
      return { ...base, command: { kind, ...(rest[0] === undefined ? {} : { dir: rest[0] }) } };
    case 'check':
      expectArgs(1, 'a job file: floe check <job.ts>');
      return { ...base, command: { kind, jobFile: rest[0]! } };
    case 'list':
      expectArgs(0, '');
      return { ...base, command: { kind, json } };
    case 'status':
      expectArgs(1, 'a job id: floe status <jobId>');
      return { ...base, command: { kind, jobId: rest[0]!, json } };
    case 'cancel':
      expectArgs(1, 'a job id: floe cancel <jobId>');
      return { ...base, command: { kind, jobId: rest[0]! } };
    case 'logs':
      expectArgs(1, 'a job id: floe logs <jobId>');
      return { ...base, command: { kind, jobId: rest[0]!, follow: flags.has('--follow') || flags.has('-f') } };
    case 'dashboard': {
      expectArgs(0, '');
      const jobId = flags.get('--job')?.at(-1);
      const signOutEverywhere = flags.has('--sign-out-everywhere');
      if (jobId === '') throw new UsageError('--job needs a job id');
      if (jobId !== undefined && signOutEverywhere) throw new UsageError('--job and --sign-out-everywhere do not go together: one asks for a link, the other ends every session');
      return { ...base, command: { kind, signOutEverywhere, ...(jobId === undefined ? {} : { jobId }) } };
    }
    case 'cluster': {
      expectArgs(1, 'an action: floe cluster start|stop|status');
      const action = rest[0]!;
      if (action !== 'start' && action !== 'stop' && action !== 'status') {
        throw new UsageError(`unknown cluster action '${action}' (actions: start, stop, status)`);
      }
      if (json && action !== 'status') throw new UsageError(`--json applies to 'cluster status' only`);
      if (Object.keys(config).length > 0 && action !== 'start') throw new UsageError(`-D applies to 'cluster start' only`);
      return { ...base, command: { kind, action, json, config } };
    }
    case 'example': {
      if (rest.length > 1) expectArgs(1, '');
      const name = rest[0] ?? 'wordcount';
      if (!(EXAMPLES as readonly string[]).includes(name)) throw new UsageError(`unknown example '${name}' (examples: ${EXAMPLES.join(', ')})`);
      return { ...base, command: { kind, name: name as ExampleName } };
    }
    case 'help':
    case 'version':
      return { ...base, command: { kind } };
    default:
      return kind satisfies never;
  }
}

/** --dir, else $FLOE_HOME, else ~/.floe; relative paths are taken from `cwd`. */
export function resolveStateDir(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string, home: string = homedir()): string {
  const fromEnv = env[FloeEnv.HOME];
  const chosen = flag ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : join(home, '.floe'));
  return isAbsolute(chosen) ? chosen : resolve(cwd, chosen);
}
