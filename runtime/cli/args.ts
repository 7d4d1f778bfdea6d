// Command-line parsing for `floe`: one declaration per command (its synopsis, what it does, its options
// with their types and help), read by node:util's parseArgs; its help pages are made from the same
// declarations. Pure, so every rule is unit-tested.
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { parseArgs as tokenize } from 'node:util';
import { nearestNames } from '../core/edit-distance.js';
import { FloeError } from '../core/errors.js';
import { FloeEnv } from '../core/floe-env.js';

/** The command line is wrong: exit code 2 and a pointer to the usage text. */
export class UsageError extends FloeError {
  constructor(message: string) {
    super('USAGE', message);
  }
}

export type ClusterAction = 'start' | 'stop' | 'status';
const CLUSTER_ACTIONS: readonly ClusterAction[] = ['start', 'stop', 'status'];

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
      /** --from-savepoint: the savepoint (its folder or `_metadata`) the job starts from, with --allow-non-restored-state. */
      readonly savepointRestore?: { readonly path: string; readonly allowNonRestoredState: boolean };
    }
  | { readonly kind: 'init'; readonly dir?: string }
  | { readonly kind: 'list'; readonly json: boolean }
  | { readonly kind: 'status'; readonly jobId: string; readonly json: boolean }
  | { readonly kind: 'cancel'; readonly jobId: string }
  | { readonly kind: 'savepoint'; readonly jobId: string; readonly targetDirectory?: string }
  | { readonly kind: 'stop'; readonly jobId: string; readonly targetDirectory?: string; readonly drain: boolean }
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

/** One option as parseArgs reads it (`--name`, or `-short`) and as the help pages show it. */
interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** Written only as `-<name>` (-D), never `--<name>`. */
  readonly shortOnly?: boolean;
  /** The value's name on the help page: `--parallelism N`. */
  readonly value?: string;
  /** What it does; lines after the first are continued under it. */
  readonly help: string;
}

/** A command: its synopsis, what it does (both on the global page), its own options, and notes for its page. */
interface CommandSpec {
  readonly synopsis: string;
  readonly summary: string;
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** Takes --url and --aws-iam: it talks to a cluster, which may be a deployed one. */
  readonly remote?: boolean;
  /** Lines printed after its options on its own page (and, for run, on the global page). */
  readonly notes?: string;
}

const CONFIG_OPTION: OptionSpec = { type: 'string', shortOnly: true, value: 'key=value', help: 'a config option for a cluster this command starts' };
const JSON_OPTION = (what: string): OptionSpec => ({ type: 'boolean', help: `print ${what} as JSON` });

