// The operator's commands: tenants and API keys over the control plane (`/admin/v1`, the operator
// token), so they work while a server owns the embedded database.
import { createInterface } from 'node:readline';
import type { CommandSpec, Invocation, Io } from './commands.js';
import { CommandError, UsageError } from './errors.js';
import { call, type Json } from './http.js';
import { table } from './table.js';

/**
 * `--expires-at`: a date (`2027-01-01`, the start of that day in UTC) or a timestamp with its
 * offset (`2027-01-01T09:30:00Z`, `2027-01-01T09:30:00+02:00`); answered as an ISO timestamp.
 */
export function parseExpiresAt(value: string): string {
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  const timestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i.test(value);
  const bad = () =>
    new UsageError(
      `--expires-at takes a date (2027-01-01, the start of that day in UTC) or a timestamp with its offset ` +
        `(2027-01-01T09:30:00Z), got '${value}'.`,
      'invalid_value',
      '--expires-at',
    );
  if (date) {
    const [, y, m, d] = date;
    const parsed = new Date(Date.UTC(Number(y), Number(m) - 1, Number(d)));
    // 2027-02-30 would roll over to March: refused.
    if (parsed.toISOString().slice(0, 10) !== value) throw bad();
    return parsed.toISOString();
  }
  if (!timestamp) throw bad();
  const ms = Date.parse(value);
  const [y, m, d] = value.slice(0, 10).split('-').map(Number);
  const day = new Date(Date.UTC(y ?? 0, (m ?? 1) - 1, d ?? 0)).toISOString().slice(0, 10);
  if (Number.isNaN(ms) || day !== value.slice(0, 10)) throw bad();
  return new Date(ms).toISOString();
}

const tenantPath = (tenant: string) => `/admin/v1/tenants/${encodeURIComponent(tenant)}`;

/** Asks a yes/no question on a terminal; anything but y/yes is a no. */
export async function confirm(io: Io, question: string): Promise<boolean> {
  const rl = createInterface({ input: io.stdin, output: io.err, terminal: false });
  io.err.write(`${question} [y/N] `);
  try {
    const answer = await new Promise<string>((resolve) => {
      rl.once('line', resolve);
      rl.once('close', () => resolve(''));
    });
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    rl.close();
  }
}

async function keysRevoke(inv: Invocation): Promise<number> {
  const [keyId = ''] = inv.args;
  if (!inv.values.yes) {
    if (!inv.io.interactive) {
      throw new UsageError(
        'Revoking a key is final: pass --yes to revoke without a prompt when not on a terminal.',
        'confirmation_required',
        '--yes',
      );
    }
    if (!(await confirm(inv.io, `Revoke key ${keyId}? It stops working at once, for good.`))) {
      throw new CommandError('Not revoked.', 'cancelled');
    }
  }
  return changeKey(inv, 'revoke');
}

async function changeKey(inv: Invocation, action: 'revoke' | 'lock' | 'unlock'): Promise<number> {
  const [keyId = ''] = inv.args;
  const key = await call(inv.connection(), 'POST', `/admin/v1/api-keys/${encodeURIComponent(keyId)}/${action}`);
  inv.print(key, () => `Key ${key.id} is now ${key.status}.`);
  return 0;
}

const keyIdArg = ['<key_id>'];

