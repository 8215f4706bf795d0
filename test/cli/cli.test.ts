// The process a newcomer runs (DESIGN.md §1–2): `workspace serve` on an embedded database seeds
// the demo tenant once, the `workspace` CLI manages tenants and keys over the control plane,
// SIGTERM stops the server cleanly, `workspace migrate` runs migrations, bad config and a database
// that does not answer stop the start with one line.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { BIN, freePort, runCli } from '../support/process.js';

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-cli-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

const run = runCli;

async function serve(env: Record<string, string>) {
  const port = await freePort();
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn', ...env },
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (d) => {
    output += d;
  });
  child.stderr?.on('data', (d) => {
    output += d;
  });
  let ended = false;
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      ended = true;
      resolve(code);
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  // Up to two minutes: a loaded machine starts slowly; a server that exits stops the wait.
  const deadline = Date.now() + 120_000;
  while (!ended && Date.now() < deadline) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 150));
    }
  }
  return { child, url, output: () => output, exited };
}

// Each test starts servers and commands as processes: on a busy machine a start takes seconds, so
// the tests get minutes, not the default minute.
describe('workspace serve and the CLI', { timeout: 300_000 }, () => {
  let operatorToken = '';
  let demoKey = '';

  it('first start on an empty embedded database prints an operator token and a demo key with every scope', async () => {
    const server = await serve({});
    try {
      await new Promise((r) => setTimeout(r, 200));
      operatorToken = /Operator token[^:]*: (wso_\S+)/.exec(server.output())?.[1] ?? '';
      demoKey = /Demo API key[^:]*: (wsk_\S+)/.exec(server.output())?.[1] ?? '';
      expect(operatorToken).not.toBe('');
      expect(demoKey).not.toBe('');
      expect(server.output()).toContain('Demo tenant: demo');
      expect(server.output()).toContain("Try: curl -H 'X-API-Key: <demo key>'");
      const apps = await fetch(`${server.url}/api/v1/apps`, { headers: { 'x-api-key': demoKey } });
      expect(apps.status).toBe(200);
      const wf = await fetch(`${server.url}/api/v1/workflows`, { headers: { 'x-api-key': demoKey } });
      expect(wf.status).toBe(200);

      const env = { WORKSPACE_URL: server.url, ADMIN_TOKEN: operatorToken };
      const tenant = await run(['tenants', 'create', 'cli-co', '--name', 'CLI Co', '--json'], env);
      expect(tenant.code).toBe(0);
      expect(JSON.parse(tenant.stdout)).toMatchObject({ id: 'cli-co', object: 'tenant' });

      const created = await run(['keys', 'create', 'cli-co', '--name', 'ci', '--scopes', 'apps:read', '--json'], env);
      expect(created.code).toBe(0);
      const key = JSON.parse(created.stdout);
      expect(key.secret).toMatch(/^wsk_/);
      expect((await fetch(`${server.url}/api/v1/apps`, { headers: { 'x-api-key': key.secret } })).status).toBe(200);

      const listed = await run(['keys', 'list', 'cli-co'], env);
      expect(listed.stdout).toContain(key.prefix);
      expect(listed.stdout).toContain('active');

      const revoked = await run(['keys', 'revoke', key.id, '--yes'], env);
      expect(revoked.code).toBe(0);
      expect(revoked.stdout).toContain('revoked');
      expect((await fetch(`${server.url}/api/v1/apps`, { headers: { 'x-api-key': key.secret } })).status).toBe(401);

      const refused = await run(['keys', 'create', 'cli-co', '--name', 'x', '--scopes', 'root:all'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('validation_error');
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited, server.output()).toBe(0);
    }
  });

  it('a second start keeps the data and prints no new secrets', async () => {
    const server = await serve({});
    try {
      expect(server.output()).not.toContain('Demo API key');
      expect((await fetch(`${server.url}/api/v1/apps`, { headers: { 'x-api-key': demoKey } })).status).toBe(200);
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited, server.output()).toBe(0);
    }
  });

  it('ADMIN_TOKEN retires the generated operator token; a later start without it generates a new one', async () => {
    const admin = (url: string, token: string) =>
      fetch(`${url}/admin/v1/tenants`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);
    const replaced = 'operator-token-set-by-the-operator-0123';
    const withToken = await serve({ ADMIN_TOKEN: replaced });
    try {
      expect(withToken.output()).toContain('retired, ADMIN_TOKEN replaces it');
      // No demo key was made at this start: the banner does not offer one.
      expect(withToken.output()).not.toContain('<demo key>');
      expect(await admin(withToken.url, operatorToken)).toBe(401);
      expect(await admin(withToken.url, replaced)).toBe(200);
    } finally {
      withToken.child.kill('SIGTERM');
      expect(await withToken.exited, withToken.output()).toBe(0);
    }
    const without = await serve({});
    try {
      const fresh = /Operator token[^:]*: (wso_\S+)/.exec(without.output())?.[1] ?? '';
      expect(fresh).not.toBe('');
      expect(await admin(without.url, operatorToken)).toBe(401);
      expect(await admin(without.url, fresh)).toBe(200);
      operatorToken = fresh;
    } finally {
      without.child.kill('SIGTERM');
      expect(await without.exited, without.output()).toBe(0);
    }
  });

  it('a start with SECRETS_KEY seals the webhook signing secrets stored before it, once, and after a change of key seals them again', async () => {
    const env = { ALLOW_PRIVATE_TARGETS: 'true', LOG_LEVEL: 'info' };
    const plain = await serve(env);
    try {
      const created = await fetch(`${plain.url}/api/v1/webhook-endpoints`, {
        method: 'POST',
        headers: { 'x-api-key': demoKey, 'content-type': 'application/json' },
        body: JSON.stringify({ url: 'http://127.0.0.1:9/hooks', events: ['*'] }),
      });
      expect(created.status).toBe(201);
      expect(plain.output()).not.toContain('sealed');
    } finally {
      plain.child.kill('SIGTERM');
      expect(await plain.exited, plain.output()).toBe(0);
    }
    const first = randomBytes(32).toString('hex');
    // Sealed once under the first key; then, the key changed with the first kept as the previous
    // one, sealed again under the new key, once.
    for (const [keys, expected] of [
      [{ SECRETS_KEY: first }, true],
      [{ SECRETS_KEY: first }, false],
      [{ SECRETS_KEY: randomBytes(32).toString('base64'), SECRETS_KEY_PREVIOUS: first }, true],
    ] as const) {
      const server = await serve({ ...env, ...keys });
      server.child.kill('SIGTERM');
      expect(await server.exited, server.output()).toBe(0);
      expect(server.output().includes('"endpoints":1,"msg":"webhook signing secrets sealed under SECRETS_KEY"')).toBe(
        expected,
      );
    }
  });

  it('SECRETS_KEY takes 32 bytes as hex, base64 or base64url; anything else stops the start without echoing it', () => {
    const bytes = randomBytes(32);
    for (const written of [bytes.toString('hex'), bytes.toString('base64'), bytes.toString('base64url')]) {
      expect(loadConfig({ SECRETS_KEY: written }).secretsKey).toEqual(bytes);
    }
    expect(loadConfig({}).secretsKey).toBeUndefined();
    const previous = randomBytes(32);
    expect(
      loadConfig({ SECRETS_KEY: bytes.toString('hex'), SECRETS_KEY_PREVIOUS: previous.toString('hex') })
        .secretsKeyPrevious,
    ).toEqual(previous);
    expect(() => loadConfig({ SECRETS_KEY_PREVIOUS: previous.toString('hex') })).toThrow(/set SECRETS_KEY too/);
    for (const bad of [randomBytes(16).toString('hex'), randomBytes(31).toString('base64'), 'not a key at all!']) {
      expect(() => loadConfig({ SECRETS_KEY: bad })).toThrow(ConfigError);
      try {
        loadConfig({ SECRETS_KEY: bad });
      } catch (error) {
        expect((error as Error).message).toContain('SECRETS_KEY');
        expect((error as Error).message).not.toContain(bad);
      }
    }
  });

  it('workspace migrate reports the database up to date', async () => {
    const result = await run(['migrate', '--json'], { DATA_DIR: dataDir });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ applied: [] });
  });

  it('a first start that cannot listen still shows its secrets once; a second server on a DATA_DIR in use is refused', async () => {
    const fresh = mkdtempSync(path.join(os.tmpdir(), 'ws-cli-'));
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((taken.address() as AddressInfo).port);
      const failed = await run(['serve'], { DATA_DIR: fresh, PORT: port, HOST: '127.0.0.1', LOG_LEVEL: 'warn' });
      expect(failed.code).toBe(1);
      // The stages of a first start come first (creating, migrating, starting), then one line says why it stopped.
      const lines = failed.stderr.trim().split('\n');
      expect(lines.at(-1)).toContain('EADDRINUSE');
      expect(
        lines.slice(0, -1).every((line) => /^(Creating|Migrating|Starting)/.test(line)),
        failed.stderr,
      ).toBe(true);
      expect(failed.stderr).not.toMatch(/^\s+at /m);
      expect(failed.stdout).toContain('shown once');
      expect(failed.stdout).toMatch(/Demo API key[^:]*: wsk_\S+/);

      const first = await serve({ DATA_DIR: fresh });
      try {
        const second = await run(['migrate'], { DATA_DIR: fresh });
        expect(second.code).toBe(1);
        expect(second.stderr.trim().split('\n')).toHaveLength(1);
        expect(second.stderr).toContain(`is in use by process ${first.child.pid}`);
      } finally {
        first.child.kill('SIGTERM');
        expect(await first.exited, first.output()).toBe(0);
      }
    } finally {
      taken.close();
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('a URL setting that is refused is named without its credentials, whatever the password holds', () => {
    for (const databaseUrl of ['postgres://admin:Pa/ss@db.example.com:5432/app', 'postgres://u:x/y@z@db:5432/app']) {
      expect(() => loadConfig({ DATABASE_URL: databaseUrl })).toThrow(ConfigError);
      try {
        loadConfig({ DATABASE_URL: databaseUrl });
      } catch (error) {
        expect((error as Error).message).toContain('DATABASE_URL');
        expect((error as Error).message).not.toMatch(/Pa\/ss|x\/y/);
      }
    }
  });

  it('a bad setting stops the start with a one-line reason naming the variable', async () => {
    const result = await run(['serve'], { DATA_DIR: dataDir, PORT: 'eighty' });
    expect(result.code).not.toBe(0);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('PORT');
  });

  /** One line on stderr, no stack frames, and a failure exit code. */
  const expectOneLineFailure = (result: { code: number | null; stderr: string }) => {
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1);
    expect(result.stderr).not.toMatch(/^\s+at /m);
  };

  it('a DATABASE_URL that does not answer stops serve and migrate with one line naming it, its password masked', async () => {
    const port = await freePort(); // nothing listens there
    const password = 'S3cr3t-pa55';
    for (const command of ['serve', 'migrate']) {
      const result = await run([command], {
        DATABASE_URL: `postgres://postgres:${password}@127.0.0.1:${port}/x?password=${password}`,
        PORT: String(await freePort()),
      });
      expectOneLineFailure(result);
      expect(result.stderr).toContain(`workspace: cannot ${command === 'serve' ? 'start' : 'migrate'}: DATABASE_URL (`);
      expect(result.stderr).toContain(`postgres://postgres:***@127.0.0.1:${port}/x?password=***)`);
      expect(result.stderr).toContain(`does not answer: connect ECONNREFUSED 127.0.0.1:${port}`);
      expect(result.stderr + result.stdout).not.toContain(password.slice(0, 6));
    }
  });

  it('a DATABASE_URL whose server refuses the login stops the start with one line, not a stack trace', async () => {
    // A server that answers the startup message as PostgreSQL does a wrong password (SQLSTATE 28P01).
    const fields = ['SFATAL', 'C28P01', 'Mpassword authentication failed for user "postgres"'];
    const body = Buffer.from(`${fields.join('\0')}\0\0`);
    const refusal = Buffer.concat([Buffer.from('E'), Buffer.alloc(4), body]);
    refusal.writeUInt32BE(4 + body.length, 1);
    const refusing = createServer((socket) => socket.once('data', () => socket.end(refusal)));
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    try {
      const port = (refusing.address() as AddressInfo).port;
      const result = await run(['serve'], {
        DATABASE_URL: `postgres://postgres:S3cr3t-pa55@127.0.0.1:${port}/x`,
        PORT: String(await freePort()),
      });
      expectOneLineFailure(result);
      expect(result.stderr).toContain(
        `DATABASE_URL (postgres://postgres:***@127.0.0.1:${port}/x) refused the connection: password authentication failed`,
      );
      expect(result.stderr).not.toContain('S3cr3t');
    } finally {
      refusing.close();
    }
  });

  it('a DATA_DIR that cannot be opened stops the start with one line naming it', async () => {
    const notADirectory = path.join(dataDir, 'file');
    writeFileSync(notADirectory, 'a file, not a directory');
    const result = await run(['serve'], { DATA_DIR: path.join(notADirectory, 'data'), PORT: String(await freePort()) });
    expectOneLineFailure(result);
    expect(result.stderr).toContain(
      `workspace: cannot start: DATA_DIR (${path.join(notADirectory, 'data')}) cannot be opened:`,
    );
    expect(result.stderr).toContain('ENOTDIR');
  });
});
