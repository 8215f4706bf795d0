// Shared fixtures: a real app on a fresh database for each test file (in-memory PGlite, or a
// schema of its own on PostgreSQL when TEST_DATABASE_URL is set; Redis when TEST_REDIS_URL is
// set), tenants and keys made through the control plane, and requests through `inject`.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { type Kysely, type KyselyPlugin, type QueryId, type RawBuilder, type RootOperationNode, sql } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import { type App, buildApp } from '../src/app.js';
import { type Config, loadConfig } from '../src/config.js';
import { type DatabaseHandle, type Db, openDatabase } from '../src/db/client.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { ALL_SCOPES } from '../src/domain/accounts/scopes.js';
import { connectRedis } from '../src/lib/redis.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestApp extends App {
  config: Config;
  database: DatabaseHandle;
  /** The app's Redis client, when it has one. */
  redis: Redis | undefined;
  /** A JSON request; `key` sets X-API-Key. */
  call(options: CallOptions): Promise<CallResult>;
  /** Creates a tenant and a key with the given scopes (every scope by default). */
  tenant(scopes?: string[]): Promise<{ tenantId: string; key: string }>;
  /** Another key of an existing tenant. */
  key(tenantId: string, scopes: string[]): Promise<string>;
  close(): Promise<void>;
}

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  key?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: tests read JSON bodies loosely.
  body: any;
  text: string;
}

export const usingPostgres = Boolean(process.env.TEST_DATABASE_URL);

/** The migrated database every PGlite test app starts from (support/pglite-template.ts), read once. */
let template: Uint8Array | undefined;
function pgliteTemplate(): Uint8Array | undefined {
  const file = inject('pgliteTemplate');
  if (file !== undefined) template ??= readFileSync(file);
  return template;
}

/**
 * PostgreSQL: how many lock requests matching `where` (a condition on `pg_locks`) wait, polled
 * every 20 ms until one does or 10 s have passed. For tests that hold a lock in one session while
 * the server's work queues behind it.
 */
