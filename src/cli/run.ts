// The `workspace` command's dispatch, after `gh`: `workspace <command> [subcommand] [flags]`,
// `--help` on any command (and `workspace help <command>`), `--version`, usage errors exit 2 and
// point to the command's help, other failures exit 1; `--json` makes errors JSON too.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ADMIN_COMMANDS } from './admin-commands.js';
import { CHAT_COMMAND } from './chat.js';
import { type CommandSpec, commandHelp, globalHelp, type Invocation, type Io, parseOptions } from './commands.js';
import { DOCUMENTS_IMPORT_COMMAND } from './documents-import.js';
import { reportError, UsageError } from './errors.js';
import { type Connection, serverUrl } from './http.js';
import { PUBLIC_COMMANDS } from './public-commands.js';

const LOCAL_COMMANDS: CommandSpec[] = [
  {
    name: 'serve',
    args: [],
    summary: 'Start the API server (npm start runs the build of it)',
    details: 'Configured by environment variables (PORT, DATABASE_URL, DATA_DIR, …: see the README).',
    auth: 'local',
    flags: [],
    examples: ['workspace serve', 'PORT=3000 DATA_DIR=./data workspace serve'],
  },
  {
    name: 'migrate',
    args: [],
    summary: 'Run the database migrations and exit',
    auth: 'local',
    flags: [],
    examples: ['workspace migrate', 'DATABASE_URL=postgres://… workspace migrate --json'],
  },
];

export const ALL_COMMANDS: CommandSpec[] = [
  ...LOCAL_COMMANDS,
  ...ADMIN_COMMANDS,
  ...PUBLIC_COMMANDS,
  DOCUMENTS_IMPORT_COMMAND,
  CHAT_COMMAND,
];

export function version(): string {
  for (const relative of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'workspace-api' && pkg.version) return pkg.version;
    } catch {
      /* not there: the build's layout is one level deeper */
    }
  }
  return 'unknown';
}

export function processIo(): Io {
  return {
    out: process.stdout,
    err: process.stderr,
    env: process.env,
    // Read lazily: only the commands that read standard input open it.
    get stdin() {
      return process.stdin;
    },
    interactive: Boolean(process.stdin.isTTY && process.stderr.isTTY),
  };
}

const wantsHelp = (args: string[]) => args.some((a) => a === '--help' || a === '-h');

/** `workspace <group> --help`: the group's subcommands. */
function groupHelp(group: string): string {
  const members = ALL_COMMANDS.filter((s) => s.name.startsWith(`${group} `));
  const width = Math.max(...members.map((s) => s.name.length));
  return [
    `Work with ${group}.`,
    '',
    'USAGE',
    `  workspace ${group} <command> [flags]`,
    '',
    'COMMANDS',
    ...members.map((s) => `  ${s.name.padEnd(width)}  ${s.summary}`),
    '',
    `Run 'workspace ${group} <command> --help' for a command's flags and examples.`,
  ].join('\n');
}

type Found = { spec: CommandSpec; rest: string[] } | { group: string; rest: string[] };

function findCommand(words: string[]): Found {
  const [first = '', second = ''] = words;
  const two = ALL_COMMANDS.find((s) => s.name === `${first} ${second}`);
  if (two) return { spec: two, rest: words.slice(2) };
  const one = ALL_COMMANDS.find((s) => s.name === first);
  if (one) return { spec: one, rest: words.slice(1) };
  if (ALL_COMMANDS.some((s) => s.name.startsWith(`${first} `))) {
    if (second === '' || second.startsWith('-')) return { group: first, rest: words.slice(1) };
    const names = ALL_COMMANDS.filter((s) => s.name.startsWith(`${first} `)).map((s) => s.name.slice(first.length + 1));
    throw new UsageError(
      `Unknown command "${second}" for "workspace ${first}". Its commands: ${names.join(', ')}.`,
      'unknown_command',
    );
  }
  throw new UsageError(`Unknown command "${first}".`, 'unknown_command');
}

function invocation(spec: CommandSpec, rest: string[], io: Io): Invocation {
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    strict: true,
    options: parseOptions(spec),
  });
  const required = spec.args.filter((a) => !a.startsWith('['));
  if (positionals.length < required.length) {
    const missing = required[positionals.length] ?? '';
    throw new UsageError(`Missing ${missing}.`, 'missing_argument', missing);
  }
  if (positionals.length > spec.args.length) {
    throw new UsageError(`Unexpected argument '${positionals[spec.args.length]}'.`, 'invalid_usage');
  }
  const json = values.json === true;
  return {
    io,
    json,
    values,
    args: positionals,
    connection(): Connection {
      const url = serverUrl(values.url as string | undefined, io.env);
      if (spec.auth === 'operator') {
        const token = (values.token as string | undefined) || io.env.ADMIN_TOKEN;
        if (!token)
          throw new UsageError('No operator token: pass --token or set ADMIN_TOKEN.', 'missing_argument', '--token');
        return { url, credential: { token }, err: io.err };
      }
      const apiKey = (values['api-key'] as string | undefined) || io.env.WORKSPACE_API_KEY;
      if (!apiKey) {
        throw new UsageError('No API key: pass --api-key or set WORKSPACE_API_KEY.', 'missing_argument', '--api-key');
      }
      return { url, credential: { apiKey }, err: io.err };
    },
    print(result, human) {
      io.out.write(`${json ? JSON.stringify(result, null, 2) : human()}\n`);
    },
  };
}

/** Runs a command line (without `serve` and `migrate`, which the entry point runs); answers the exit code. */
export async function runCommand(argv: string[], io: Io = processIo()): Promise<number> {
  const json = argv.includes('--json');
  let hint = "Run 'workspace --help' for usage.";
  try {
    if (argv[0] === '--version' || argv[0] === 'version') {
      io.out.write(`workspace version ${version()}\n`);
      return 0;
    }
    if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || (argv[0] === 'help' && argv.length === 1)) {
      io.out.write(`${globalHelp(ALL_COMMANDS)}\n`);
      return 0;
    }
    const asked = argv[0] === 'help';
    const found = findCommand(asked ? argv.slice(1) : argv);
    if ('group' in found) {
      if (asked || wantsHelp(found.rest)) {
        io.out.write(`${groupHelp(found.group)}\n`);
        return 0;
      }
      hint = `Run 'workspace ${found.group} --help' for its commands.`;
      throw new UsageError(`"workspace ${found.group}" needs a command.`, 'unknown_command');
    }
    const { spec, rest } = found;
    hint = `Run 'workspace ${spec.name} --help' for usage.`;
    if (asked || wantsHelp(rest)) {
      io.out.write(`${commandHelp(spec)}\n`);
      return 0;
    }
    if (!spec.run) throw new UsageError(`"workspace ${spec.name}" runs from the entry point only.`);
    return await spec.run(invocation(spec, rest, io));
  } catch (error) {
    return reportError(error, io.err, { json, usageHint: hint });
  }
}
