// The database handle: embedded PGlite (files under DATA_DIR, or in memory for tests) or
// PostgreSQL through one pg pool. The same SQL and migrations serve both.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { StartStage } from '../lib/start-progress.js';
import { observedDialect } from '../observability/database.js';
import { createDataDir, PGliteThread } from './pglite-thread.js';
import { prepareStatements } from './prepared.js';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

export interface DatabaseHandle {
  db: Db;
  kind: 'pglite' | 'postgres';
  /** PGlite: the database's files, which `template` starts another from (PGliteThread.dump). */
  dump?: () => Promise<Uint8Array>;
  close(): Promise<void>;
}

// int8 (counts, sums) as numbers.
pg.types.setTypeParser(20, (value) => Number.parseInt(value, 10));

// PGlite's embedded server: 16 MB of shared buffers rather than PostgreSQL's 128 MB, which PGlite
// touches in full at start. Pages beyond them are read from the data directory's files (or memory).
export const PGLITE_OPTIONS = { postgresqlconf: ['shared_buffers = 16MB'] };

export interface DatabaseOptions {
  /** postgres:// URL; when absent, PGlite is used. */
  url?: string | undefined;
  /** PGlite data directory; when absent with no url, an in-memory database. */
  dataDir?: string | undefined;
  /**
   * An in-memory PGlite's files to start from (another's `dump`) rather than an empty database:
   * tests start each app's database from one made and migrated once.
   */
  template?: Uint8Array | undefined;
  /** PostgreSQL schema to work in (tests isolate each run in its own). */
  schema?: string | undefined;
  poolSize?: number;
  /** Statements each PostgreSQL connection keeps prepared (see prepared.ts); 0 prepares none. */
  preparedStatements?: number;
  /** Shows a lengthy step (creating an embedded database) as a stage of the start. */
  stage?: StartStage | undefined;
}

// A connection lost (the database restarted, a failover, a proxy or `pg_terminate_backend` cut it)
// is an 'error' event on its client, which the pool re-emits for a client it holds idle; an event
// nobody listens to ends the process. It is no error of any request: the query running on that
// connection, if any, fails with it, and the pool drops the client and connects afresh.
const connectionLost = () => {};

/** node-postgres over a pool of clients, with prepared statements unless turned off. */
function postgres(config: pg.PoolConfig, preparedStatements: number, kind: DatabaseHandle['kind']): Db {
  const pool = new pg.Pool(config);
  pool.on('error', connectionLost);
  pool.on('connect', (client) => {
    // A client checked out between two queries (a transaction's) has no pool listener.
    client.on('error', connectionLost);
    if (preparedStatements > 0) prepareStatements(client, preparedStatements);
  });
  return new Kysely<Database>({ dialect: observedDialect(new PostgresDialect({ pool }), pool, kind) });
}

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  const prepared = options.preparedStatements ?? 200;
  if (options.url) {
    const db = postgres(
      {
        connectionString: options.url,
        max: options.poolSize ?? 10,
        // A database that does not answer a new connection, or a request that waits this long
        // for a pooled one, fails rather than waits forever; TCP keepalive finds dead peers.
        connectionTimeoutMillis: 10_000,
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
        ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
      },
      prepared,
      'postgres',
    );
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  // PGlite runs in a thread of its own, spoken to by the same driver (pglite-thread.ts). Its one
  // session is shared by a few clients: enough that the thread always has the next query at hand.
  if (options.template && options.dataDir) throw new Error('a template starts an in-memory database, not a DATA_DIR');
  let dir: string | undefined;
  let unlock = () => {};
  if (options.dataDir) {
    mkdirSync(options.dataDir, { recursive: true });
    unlock = lockDataDir(options.dataDir);
    dir = path.resolve(options.dataDir, 'pgdata');
  }
  let thread: PGliteThread;
  try {
    if (dir && !existsSync(path.join(dir, 'PG_VERSION'))) {
      const create = () => createDataDir(dir, PGLITE_OPTIONS);
      await (options.stage ? options.stage(`Creating the database at ${options.dataDir}`, create) : create());
    }
    thread = await PGliteThread.open(dir, PGLITE_OPTIONS, options.template);
  } catch (error) {
    unlock();
    throw error;
  }
  // Clients are kept (no idle timeout): each one's prepared statements live in the shared session.
  const db = postgres(
    { max: options.poolSize ?? 4, idleTimeoutMillis: 0, stream: () => thread.connect() },
    prepared,
    'pglite',
  );
  return {
    db,
    kind: 'pglite',
    dump: () => thread.dump(),
    close: async () => {
      try {
        await db.destroy();
        await thread.close();
      } finally {
        unlock();
      }
    },
  };
}