/** What `floe <command> --help` prints for each command, and what its command line may hold. */
const COMMANDS = {
  init: {
    synopsis: 'init [dir]',
    summary: `write a starter job (job.ts), its sample input (input.txt) and a
tsconfig.json that type-checks it against this Floe's API (floe check
job.ts), in dir (default: here); never overwrites a file`,
    options: {},
  },
  check: {
    synopsis: 'check <job.ts>',
    summary: `type-check a job file as floe run does (the nearest tsconfig.json above
it, 'floe' resolving to this Floe's API) and print its errors; submits
nothing, exits 1 on errors`,
    options: {},
  },
  run: {
    synopsis: `run <job.ts> [-p|--parallelism N] [--detached] [--export NAME] [--max-records N] [--no-typecheck]
             [--no-cache] [--verbose] [--from-savepoint PATH [--allow-non-restored-state]]
             [-D key=value]... [-- job args...]`,
    summary: 'type-check and bundle the job file, submit it, and follow it until it ends',
    remote: true,
    options: {
      parallelism: { type: 'string', short: 'p', value: 'N', help: 'parallelism of operators that set none' },
      detached: { type: 'boolean', short: 'd', help: 'submit, print the job id and return without following the job' },
      export: { type: 'string', value: 'NAME', help: "the job file's export that defines the job (default: default)" },
      'max-records': { type: 'string', value: 'N', help: 'records a collect() sink keeps when it sets no maxRecords (default 10000)' },
      'no-typecheck': { type: 'boolean', help: 'bundle the job without type-checking it first' },
      'no-cache': {
        type: 'boolean',
        help: `bundle the job again even if its files did not change since the last run
(bundles are kept in <stateDir>/cache/libraries; delete it to clear them)`,
      },
      verbose: { type: 'boolean', help: 'print how long each step took (bundle cache, type-check, submit, wait)' },
      'from-savepoint': {
        type: 'string',
        value: 'PATH',
        help: `start the job from a savepoint (its folder or _metadata, as floe savepoint or
floe stop printed it): each operator with state gets its state by uid(…), at
any parallelism`,
      },
      'allow-non-restored-state': {
        type: 'boolean',
        help: 'with --from-savepoint: skip state of operators the job no longer has (refused otherwise)',
      },
      D: CONFIG_OPTION,
    },
    notes: `  -- args...              the job's arguments (the builder's args). Paths that readTextFile and
                          writeAsText get are relative to the folder floe runs in, not the job file's
  Ctrl-C while a job is followed asks whether to cancel the job or detach from it (it keeps running);
  a second Ctrl-C, or no terminal to ask on, detaches (exit code 130).
`,
  },
  list: {
    synopsis: 'list [--json]',
    summary: `list the cluster's jobs (from the stored records when the cluster is stopped)`,
    remote: true,
    options: { json: JSON_OPTION('the jobs') },
  },
  status: {
    synopsis: 'status <jobId> [--json]',
    summary: `show a job's state, tasks and latest exceptions (stored records,
likewise); a job id may be any prefix that names one job`,
    remote: true,
    options: { json: JSON_OPTION("the job's details") },
  },
  cancel: { synopsis: 'cancel <jobId>', summary: 'cancel a job (its id, or a prefix that names one job)', remote: true, options: {} },
  savepoint: {
    synopsis: 'savepoint <jobId> [dir]',
    summary: `take a savepoint of a running job into a new folder in dir (default:
state.savepoints.dir) and print its path; the job runs on`,
    remote: true,
    options: {},
  },
  stop: {
    synopsis: 'stop <jobId> [--savepoint] [dir] [--drain]',
    summary: `stop a job with a savepoint (into dir, default state.savepoints.dir): its
sources stop after the savepoint and the job ends FINISHED; windows and
timers stay in the savepoint for a job resumed from it (--from-savepoint)`,
    remote: true,
    options: {
      savepoint: { type: 'boolean', help: 'take a savepoint (always: a job stops with one)' },
      drain: { type: 'boolean', help: 'end the input as at the end of time after the savepoint: windows and timers fire' },
    },
  },
  logs: {
    synopsis: 'logs <jobId> [-f|--follow]',
    summary: `show the job's log lines from its JobManager and TaskExecutors (and the
Dispatcher's lines about it), merged by time; --follow keeps printing new
lines until the job ends. With --url: from CloudWatch Logs, the group in
$${FloeEnv.LOG_GROUP} (the stack's TaskLogGroup output), with AWS credentials`,
    remote: true,
    options: { follow: { type: 'boolean', short: 'f', help: 'keep printing new lines until the job ends (Ctrl-C stops, exit code 130)' } },
  },
  dashboard: {
    synopsis: 'dashboard [--job <jobId>] [--sign-out-everywhere]',
    summary: `print a one-time link that signs a browser in to the cluster's dashboard
(it works once, within ten minutes; with --job it opens that job's page).
With --url to a deployed cluster the request is signed with your AWS
credentials, which need execute-api:Invoke on the API; the link is the only
way in. --sign-out-everywhere ends every dashboard session instead (on AWS;
a local cluster's sessions are signed with its secret and end after 12 hours)`,
    remote: true,
    options: {
      job: { type: 'string', value: '<jobId>', help: "a link that opens this job's page" },
      'sign-out-everywhere': { type: 'boolean', help: 'end every dashboard session instead of printing a link' },
    },
  },
  cluster: {
    synopsis: 'cluster start [-D key=value]... | stop | status [--json]',
    summary: 'manage the local cluster (its Dispatcher runs in the background)',
    options: { D: { ...CONFIG_OPTION, help: "a config option for the cluster 'cluster start' starts" }, json: JSON_OPTION("'cluster status'") },
  },
  example: {
    synopsis: 'example [wordcount | log-levels]',
    summary: `generate sample input under <stateDir>/example and run
examples/<name>.ts on a local cluster (default: wordcount, and the state dir
the checkout's .floe unless --dir or $${FloeEnv.HOME} says otherwise), checking
its result against a direct count`,
    options: {},
  },
} as const satisfies Record<string, CommandSpec>;

