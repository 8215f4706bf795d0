// The database handle: embedded PGlite (files under DATA_DIR, or in memory for tests) or
// PostgreSQL through one pg pool. The same SQL and migrations serve both.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { PGliteDialect } from './pglite-dialect.js';
import { createDataDir, PGliteThread } from './pglite-thread.js';
import { prepareStatements } from './prepared.js';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

export interface DatabaseHandle {
  db: Db;
  kind: 'pglite' | 'postgres';
  close(): Promise<void>;
}

// int8 (counts, sums) as numbers, as PGlite returns them.
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

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  if (options.url) {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? 10,
      ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    });
    const prepared = options.preparedStatements ?? 200;
    if (prepared > 0) pool.on('connect', (client) => prepareStatements(client, prepared));
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  // PGlite runs in a thread of its own (pglite-thread.ts); a server on PostgreSQL never loads it.
  let dir: string | undefined;
  if (options.dataDir) {
    dir = path.resolve(options.dataDir, 'pgdata');
    mkdirSync(dir, { recursive: true });
    if (!existsSync(path.join(dir, 'PG_VERSION'))) await createDataDir(dir, PGLITE_OPTIONS);
  }
  const db = new Kysely<Database>({ dialect: new PGliteDialect(await PGliteThread.open(dir, PGLITE_OPTIONS)) });
  return { db, kind: 'pglite', close: () => db.destroy() };
}
