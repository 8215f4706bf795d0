// What a `workspace` command declares — its words, arguments, flags, examples and how it runs —
// and the help written from that declaration: `workspace <command> --help`, `workspace help
// <command>` and the global list come from the same table, so they cannot drift apart.
import type { Connection } from './http.js';

export interface Io {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadableStream;
  /** Standard input and standard error are a terminal: a person can be asked. */
  interactive: boolean;
}

export interface Flag {
  name: string;
  short?: string;
  /** The value's placeholder (`NAME`); none for a switch. */
  value?: string;
  help: string;
}

export type Auth = 'api-key' | 'operator' | 'local';

export interface Invocation {
  io: Io;
  json: boolean;
  values: Record<string, string | boolean | undefined>;
  /** The positional arguments after the command's words, checked against `args`. */
  args: string[];
  /** The server and credential the command's `auth` calls for (a usage error when missing). */
  connection(): Connection;
  /** The result on standard output: `--json` prints it as JSON, otherwise `human()`. */
  print(result: unknown, human: () => string): void;
}

export interface CommandSpec {
  /** The command's words: `keys create`. */
  name: string;
  /** Positional arguments, required unless written `[name]`. */
  args: string[];
  summary: string;
  /** Paragraphs of the command's help, after the summary. */
  details?: string;
  auth: Auth;
  flags: Flag[];
  examples: string[];
  /** Absent for `serve` and `migrate`, which the entry point runs itself. */
  run?: (invocation: Invocation) => Promise<number>;
}

const CONNECTION_FLAGS: Record<Auth, Flag[]> = {
  'api-key': [
    { name: 'api-key', value: 'KEY', help: 'the API key (default $WORKSPACE_API_KEY)' },
    { name: 'url', value: 'URL', help: 'the server (default $WORKSPACE_URL or http://127.0.0.1:$PORT)' },
  ],
  operator: [
    { name: 'token', value: 'TOKEN', help: 'the operator token (default $ADMIN_TOKEN)' },
    { name: 'url', value: 'URL', help: 'the server (default $WORKSPACE_URL or http://127.0.0.1:$PORT)' },
  ],
  local: [],
};

export const COMMON_FLAGS: Flag[] = [
  { name: 'json', help: 'print the result as JSON (errors too, on standard error)' },
  { name: 'help', short: 'h', help: "show this command's help" },
];

/** Every flag a command accepts: its own, its connection's and the common ones. */
export function flagsOf(spec: CommandSpec): Flag[] {
  return [...spec.flags, ...CONNECTION_FLAGS[spec.auth], ...COMMON_FLAGS];
}

export function parseOptions(spec: CommandSpec) {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  for (const flag of flagsOf(spec)) {
    options[flag.name] = { type: flag.value ? 'string' : 'boolean', ...(flag.short ? { short: flag.short } : {}) };
  }
  return options;
}

export function synopsis(spec: CommandSpec): string {
  const required = spec.flags.filter((f) => f.help.startsWith('(required)'));
  return [
    `workspace ${spec.name}`,
    ...spec.args,
    ...required.map((f) => `--${f.name} ${f.value}`),
    spec.flags.length > required.length ? '[flags]' : '',
  ]
    .filter(Boolean)
    .join(' ');
}

function flagLines(flags: Flag[]): string[] {
  const label = (f: Flag) => `${f.short ? `-${f.short}, ` : '    '}--${f.name}${f.value ? ` ${f.value}` : ''}`;
  const width = Math.max(...flags.map((f) => label(f).length));
  return flags.map((f) => `  ${label(f).padEnd(width)}  ${f.help}`);
}

/** `workspace <command> --help`. */
export function commandHelp(spec: CommandSpec): string {
  const lines = [spec.summary, '', 'USAGE', `  ${synopsis(spec)}`];
  if (spec.details) lines.push('', ...spec.details.split('\n').map((l) => (l ? `  ${l}` : '')));
  if (spec.flags.length > 0) lines.push('', 'FLAGS', ...flagLines(spec.flags));
  const inherited = [...CONNECTION_FLAGS[spec.auth], ...COMMON_FLAGS];
  lines.push('', 'INHERITED FLAGS', ...flagLines(inherited));
  lines.push('', 'EXAMPLES', ...spec.examples.map((e) => `  $ ${e}`));
  lines.push('', 'EXIT CODES', '  0 done · 1 the work failed (an API error, a failure it reports) · 2 a usage error');
  return lines.join('\n');
}

/** `workspace --help`: every command with its summary. */
export function globalHelp(specs: CommandSpec[]): string {
  const width = Math.max(...specs.map((s) => s.name.length));
  return [
    'Work with a Workspace API server from the command line.',
    '',
    'USAGE',
    '  workspace <command> [subcommand] [flags]',
    '',
    'COMMANDS',
    ...specs.map((s) => `  ${s.name.padEnd(width)}  ${s.summary}`),
    '',
    'FLAGS',
    '  --help      show help for a command (also: workspace help <command>)',
    '  --version   show the version',
    '',
    'Tenants and keys take the operator token (--token or $ADMIN_TOKEN); the other commands an API',
    'key (--api-key or $WORKSPACE_API_KEY). Every command takes --url (default $WORKSPACE_URL or',
    'http://127.0.0.1:$PORT) and --json.',
    '',
    'EXIT CODES',
    '  0 done · 1 the work failed · 2 a usage error (unknown command or flag, missing argument, bad value)',
    '',
    "Run 'workspace <command> --help' for a command's flags and examples.",
  ].join('\n');
}