export async function lockWaiters<DB>(session: Kysely<DB>, where: RawBuilder<unknown>): Promise<number> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from pg_locks where not granted and ${where}`.execute(session);
    if ((rows[0]?.n ?? 0) > 0) return rows[0]?.n ?? 0;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return 0;
}

/** For `lockWaiters`: a lock request waiting for a session that itself waits for the caller's. */
export const QUEUED_BEHIND = sql`exists (
  select 1 from pg_locks b where not b.granted and b.pid = any(pg_blocking_pids(pg_locks.pid))
    and pg_backend_pid() = any(pg_blocking_pids(b.pid)))`;

export interface TestAppOptions {
  /** Share rate-limit counters between apps (Redis runs only). */
  redisNamespace?: string;
  /** Redis at this URL rather than TEST_REDIS_URL's (one that does not answer, say). */
  redisUrl?: string;
  /** Start the job queue's poller (tests otherwise run jobs with `await t.jobs.runUntilIdle()`). */
  startJobs?: boolean;
  /** Receives the app's JSON log lines. */
  logStream?: NodeJS.WritableStream;
  /** PostgreSQL runs: the app connects here (a proxy to TEST_DATABASE_URL, say) rather than to it. */
  databaseUrl?: string;
  /** The database handle the app is given, made from the test's (a plugin that fails on demand, say). */
  wrapDb?: (db: Db) => Db;
  /** Adds routes of the test's own before the app is ready. */
  routes?: (app: FastifyInstance) => void;
}

export async function startTestApp(env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const config = loadConfig({ LOG_LEVEL: 'silent', ADMIN_TOKEN, RATE_LIMIT_PER_MINUTE: '100000', ...env });
  const schema = usingPostgres ? `test_${randomBytes(6).toString('hex')}` : undefined;
  if (schema) {
    const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await client.connect();
    await client.query(`create schema ${schema}`);
    await client.end();
  }
  const database = await openDatabase({
    url: usingPostgres ? (options.databaseUrl ?? process.env.TEST_DATABASE_URL) : undefined,
    schema,
    template: usingPostgres ? undefined : pgliteTemplate(),
  });
  await migrateToLatest(database.db);
  // The server's own client (src/lib/redis.ts), so tests see Redis as the server does.
  const redisUrl = options.redisUrl ?? process.env.TEST_REDIS_URL;
  const redis = redisUrl ? await connectRedis(redisUrl) : undefined;
  const built = await buildApp({
    config,
    db: options.wrapDb ? options.wrapDb(database.db) : database.db,
    redis,
    redisNamespace: options.redisNamespace ?? `test-rl-${randomBytes(4).toString('hex')}:`,
    ...(options.logStream ? { logStream: options.logStream } : {}),
  });
  options.routes?.(built.app);
  await built.app.ready();
  if (options.startJobs) built.jobs.start();

  const call = async ({ method = 'GET', url, key, body, headers = {} }: CallOptions): Promise<CallResult> => {
    const response = await built.app.inject({
      method,
      url,
      headers: { ...(key ? { 'x-api-key': key } : {}), ...headers },
      ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
    });
    let parsed: unknown;
    try {
      parsed = response.body ? JSON.parse(response.body) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: response.statusCode, headers: response.headers, body: parsed, text: response.body };
  };

  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const key = async (tenantId: string, scopes: string[]) => {
    const created = await call({
      method: 'POST',
      url: `/admin/v1/tenants/${tenantId}/api-keys`,
      headers: admin,
      body: { name: 'test', scopes },
    });
    if (created.status !== 201) throw new Error(`key: ${created.text}`);
    return created.body.secret as string;
  };

  return {
    ...built,
    config,
    database,
    redis,
    call,
    key,
    async tenant(scopes = ALL_SCOPES) {
      const tenantId = `t-${randomBytes(5).toString('hex')}`;
      const created = await call({
        method: 'POST',
        url: '/admin/v1/tenants',
        headers: admin,
        body: { tenant_id: tenantId, name: tenantId },
      });
      if (created.status !== 201) throw new Error(`tenant: ${created.text}`);
      return { tenantId, key: await key(tenantId, scopes) };
    },
    async close() {
      await built.app.close();
      redis?.disconnect();
      if (schema) {
        const { sql } = await import('kysely');
        await sql.raw(`drop schema ${schema} cascade`).execute(database.db);
      }
      await database.close();
    },
  };
}

/** Asserts the spec's error body; returns it for further checks. */
export function expectError(result: CallResult, status: number, code: string, param?: string) {
  const detail = `${result.status} ${result.text.slice(0, 300)}`;
  if (result.status !== status) throw new Error(`expected ${status} ${code}, got ${detail}`);
  const error = result.body?.error;
  if (!error || error.code !== code) throw new Error(`expected code ${code}, got ${detail}`);
  if (typeof error.message !== 'string' || error.message === '') throw new Error(`empty message: ${detail}`);
  if (!String(error.doc_url).endsWith(`/docs/errors#${code}`)) throw new Error(`bad doc_url: ${detail}`);
  if (param !== undefined && error.param !== param) throw new Error(`expected param ${param}, got ${detail}`);
  return error;
}

/** A TCP proxy to PostgreSQL; `cut()` drops every connection through it and refuses new ones. */
export async function cuttableProxy(target: URL) {
  const sockets = new Set<net.Socket>();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(target);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as net.AddressInfo).port);
  return {
    url: proxied.toString(),
    cut: () => {
      refusing = true;
      for (const socket of sockets) socket.destroy();
    },
    restore: () => {
      refusing = false;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A plugin (`wrapDb`) that, while held, holds back the answers of the statements `matches` picks
 * (by their SQL text and parameters) until released: the statement has run, and its transaction,
 * connection and whatever waits on them stay taken, as behind a slow statement.
 */
export function statementGate(matches: (fragments: readonly string[], parameters: unknown[]) => boolean) {
  let gate: Promise<void> | undefined;
  let open = () => {};
  const holding = new WeakSet<QueryId>();
  const plugin: KyselyPlugin = {
    transformQuery: (args) => {
      const node = args.node as RootOperationNode & {
        sqlFragments?: readonly string[];
        parameters?: readonly { value?: unknown }[];
      };
      if (
        gate &&
        matches(
          node.sqlFragments ?? [],
          (node.parameters ?? []).map((p) => p.value),
        )
      ) {
        holding.add(args.queryId);
      }
      return args.node;
    },
    transformResult: async (args) => {
      if (gate && holding.has(args.queryId)) await gate;
      return args.result;
    },
  };
  return {
    plugin,
    hold() {
      gate = new Promise<void>((resolve) => (open = resolve));
    },
    release() {
      open();
      gate = undefined;
    },
  };
}