export type HelpTopic = keyof typeof COMMANDS;
type CommandName = HelpTopic;
const COMMAND_NAMES = Object.keys(COMMANDS) as CommandName[];

/** The options of a command that may talk to a deployed cluster. */
const REMOTE_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  url: {
    type: 'string',
    value: '<restUrl>',
    help: `use the cluster serving at this URL (e.g. the ApiUrl of a deployed one;
default: $${FloeEnv.URL}) instead of a local one; its secret comes from $${FloeEnv.SECRET},
except for an execute-api URL (a deployed cluster): requests to it are signed
with your AWS credentials (SigV4; the SDK's chain: environment, profile, SSO,
role), which need execute-api:Invoke on the API`,
  },
  'aws-iam': {
    type: 'boolean',
    help: `sign requests to the --url cluster with AWS credentials, whatever its URL
(default: $${FloeEnv.AWS_IAM}=1); the region is the URL's, else $AWS_REGION`,
  },
};

/** The options every command takes. */
const GLOBAL_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  dir: { type: 'string', value: '<stateDir>', help: `the cluster's state folder (default: $${FloeEnv.HOME}, else ~/.floe)` },
  help: { type: 'boolean', short: 'h', help: "show this text (floe <command> --help: that command's own)" },
  version: { type: 'boolean', help: "show Floe's version" },
};

/** Every option of every command, for parseArgs to read a command line before its command is known. */
const ALL_OPTIONS: Readonly<Record<string, OptionSpec>> = Object.assign(
  {},
  GLOBAL_OPTIONS,
  REMOTE_OPTIONS,
  ...Object.values(COMMANDS).map((c: CommandSpec) => c.options),
);

/** The options `command` takes, its own first. */
function optionsOf(command: CommandName): Readonly<Record<string, OptionSpec>> {
  const spec: CommandSpec = COMMANDS[command];
  return { ...spec.options, ...(spec.remote === true ? REMOTE_OPTIONS : {}), ...GLOBAL_OPTIONS };
}

/** How the option is written: `-p, --parallelism N`, `-D key=value`, `--json`. */
function optionForm(name: string, spec: OptionSpec): string {
  const written = spec.shortOnly === true ? `-${name}` : `${spec.short === undefined ? '' : `-${spec.short}, `}--${name}`;
  return spec.value === undefined ? written : `${written} ${spec.value}`;
}

const COLUMN = 26;
const indent = (text: string, by: number): string =>
  text
    .split('\n')
    .map((l) => ' '.repeat(by) + l)
    .join('\n');

/** A page's list of options: each one's form, and its help in the column beside it. */
function optionLines(options: Readonly<Record<string, OptionSpec>>): string {
  return Object.entries(options)
    .map(([name, spec]) => {
      const [head, ...rest] = spec.help.split('\n');
      // A form as wide as the column puts its help on the next line.
      const form = `  ${optionForm(name, spec)}`;
      const lead = form.length < COLUMN ? form.padEnd(COLUMN) : `${form}\n${' '.repeat(COLUMN)}`;
      return `${lead}${head}\n${rest.map((l) => `${' '.repeat(COLUMN)}${l}\n`).join('')}`;
    })
    .join('');
}

