// What the benchmarks share: a database of their own (a fresh schema on PostgreSQL, dropped at
// the end; PGlite otherwise), in process with the app listening on 127.0.0.1, or for a server
// process, seeded through the API; the server's start, and the load generator.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { type DatabaseHandle, openDatabase } from '../src/db/client.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { ALL_SCOPES } from '../src/domain/accounts/scopes.js';

/** Runs one statement on DATABASE_URL (creating and dropping the benchmarks' schemas). */
async function admin(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Runs `work` on a migrated database: DATABASE_URL in a schema `<prefix>_<hex>`, else PGlite. */
export async function withBenchDatabase(prefix: string, work: (database: DatabaseHandle) => Promise<void>) {
  const databaseUrl = process.env.DATABASE_URL;
  const schema = databaseUrl ? `${prefix}_${randomBytes(4).toString('hex')}` : undefined;
  if (schema) await admin(`create schema ${schema}`);
  const database = await openDatabase({ url: databaseUrl, schema });
  try {
    await migrateToLatest(database.db);
    await work(database);
  } finally {
    await database.close();
    if (schema) await admin(`drop schema ${schema} cascade`);
  }
}

/** A server process's own database: a PostgreSQL schema, or a PGlite data directory. */
export interface ServerDatabase {
  schema: string | undefined;
  dataDir: string | undefined;
  /** Drops the schema, or deletes the directory. */
  remove(): Promise<void>;
}

/**
 * A database of its own for a server process started with `env`: with DATABASE_URL a new schema
 * `<prefix>_<hex>` that env.DATABASE_URL then points into, else a new data directory in
 * env.DATA_DIR (embedded PGlite).
 */
export async function serverDatabase(prefix: string, env: Record<string, string>): Promise<ServerDatabase> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), `ws-${prefix}-`));
    env.DATA_DIR = dataDir;
    delete env.DATABASE_URL;
    return { schema: undefined, dataDir, remove: async () => rmSync(dataDir, { recursive: true, force: true }) };
  }
  const schema = `${prefix.replaceAll('-', '_')}_${randomBytes(4).toString('hex')}`;
  await admin(`create schema ${schema}`);
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  env.DATABASE_URL = url.toString();
  return { schema, dataDir: undefined, remove: () => admin(`drop schema ${schema} cascade`) };
}

/** The app on the database, listening on a free port of 127.0.0.1, with the rate limit lifted. */
export async function startBenchApp(database: DatabaseHandle, env: Record<string, string> = {}) {
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '10000000',
    HOST: '127.0.0.1',
    PORT: '0',
    ...env,
  });
  const built = await buildApp({ config, db: database.db });
  await built.app.listen({ host: '127.0.0.1', port: 0 });
  const address = built.app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return { ...built, config, origin: `http://127.0.0.1:${address.port}` };
}

/** The server as `npm start` runs it: compiled JavaScript (`npm run build` first). */
export const SERVER = path.resolve('dist/src/cli/main.js');

/** The Node.js flags of `npm start` (package.json), so that the server is measured as it is run. */
export function startFlags(): string[] {
  const { scripts } = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } };
  return (/node ((?:--\S+ )*)dist\/src\/cli\/main\.js/.exec(scripts.start)?.[1] ?? '').split(' ').filter(Boolean);
}

/** What the benchmarks read of an autocannon run. */
export interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; max: number };
  non2xx: number;
  errors: number;
}

/** autocannon (CommonJS, untyped), loaded once for every benchmark. */
export const autocannon = createRequire(import.meta.url)('autocannon') as (
  options: Record<string, unknown>,
) => Promise<AutocannonResult>;

/** A port free on 127.0.0.1 now, for a server process to listen on. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** Waits until the server process `child` answers /healthz, up to `timeoutMs`. */
export async function waitHealthy(url: string, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      /* starting */
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not become healthy`);
}

/** Stops a server process cleanly (SIGTERM, so a profile it was asked for is written), waiting up to 20 s. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(null);
    child.once('exit', resolve);
    setTimeout(resolve, 20_000).unref();
  });
}

/** /proc reports CPU time in clock ticks of 10 ms on Linux. */
const TICK_US = 1e6 / 100;

/**
 * User + system CPU time so far, in microseconds (null off Linux): of a process (all its threads),
 * or of its main thread alone, the one that runs its JavaScript.
 */
export function processCpuUs(pid: number | undefined, mainThreadOnly = false): number | null {
  if (pid === undefined) return null;
  try {
    const file = mainThreadOnly ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`;
    const fields = readFileSync(file, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * TICK_US;
  } catch {
    return null;
  }
}

/** A JSON call to the API under test; anything but a 2xx stops the benchmark. */
export async function api(base: string, method: string, p: string, body: unknown, headers: Record<string, string>) {
  const r = await fetch(`${base}${p}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
  return (await r.json()) as Record<string, unknown>;
}

/**
 * Seeds the server at `base` through the API as an operator would (`adminToken`): the workspace
 * `bench`, a key with every scope (answered), and a custom data source `orders` of `count` rows
 * `row-<i>`, each with the fields `row(i)` gives (`data`, `searchable_text`).
 */
export async function seedOrders(
  base: string,
  adminToken: string,
  count: number,
  row: (i: number) => Record<string, unknown>,
): Promise<string> {
  const operator = { authorization: `Bearer ${adminToken}` };
  await api(base, 'POST', '/admin/v1/tenants', { tenant_id: 'bench', name: 'Bench' }, operator);
  const key = (
    await api(base, 'POST', '/admin/v1/tenants/bench/api-keys', { name: 'bench', scopes: ALL_SCOPES }, operator)
  ).secret as string;
  const auth = { 'x-api-key': key };
  await api(base, 'POST', '/api/v1/custom-data-sources', { name: 'Orders', slug: 'orders' }, auth);
  for (let start = 0; start < count; start += 100) {
    const rows = Array.from({ length: Math.min(100, count - start) }, (_, j) => ({
      external_id: `row-${start + j}`,
      ...row(start + j),
    }));
    await api(base, 'POST', '/api/v1/custom-data-sources/orders/rows/batch', { rows }, auth);
  }
  return key;
}