export const ADMIN_COMMANDS: CommandSpec[] = [
  {
    name: 'tenants create',
    args: ['<tenant_id>'],
    summary: 'Create a tenant (a workspace)',
    auth: 'operator',
    flags: [{ name: 'name', value: 'NAME', help: 'its display name (default: the tenant id)' }],
    examples: ['workspace tenants create acme --name "Acme"'],
    async run(inv) {
      const [id = ''] = inv.args;
      const tenant = await call(inv.connection(), 'POST', '/admin/v1/tenants', {
        tenant_id: id,
        name: (inv.values.name as string | undefined) ?? id,
      });
      inv.print(tenant, () => `Created tenant ${tenant.id} (${tenant.name}).`);
      return 0;
    },
  },
  {
    name: 'tenants list',
    args: [],
    summary: 'List tenants',
    auth: 'operator',
    flags: [],
    examples: ['workspace tenants list', 'workspace tenants list --json'],
    async run(inv) {
      const list = await call(inv.connection(), 'GET', '/admin/v1/tenants?limit=100');
      inv.print(list, () => table(list.data as Json[], ['id', 'name', 'created_at']));
      return 0;
    },
  },
  {
    name: 'keys create',
    args: ['<tenant_id>'],
    summary: 'Create an API key for a tenant (its secret is shown once)',
    details:
      '--expires-at takes a date, meaning the start of that day in UTC (2027-01-01 is\n' +
      '2027-01-01T00:00:00Z), or a timestamp with its offset (2027-01-01T09:30:00+02:00).',
    auth: 'operator',
    flags: [
      { name: 'name', value: 'NAME', help: "(required) the key's name" },
      { name: 'scopes', value: 'LIST', help: '(required) comma-separated scopes: apps:read,knowledge:write' },
      { name: 'expires-at', value: 'DATE', help: 'when the key stops working: 2027-01-01 or 2027-01-01T09:30:00Z' },
    ],
    examples: [
      'workspace keys create acme --name ci --scopes apps:write,knowledge:read',
      'workspace keys create acme --name temp --scopes coverage:read --expires-at 2027-01-01',
    ],
    async run(inv) {
      const [tenant = ''] = inv.args;
      const name = inv.values.name as string | undefined;
      const rawScopes = inv.values.scopes as string | undefined;
      if (!name) throw new UsageError('Missing --name NAME.', 'missing_argument', '--name');
      if (!rawScopes) throw new UsageError('Missing --scopes LIST.', 'missing_argument', '--scopes');
      const scopes = rawScopes
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const expires = inv.values['expires-at'] as string | undefined;
      const expiresAt = expires === undefined ? undefined : parseExpiresAt(expires);
      const key = await call(inv.connection(), 'POST', `${tenantPath(tenant)}/api-keys`, {
        name,
        scopes,
        ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
      });
      inv.print(key, () => `Created key ${key.id} (${key.prefix}…) for ${tenant}.\nSecret (shown once): ${key.secret}`);
      return 0;
    },
  },
  {
    name: 'keys list',
    args: ['<tenant_id>'],
    summary: "List a tenant's API keys",
    auth: 'operator',
    flags: [],
    examples: ['workspace keys list acme'],
    async run(inv) {
      const [tenant = ''] = inv.args;
      const list = await call(inv.connection(), 'GET', `${tenantPath(tenant)}/api-keys?limit=100`);
      inv.print(list, () =>
        table(list.data as Json[], ['id', 'name', 'prefix', 'status', 'scopes', 'expires_at', 'last_used_at']),
      );
      return 0;
    },
  },
  {
    name: 'keys revoke',
    args: keyIdArg,
    summary: 'Revoke an API key, for good (asks first on a terminal)',
    details:
      'On a terminal it asks for confirmation. Elsewhere (a script, CI) --yes is required;\n' +
      'without it the command refuses with a usage error.',
    auth: 'operator',
    flags: [{ name: 'yes', short: 'y', help: 'revoke without asking' }],
    examples: ['workspace keys revoke 0190c6a1-…', 'workspace keys revoke 0190c6a1-… --yes --json'],
    run: keysRevoke,
  },
  {
    name: 'keys lock',
    args: keyIdArg,
    summary: 'Lock an API key (refused until unlocked)',
    auth: 'operator',
    flags: [],
    examples: ['workspace keys lock 0190c6a1-…'],
    run: (inv) => changeKey(inv, 'lock'),
  },
  {
    name: 'keys unlock',
    args: keyIdArg,
    summary: 'Unlock a locked API key',
    auth: 'operator',
    flags: [],
    examples: ['workspace keys unlock 0190c6a1-…'],
    run: (inv) => changeKey(inv, 'unlock'),
  },
];