/** A command's line on the global page: the synopsis, and the summary beside it or under it. */
function commandLine(spec: CommandSpec): string {
  const first = `  ${spec.synopsis}`;
  if (!spec.synopsis.includes('\n') && first.length < COLUMN && !spec.summary.includes('\n')) return `${first.padEnd(COLUMN)}${spec.summary}\n`;
  if (!spec.synopsis.includes('\n') && first.length < COLUMN) {
    const [head, ...rest] = spec.summary.split('\n');
    return `${first.padEnd(COLUMN)}${head}\n${rest.length > 0 ? `${indent(rest.join('\n'), COLUMN)}\n` : ''}`;
  }
  return `${first}\n${indent(spec.summary, COLUMN)}\n`;
}

/** A command's own options under its heading ("Run options:"), with its notes; '' for a command with neither. */
function ownOptions(command: CommandName): string {
  const spec: CommandSpec = COMMANDS[command];
  if (Object.keys(spec.options).length === 0 && spec.notes === undefined) return '';
  return `${command[0]!.toUpperCase()}${command.slice(1)} options:\n${optionLines(spec.options)}${spec.notes ?? ''}`;
}

/** `floe --help`: every command, run's options, and the options every command takes. */
export function usage(): string {
  return `Usage: floe [--dir <stateDir>] <command>

Commands:
${Object.values(COMMANDS).map(commandLine).join('')}
${ownOptions('run')}
Options:
${optionLines({ dir: GLOBAL_OPTIONS['dir']!, ...REMOTE_OPTIONS, help: GLOBAL_OPTIONS['help']!, version: GLOBAL_OPTIONS['version']! })}`;
}

/** `floe <command> --help` (or `floe help <command>`): that command's synopsis, what it does, its options. */
export function commandUsage(topic: HelpTopic): string {
  const spec: CommandSpec = COMMANDS[topic];
  const own = ownOptions(topic);
  const shared = {
    dir: GLOBAL_OPTIONS['dir']!,
    ...(spec.remote === true ? REMOTE_OPTIONS : {}),
    help: GLOBAL_OPTIONS['help']!,
    version: GLOBAL_OPTIONS['version']!,
  };
  return `Usage: floe [--dir <stateDir>] ${spec.synopsis}\n\n${indent(spec.summary, 2)}\n\n${own === '' ? '' : `${own}\n`}Options:\n${optionLines(shared)}`;
}

/** "unknown <what> '<name>'": with the nearest known names when it looks like a typo of one, else `otherwise`. */
function unknownName(what: string, name: string, known: readonly string[], otherwise: string): UsageError {
  const near = nearestNames(name, known);
  if (near.length > 0) return new UsageError(`unknown ${what} '${name}': did you mean ${near.map((n) => `'${n}'`).join(' or ')}?`);
  return new UsageError(`unknown ${what} '${name}'${otherwise}`);
}

function parseConfigPair(raw: string, into: Record<string, string>): void {
  const eq = raw.indexOf('=');
  if (eq <= 0) throw new UsageError(`-D needs key=value (e.g. -D parallelism.default=4), found '${raw}'`);
  into[raw.slice(0, eq)] = raw.slice(eq + 1);
}

