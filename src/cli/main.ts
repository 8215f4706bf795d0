// The `workspace` command. `serve` and `migrate` work on the database directly; the rest talk to
// the control plane over HTTP, so they work while a server owns the (embedded) database.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.js';
import { PUBLIC_COMMANDS, PUBLIC_USAGE, runPublicCommand } from './public-commands.js';

const USAGE = `Usage: workspace <command> [options]

  serve                                   start the API server (npm start)
  migrate                                 run database migrations and exit
  tenants create <tenant_id> --name NAME  create a tenant
  tenants list                            list tenants
  keys create <tenant_id> --name NAME --scopes a:read,b:write [--expires-at ISO]
  keys list <tenant_id>                   list a tenant's API keys
  keys revoke|lock|unlock <key_id>        change a key's state
${PUBLIC_USAGE}

Options: --json (machine-readable output), --url URL (default $WORKSPACE_URL or
http://127.0.0.1:$PORT), --token TOKEN (default $ADMIN_TOKEN: the operator token).`;

class CliError extends Error {}

async function callAdmin(
  options: { url: string; token: string | undefined },
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  if (!options.token) throw new CliError('No operator token: pass --token or set ADMIN_TOKEN.');
  let response: Response;
  try {
    response = await fetch(`${options.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${options.token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new CliError(`Cannot reach the server at ${options.url}: is it running?`);
  }
  const json = (await response.json().catch(() => undefined)) as
    | { error?: { code: string; message: string; param?: string } }
    | undefined;
  if (!response.ok) {
    const e = json?.error;
    throw new CliError(
      e ? `${e.code}: ${e.message}${e.param ? ` (${e.param})` : ''}` : `HTTP ${response.status} from ${path}`,
    );
  }
  return json;
}

function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (v: unknown) => (v === null || v === undefined ? '-' : Array.isArray(v) ? v.join(',') : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(columns), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n');
}

/** A database that cannot be opened or does not answer stops the command with one line, no stack. */
async function sayingWhyTheDatabaseFailed<T>(action: string, run: () => Promise<T>): Promise<T> {
  const { DatabaseStartError } = await import('../db/client.js');
  try {
    return await run();
  } catch (error) {
    if (error instanceof DatabaseStartError) throw new CliError(`cannot ${action}: ${error.message}`);
    throw error;
  }
}

async function main(argv: string[]): Promise<number> {
  // The public-API commands (src/cli/public-commands.ts) take an API key and their own options.
  if (argv[0] !== undefined && PUBLIC_COMMANDS.has(argv[0])) return runPublicCommand(argv);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      url: { type: 'string' },
      token: { type: 'string' },
      name: { type: 'string' },
      scopes: { type: 'string' },
      'expires-at': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [command, sub, arg] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command || values.help ? 0 : 2;
  }

  if (command === 'serve') {
    const { serve } = await import('../serve.js');
    await sayingWhyTheDatabaseFailed('start', () => serve(loadConfig()));
    return -1; // keeps running
  }
  if (command === 'migrate') {
    const config = loadConfig();
    const { openDatabaseAtStart } = await import('../db/client.js');
    const { migrateToLatest } = await import('../db/migrate.js');
    const database = await sayingWhyTheDatabaseFailed('migrate', () =>
      openDatabaseAtStart({
        url: config.databaseUrl,
        dataDir: config.dataDir,
        preparedStatements: config.databasePreparedStatements,
      }),
    );
    try {
      const applied = await migrateToLatest(database.db);
      process.stdout.write(
        values.json
          ? `${JSON.stringify({ applied })}\n`
          : applied.length > 0
            ? `Applied: ${applied.join(', ')}\n`
            : 'Already up to date.\n',
      );
    } finally {
      await database.close();
    }
    return 0;
  }

  const port = process.env.PORT && /^\d+$/.test(process.env.PORT) ? process.env.PORT : '8080';
  const http = {
    url: (values.url ?? process.env.WORKSPACE_URL ?? `http://127.0.0.1:${port}`).replace(/\/+$/, ''),
    token: values.token ?? process.env.ADMIN_TOKEN,
  };
  const print = (result: unknown, human: () => string) =>
    process.stdout.write(`${values.json ? JSON.stringify(result, null, 2) : human()}\n`);
  const need = (value: string | undefined, what: string): string => {
    if (!value) throw new CliError(`Missing ${what}.\n\n${USAGE}`);
    return value;
  };

  if (command === 'tenants' && sub === 'create') {
    const id = need(arg, '<tenant_id>');
    const tenant = (await callAdmin(http, 'POST', '/admin/v1/tenants', {
      tenant_id: id,
      name: values.name ?? id,
    })) as Record<string, unknown>;
    print(tenant, () => `Created tenant ${tenant.id} (${tenant.name}).`);
    return 0;
  }
  if (command === 'tenants' && sub === 'list') {
    const list = (await callAdmin(http, 'GET', '/admin/v1/tenants?limit=100')) as { data: Record<string, unknown>[] };
    print(list, () => table(list.data, ['id', 'name', 'created_at']));
    return 0;
  }
  if (command === 'keys' && sub === 'create') {
    const tenant = need(arg, '<tenant_id>');
    const scopes = need(values.scopes, '--scopes')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const key = (await callAdmin(http, 'POST', `/admin/v1/tenants/${encodeURIComponent(tenant)}/api-keys`, {
      name: need(values.name, '--name'),
      scopes,
      ...(values['expires-at'] ? { expires_at: values['expires-at'] } : {}),
    })) as Record<string, unknown>;
    print(key, () => `Created key ${key.id} (${key.prefix}…) for ${tenant}.\nSecret (shown once): ${key.secret}`);
    return 0;
  }
  if (command === 'keys' && sub === 'list') {
    const tenant = need(arg, '<tenant_id>');
    const list = (await callAdmin(
      http,
      'GET',
      `/admin/v1/tenants/${encodeURIComponent(tenant)}/api-keys?limit=100`,
    )) as {
      data: Record<string, unknown>[];
    };
    print(list, () => table(list.data, ['id', 'name', 'prefix', 'status', 'scopes', 'expires_at', 'last_used_at']));
    return 0;
  }
  if (command === 'keys' && (sub === 'revoke' || sub === 'lock' || sub === 'unlock')) {
    const id = need(arg, '<key_id>');
    const key = (await callAdmin(http, 'POST', `/admin/v1/api-keys/${encodeURIComponent(id)}/${sub}`)) as Record<
      string,
      unknown
    >;
    print(key, () => `Key ${key.id} is now ${key.status}.`);
    return 0;
  }
  throw new CliError(`Unknown command: ${positionals.join(' ')}\n\n${USAGE}`);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof CliError || error instanceof ConfigError) {
      process.stderr.write(`workspace: ${error.message}\n`);
      process.exitCode = error instanceof ConfigError ? 78 : 1;
    } else if (error instanceof Error && /^E[A-Z]+$/.test(String((error as NodeJS.ErrnoException).code))) {
      // A system error at start (the port taken, DATA_DIR not writable or in use): its message says
      // what and where, in one line; the stack would say nothing more to an operator.
      process.stderr.write(`workspace: ${error.message}\n`);
      process.exitCode = 1;
    } else if (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`workspace: ${error.message}\n\n${USAGE}\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`workspace: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    }
    // A failed start may leave handles open (the database, timers): the process ends here.
    process.exit();
  },
);
