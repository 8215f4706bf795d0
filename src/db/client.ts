// The database handle: embedded PGlite (files under DATA_DIR, or in memory for tests) or
// PostgreSQL through one pg pool. The same SQL and migrations serve both.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { createDataDir, PGliteThread } from './pglite-thread.js';
import { prepareStatements } from './prepared.js';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

export interface DatabaseHandle {
  db: Db;
  kind: 'pglite' | 'postgres';
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
  /** PostgreSQL schema to work in (tests isolate each run in its own). */
  schema?: string | undefined;
  poolSize?: number;
  /** Statements each PostgreSQL connection keeps prepared (see prepared.ts); 0 prepares none. */
  preparedStatements?: number;
}

/** node-postgres over a pool of clients, with prepared statements unless turned off. */
function postgres(config: pg.PoolConfig, preparedStatements: number): Db {
  const pool = new pg.Pool(config);
  if (preparedStatements > 0) pool.on('connect', (client) => prepareStatements(client, preparedStatements));
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  const prepared = options.preparedStatements ?? 200;
  if (options.url) {
    const db = postgres(
      {
        connectionString: options.url,
        max: options.poolSize ?? 10,
        ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
      },
      prepared,
    );
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  // PGlite runs in a thread of its own, spoken to by the same driver (pglite-thread.ts). Its one
  // session is shared by a few clients: enough that the thread always has the next query at hand.
  let dir: string | undefined;
  if (options.dataDir) {
    mkdirSync(options.dataDir, { recursive: true });
    dir = path.resolve(options.dataDir, 'pgdata');
    if (!existsSync(path.join(dir, 'PG_VERSION'))) await createDataDir(dir, PGLITE_OPTIONS);
  }
  const thread = await PGliteThread.open(dir, PGLITE_OPTIONS);
  // Clients are kept (no idle timeout): each one's prepared statements live in the shared session.
  const db = postgres({ max: options.poolSize ?? 4, idleTimeoutMillis: 0, stream: () => thread.connect() }, prepared);
  return {
    db,
    kind: 'pglite',
    close: async () => {
      await db.destroy();
      await thread.close();
    },
  };
}