export function parseArgs(argv: readonly string[]): ParsedArgs {
  // Not parseArgs' strict mode: it refuses a value that starts with '-' (`--max-records -1` has its own
  // message below) and words its errors its own way. Every token is checked here instead, in order.
  const { tokens } = tokenize({
    args: [...argv],
    options: Object.fromEntries(Object.entries(ALL_OPTIONS).map(([name, o]) => [name, { type: o.type, ...(o.short === undefined ? {} : { short: o.short }) }])),
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const positionals: string[] = [];
  /** Each option given, by name, with its values in order (a boolean's are ''), and how it was written. */
  const flags = new Map<string, { readonly written: string; readonly values: string[] }>();
  const config: Record<string, string> = {};
  let jobArgs: string[] | undefined;
  const name = tokens.find((t) => t.kind === 'positional')?.value;
  const command = name !== undefined && Object.hasOwn(COMMANDS, name) ? (name as CommandName) : undefined;

  for (const token of tokens) {
    if (token.kind === 'option-terminator') {
      jobArgs = argv.slice(token.index + 1);
      break;
    }
    if (token.kind === 'positional') {
      positionals.push(token.value);
      continue;
    }
    const spec = ALL_OPTIONS[token.name];
    const written = token.rawName;
    if (spec === undefined || (spec.shortOnly === true && written !== `-${token.name}`)) {
      if (!written.startsWith('--')) throw new UsageError(`unknown option '${written}'`);
      const known = Object.entries(command === undefined ? ALL_OPTIONS : optionsOf(command)).flatMap(([n, o]) => (o.shortOnly === true ? [] : [`--${n}`]));
      throw unknownName('option', written, known, '');
    }
    let value = '';
    if (spec.type === 'string') {
      if (token.value === undefined || (token.value === '--' && !token.inlineValue)) throw new UsageError(`option ${written} needs a value`);
      value = token.value;
      if (token.name === 'D') parseConfigPair(value, config);
    } else if (token.value !== undefined) {
      throw new UsageError(`option ${written} takes no value`);
    }
    const seen = flags.get(token.name);
    if (seen === undefined) flags.set(token.name, { written, values: [value] });
    else seen.values.push(value);
  }
  const last = (option: string): string | undefined => flags.get(option)?.values.at(-1);

  const stateDir = last('dir');
  const url = last('url');
  if (url !== undefined && !/^https?:\/\/[^\s/]+/.test(url)) throw new UsageError(`--url needs an http(s) URL, found '${url}'`);
  const base = { ...(stateDir === undefined ? {} : { stateDir }), ...(url === undefined ? {} : { url }), ...(flags.has('aws-iam') ? { awsIam: true } : {}) };
  if (flags.has('version')) return { ...base, command: { kind: 'version' } };
  if (flags.has('help') || name === undefined || name === 'help') {
    // The command the help is asked about: `floe run --help`, `floe help run`; an unknown one gets the global page.
    const topic = name === 'help' ? positionals[1] : name;
    return { ...base, command: topic !== undefined && Object.hasOwn(COMMANDS, topic) ? { kind: 'help', topic: topic as HelpTopic } : { kind: 'help' } };
  }
  if (command === undefined) throw unknownName('command', name, COMMAND_NAMES, ` (commands: ${COMMAND_NAMES.join(', ')})`);
  const kind = command;

  const takes = optionsOf(kind);
  for (const [option, { written }] of flags) {
    if (!Object.hasOwn(takes, option)) throw new UsageError(`option ${written} does not apply to '${kind}'`);
  }
  if (jobArgs !== undefined && kind !== 'run') throw new UsageError(`'${kind}' takes no job arguments after --`);
  const rest = positionals.slice(1);
  const json = flags.has('json');
  const expectArgs = (n: number, what: string): void => {
    if (rest.length < n) throw new UsageError(`'${kind}' needs ${what}`);
    if (rest.length > n) {
      const extra = rest[n]!;
      throw new UsageError(
        kind === 'run'
          ? `unexpected argument '${extra}': pass job arguments after --, e.g. floe run job.ts -- ${extra}`
          : `unexpected argument '${extra}' for '${kind}'`,
      );
    }
  };

  switch (kind) {
    case 'run': {
      expectArgs(1, 'a job file: floe run <job.ts>');
      const p = last('parallelism');
      let parallelism: number | undefined;
      if (p !== undefined) {
        parallelism = Number(p);
        if (!/^\d+$/.test(p) || !Number.isSafeInteger(parallelism) || parallelism < 1) {
          throw new UsageError(`--parallelism needs an integer >= 1, found '${p}'`);
        }
      }
      const exportName = last('export') ?? 'default';
      if (exportName === '') throw new UsageError('--export needs a name');
      const m = last('max-records');
      let maxRecords: number | undefined;
      if (m !== undefined) {
        maxRecords = Number(m);
        if (!/^\d+$/.test(m) || !Number.isSafeInteger(maxRecords)) throw new UsageError(`--max-records needs an integer >= 0, found '${m}'`);
      }
      const fromSavepoint = last('from-savepoint');
      if (fromSavepoint === '') throw new UsageError('--from-savepoint needs the path of a savepoint');
      if (fromSavepoint === undefined && flags.has('allow-non-restored-state')) {
        throw new UsageError('--allow-non-restored-state applies only with --from-savepoint <path>');
      }
      const savepointRestore =
        fromSavepoint === undefined ? undefined : { path: savepointPathOf(fromSavepoint), allowNonRestoredState: flags.has('allow-non-restored-state') };
      return {
        ...base,
        command: {
          kind,
          ...(savepointRestore === undefined ? {} : { savepointRestore }),
          jobFile: rest[0]!,
          ...(parallelism === undefined ? {} : { parallelism }),
          detached: flags.has('detached'),
          config,
          exportName,
          jobArgs: jobArgs ?? [],
          typecheck: !flags.has('no-typecheck'),
          useCache: !flags.has('no-cache'),
          verbose: flags.has('verbose'),
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
    case 'savepoint':
      if (rest.length !== 2) expectArgs(rest.length > 2 ? 2 : 1, 'a job id: floe savepoint <jobId> [dir]');
      return { ...base, command: { kind, jobId: rest[0]!, ...(rest[1] === undefined ? {} : { targetDirectory: savepointPathOf(rest[1]) }) } };
    case 'stop':
      if (rest.length !== 2) expectArgs(rest.length > 2 ? 2 : 1, 'a job id: floe stop <jobId> [--savepoint] [dir]');
      return {
        ...base,
        command: { kind, jobId: rest[0]!, drain: flags.has('drain'), ...(rest[1] === undefined ? {} : { targetDirectory: savepointPathOf(rest[1]) }) },
      };
    case 'logs':
      expectArgs(1, 'a job id: floe logs <jobId>');
      return { ...base, command: { kind, jobId: rest[0]!, follow: flags.has('follow') } };
    case 'dashboard': {
      expectArgs(0, '');
      const jobId = last('job');
      const signOutEverywhere = flags.has('sign-out-everywhere');
      if (jobId === '') throw new UsageError('--job needs a job id');
      if (jobId !== undefined && signOutEverywhere)
        throw new UsageError('--job and --sign-out-everywhere do not go together: one asks for a link, the other ends every session');
      return { ...base, command: { kind, signOutEverywhere, ...(jobId === undefined ? {} : { jobId }) } };
    }
    case 'cluster': {
      expectArgs(1, 'an action: floe cluster start|stop|status');
      const action = rest[0]!;
      if (!(CLUSTER_ACTIONS as readonly string[]).includes(action))
        throw unknownName('cluster action', action, CLUSTER_ACTIONS, ` (actions: ${CLUSTER_ACTIONS.join(', ')})`);
      if (json && action !== 'status') throw new UsageError(`--json applies to 'cluster status' only`);
      if (Object.keys(config).length > 0 && action !== 'start') throw new UsageError(`-D applies to 'cluster start' only`);
      return { ...base, command: { kind, action: action as ClusterAction, json, config } };
    }
    case 'example': {
      if (rest.length > 1) expectArgs(1, '');
      const example = rest[0] ?? 'wordcount';
      if (!(EXAMPLES as readonly string[]).includes(example)) throw unknownName('example', example, EXAMPLES, ` (examples: ${EXAMPLES.join(', ')})`);
      return { ...base, command: { kind, name: example as ExampleName } };
    }
    default:
      return kind satisfies never;
  }
}

/** A savepoint's path or target directory: a URI as given, a local path made absolute (the cluster's processes read it). */
function savepointPathOf(given: string): string {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(given) || isAbsolute(given) ? given : resolve(given);
}

/** --dir, else $FLOE_HOME, else ~/.floe; relative paths are taken from `cwd`. */
export function resolveStateDir(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string, home: string = homedir()): string {
  const fromEnv = env[FloeEnv.HOME];
  const chosen = flag ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : join(home, '.floe'));
  return isAbsolute(chosen) ? chosen : resolve(cwd, chosen);
}