/** The database named by the settings could not be opened, or did not answer: said in one line. */
export class DatabaseStartError extends Error {}

/**
 * Opens the database and asks it one question, so that a start on a database that does not
 * answer (nothing listening, a wrong host, a refused login, a DATA_DIR that cannot be written)
 * stops with a line naming the setting rather than failing later inside a migration.
 */
export async function openDatabaseAtStart(options: DatabaseOptions): Promise<DatabaseHandle> {
  let handle: DatabaseHandle | undefined;
  try {
    handle = await openDatabase(options);
    await sql`select 1`.execute(handle.db);
    return handle;
  } catch (error) {
    await handle?.close().catch(() => {});
    // The DATA_DIR lock's refusal already names DATA_DIR and the process that holds it.
    if ((error as NodeJS.ErrnoException).code === 'EBUSY') throw error;
    throw new DatabaseStartError(describeStartFailure(options, error));
  }
}

function describeStartFailure(options: DatabaseOptions, error: unknown): string {
  if (options.url) {
    // A server that answered with an error (SQLSTATE: no such database, login refused) did answer.
    const how = error instanceof pg.DatabaseError ? 'refused the connection' : 'does not answer';
    return `DATABASE_URL (${redactUrl(options.url)}) ${how}: ${maskPassword(oneLine(error), options.url)}`;
  }
  const where = options.dataDir ? `DATA_DIR (${path.resolve(options.dataDir)})` : 'the in-memory database';
  return `${where} cannot be opened: ${oneLine(error)}`;
}

/** `url` with its password (in the user part or a `password` query parameter) as `***`. */
function redactUrl(url: string): string {
  const parsed = parseUrl(url);
  // Config refuses a DATABASE_URL that does not parse; any other is masked up to its last `@`.
  if (!parsed) return url.replace(/\/\/.*@/, '//***@');
  if (parsed.password) parsed.password = '***';
  if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
  return parsed.href;
}

/** No driver message is known to quote the password; should one ever, it is masked all the same. */
function maskPassword(text: string, url: string): string {
  const password = parseUrl(url)?.password;
  if (!password) return text;
  let plain = password;
  try {
    plain = decodeURIComponent(password);
  } catch {
    // Not percent-encoded as a whole: the password is as written.
  }
  return [plain, password].reduce((masked, form) => masked.split(form).join('***'), text);
}

function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

/** An error's message on one line; an AggregateError (each address of a host tried) lists each. */
function oneLine(error: unknown): string {
  const message =
    error instanceof AggregateError && error.errors.length > 0
      ? error.errors.map((inner) => (inner instanceof Error ? inner.message : String(inner))).join('; ')
      : error instanceof Error
        ? error.message
        : String(error);
  return message.replace(/\s+/g, ' ').trim() || 'no reason given';
}

/**
 * PGlite is one process's database: two opening the same files (a second server, `workspace
 * migrate` while the server runs) each write over the other's, and acknowledged writes are lost or
 * the files left unusable. So the data directory is taken with a lock file holding the owner's pid;
 * a lock whose process is gone (killed) is taken over. Answers the function that lets it go.
 */
export function lockDataDir(dataDir: string): () => void {
  const file = path.resolve(dataDir, 'workspace.lock');
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw error;
      const owner = Number.parseInt(readFileSync(file, 'utf8'), 10);
      // Our own pid is ours only if this process took the lock: otherwise a killed process whose
      // pid we were given again left it (in a container the server is pid 1 at every start).
      const held = owner === process.pid ? locksHeld.has(file) : processAlive(owner);
      if (Number.isInteger(owner) && owner > 0 && held) {
        throw Object.assign(
          new Error(
            `DATA_DIR ${path.resolve(dataDir)} is in use by process ${owner} (a server, or \`workspace migrate\`); ` +
              `the embedded database takes one process at a time: stop that one first (or, if it is not ours, remove ${file}).`,
          ),
          { code: 'EBUSY' },
        );
      }
      rmSync(file, { force: true }); // its process is gone: a stale lock
    }
  }
  locksHeld.add(file);
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    locksHeld.delete(file);
    rmSync(file, { force: true });
  };
}

/** The lock files this process holds. */
const locksHeld = new Set<string>();

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // alive, someone else's
  }
}
