// The `workspace` command's conventions, after `gh`: --version, help per command, exit codes (2 a
// usage error, 1 a failure), errors as JSON with --json, dates for --expires-at, and the
// confirmation before revoking a key. One server for the file; most commands run in this process,
// a few as the real binary to prove its wiring.
import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers.js';
import { runInProcess } from '../support/cli-run.js';
import { runCli } from '../support/process.js';

let t: TestApp;
let base = '';
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };

beforeAll(async () => {
  t = await startTestApp();
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
});

const env = () => ({ WORKSPACE_URL: base, ADMIN_TOKEN });
const run = (args: string[], options: Parameters<typeof runInProcess>[1] = {}) =>
  runInProcess(args, { ...options, env: { ...env(), ...options.env } });

async function keysOf(tenantId: string) {
  const list = await t.call({
    url: `/admin/v1/tenants/${tenantId}/api-keys`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  return list.body.data as { id: string; status: string; expires_at: string | null }[];
}

describe('the binary', { timeout: 180_000 }, () => {
  it('--version prints the version of the package and exits 0', async () => {
    const result = await runCli(['--version']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`workspace version ${pkg.version}\n`);
    expect((await run(['version'])).stdout).toBe(`workspace version ${pkg.version}\n`);
  });

  it('exits 2 on a usage error and 1 on a failure, in JSON with --json', async () => {
    const unknown = await runCli(['keys', 'create', 'acme', '--name', 'x', '--scopes', 'a:read', '--frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(
      "workspace: Unknown flag --frobnicate\nRun 'workspace keys create --help' for usage.\n",
    );

    const refused = await runCli(['tenants', 'create', 'x', '--json'], { ...env(), ADMIN_TOKEN: 'not-the-token' });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(JSON.parse(refused.stderr)).toMatchObject({ error: { status: 401, type: 'authentication_error' } });
  });

  it('serve --help prints the command help without starting a server', async () => {
    const result = await runCli(['serve', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('USAGE\n  workspace serve');
  });
});

describe('help', { timeout: 180_000 }, () => {
  it("keys create --help prints that command's usage, flags and an example, not the global help", async () => {
    const result = await run(['keys', 'create', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('USAGE\n  workspace keys create <tenant_id> --name NAME --scopes LIST [flags]');
    expect(result.stdout).toMatch(/--expires-at DATE +when the key stops working/);
    expect(result.stdout).toContain('EXAMPLES\n  $ workspace keys create acme --name ci');
    expect(result.stdout).not.toContain('COMMANDS');
    // Help wins over everything else on the line, even a missing argument.
    expect((await run(['keys', 'create', '-h'])).stdout).toBe(result.stdout);
    expect((await run(['help', 'keys', 'create'])).stdout).toBe(result.stdout);
  });

  it('workspace help lists every command; help of a group lists its commands', async () => {
    const global = await run(['help']);
    expect(global.code).toBe(0);
    for (const name of ['serve', 'keys revoke', 'apps commit', 'documents import', 'coverage']) {
      expect(global.stdout).toContain(`  ${name} `);
    }
    expect((await run(['--help'])).stdout).toBe(global.stdout);
    const group = await run(['keys', '--help']);
    expect(group.stdout).toContain('USAGE\n  workspace keys <command> [flags]');
    expect(group.stdout).toMatch(/keys revoke +Revoke an API key/);
    expect((await run(['help', 'keys'])).stdout).toBe(group.stdout);
  });

  it('help for an unknown command is a usage error', async () => {
    const result = await run(['help', 'frobnicate']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Unknown command "frobnicate".');
  });
});

describe('exit codes and errors', { timeout: 180_000 }, () => {
  it('usage errors exit 2 and say what is wrong: unknown command, subcommand, flag, a missing argument, a bad value', async () => {
    const cases: [string[], string][] = [
      [['frobnicate'], 'Unknown command "frobnicate".'],
      [['keys', 'frobnicate'], 'Unknown command "frobnicate" for "workspace keys". Its commands: create, list'],
      [['keys'], '"workspace keys" needs a command.'],
      [['tenants', 'list', '--frobnicate'], 'Unknown flag --frobnicate'],
      [['keys', 'list'], 'Missing <tenant_id>.'],
      [['keys', 'create', 'acme', '--scopes', 'apps:read'], 'Missing --name NAME.'],
      [['keys', 'create', 'acme', '--name'], '--name needs a value.'],
      [['keys', 'list', 'acme', 'extra'], "Unexpected argument 'extra'."],
      [
        ['sources', 'sync', 'x', '--interval', 'soon', '--api-key', 'k'],
        "--interval takes a number of seconds, got 'soon'.",
      ],
      [['tenants', 'list', '--token', ''], 'No operator token: pass --token or set ADMIN_TOKEN.'],
    ];
    for (const [args, message] of cases) {
      const result = await run(args, { env: { ADMIN_TOKEN: '' } });
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toContain(`workspace: ${message}`);
      expect(result.stderr, args.join(' ')).toMatch(/Run 'workspace .*--help' for/);
      expect(result.stdout).toBe('');
    }
  });

  it('an API refusal or a server out of reach exits 1', async () => {
    const refused = await run(['keys', 'create', 'no-such-tenant', '--name', 'x', '--scopes', 'apps:read']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^workspace: 404 not_found: .+\n$/);
    const unreachable = await run(['tenants', 'list'], { env: { WORKSPACE_URL: 'http://127.0.0.1:9' } });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('Cannot reach the server at http://127.0.0.1:9');
  });

  it('with --json an error is JSON on stderr: the API error body with its status, or a usage error naming the flag', async () => {
    const { tenantId } = await t.tenant();
    const api = await run(['keys', 'create', tenantId, '--name', 'x', '--scopes', 'root:all', '--json']);
    expect(api.code).toBe(1);
    expect(api.stdout).toBe('');
    const body = JSON.parse(api.stderr);
    expect(body).toMatchObject({
      error: { status: 422, type: 'invalid_request_error', code: 'validation_error', param: 'scopes[0]' },
    });
    expect(body.error.message).toEqual(expect.any(String));

    const usage = await run(['keys', 'create', tenantId, '--name', 'x', '--scopes', 'a:read', '--bogus', '--json']);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stderr)).toEqual({
      error: { type: 'usage_error', code: 'unknown_flag', message: 'Unknown flag --bogus', param: '--bogus' },
    });
    const unreachable = await run(['tenants', 'list', '--json'], { env: { WORKSPACE_URL: 'http://127.0.0.1:9' } });
    expect(unreachable.code).toBe(1);
    // Progress (here: the retries) goes to stderr too; the error is its last line.
    expect(JSON.parse(unreachable.stderr.trim().split('\n').at(-1) ?? '')).toMatchObject({
      error: { type: 'command_error', code: 'server_unreachable' },
    });
  });
});

describe('keys create --expires-at', { timeout: 180_000 }, () => {
  it('takes a plain date as the start of that day in UTC, and a timestamp with its offset', async () => {
    const { tenantId } = await t.tenant();
    const byDate = await run([
      'keys',
      'create',
      tenantId,
      '--name',
      'd',
      '--scopes',
      'apps:read',
      '--expires-at',
      '2027-01-01',
      '--json',
    ]);
    expect(byDate.code, byDate.stderr).toBe(0);
    expect(JSON.parse(byDate.stdout).expires_at).toBe('2027-01-01T00:00:00.000Z');
    const byTime = await run([
      'keys',
      'create',
      tenantId,
      '--name',
      't',
      '--scopes',
      'apps:read',
      '--expires-at',
      '2027-01-01T09:30:00+02:00',
      '--json',
    ]);
    expect(byTime.code, byTime.stderr).toBe(0);
    expect(JSON.parse(byTime.stdout).expires_at).toBe('2027-01-01T07:30:00.000Z');
  });

  it('a bad date is a usage error naming the flag, and no key is made', async () => {
    const { tenantId } = await t.tenant();
    const before = (await keysOf(tenantId)).length;
    for (const bad of ['2027-02-30', '2027-13-01', 'tomorrow', '2027-01-01T09:30', '01/02/2027']) {
      const result = await run([
        'keys',
        'create',
        tenantId,
        '--name',
        'x',
        '--scopes',
        'apps:read',
        '--expires-at',
        bad,
      ]);
      expect(result.code, bad).toBe(2);
      expect(result.stderr, bad).toContain(`workspace: --expires-at takes a date (2027-01-01`);
      expect(result.stderr, bad).toContain(`got '${bad}'`);
    }
    expect(await keysOf(tenantId)).toHaveLength(before);
  });
});

describe('keys revoke', { timeout: 180_000 }, () => {
  async function activeKey() {
    const { tenantId } = await t.tenant();
    await t.key(tenantId, ['apps:read']);
    const [key] = await keysOf(tenantId);
    return { tenantId, keyId: key?.id ?? '' };
  }
  const statusOf = async (tenantId: string, keyId: string) =>
    (await keysOf(tenantId)).find((k) => k.id === keyId)?.status;

  it('without a terminal and without --yes it refuses with a usage error telling to pass --yes', async () => {
    const { tenantId, keyId } = await activeKey();
    const result = await run(['keys', 'revoke', keyId]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('pass --yes');
    expect(await statusOf(tenantId, keyId)).toBe('active');

    const yes = await run(['keys', 'revoke', keyId, '--yes']);
    expect(yes.code, yes.stderr).toBe(0);
    expect(yes.stdout).toBe(`Key ${keyId} is now revoked.\n`);
    expect(await statusOf(tenantId, keyId)).toBe('revoked');
  });

  it('on a terminal it asks; anything but yes keeps the key (exit 1), yes revokes it', async () => {
    const { tenantId, keyId } = await activeKey();
    const no = await run(['keys', 'revoke', keyId], { interactive: true, stdin: 'n\n' });
    expect(no.stderr).toContain(`Revoke key ${keyId}? It stops working at once, for good. [y/N] `);
    expect(no.code).toBe(1);
    expect(no.stderr).toContain('Not revoked.');
    expect(await statusOf(tenantId, keyId)).toBe('active');

    const ended = await run(['keys', 'revoke', keyId], { interactive: true, stdin: '' });
    expect(ended.code).toBe(1);
    expect(await statusOf(tenantId, keyId)).toBe('active');

    const typing = new PassThrough();
    const pending = run(['keys', 'revoke', keyId], { interactive: true, stdin: typing });
    typing.write('yes\n');
    const yes = await pending;
    expect(yes.code, yes.stderr).toBe(0);
    expect(await statusOf(tenantId, keyId)).toBe('revoked');
  });
});
