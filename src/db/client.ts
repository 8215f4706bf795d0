// The database handle: embedded PGlite (files under DATA_DIR, or in memory for tests) or
// PostgreSQL through one pg pool. The same SQL and migrations serve both.
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { PGliteDialect } from './pglite-dialect.js';
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
const PGLITE_OPTIONS = { postgresqlconf: ['shared_buffers = 16MB'] };

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
  // Loaded only for the embedded database: a server on PostgreSQL does not hold it.
  const { PGlite: EmbeddedPostgres } = await import('@electric-sql/pglite');
  let pglite: PGlite;
  if (options.dataDir) {
    const dir = path.resolve(options.dataDir, 'pgdata');
    mkdirSync(dir, { recursive: true });
    if (!existsSync(path.join(dir, 'PG_VERSION'))) await createDataDir(dir);
    pglite = new EmbeddedPostgres(dir, PGLITE_OPTIONS);
  } else {
    pglite = new EmbeddedPostgres(PGLITE_OPTIONS);
  }
  await pglite.waitReady;
  const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
  return { db, kind: 'pglite', close: () => db.destroy() };
}

/**
 * Creates a PGlite data directory (initdb) in a worker thread. initdb takes some 500 MB of
 * WebAssembly memory, which in the server's own thread stays resident until a full collection
 * (seen: 816 MB under load after a first start); a worker's memory is released when it ends.
 */
async function createDataDir(dir: string): Promise<void> {
  const module = pathToFileURL(createRequire(import.meta.url).resolve('@electric-sql/pglite')).href;
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     import(workerData.module).then(async ({ PGlite }) => {
       const pglite = new PGlite(workerData.dir, workerData.options);
       await pglite.waitReady;
       await pglite.close();
     });`,
    { eval: true, workerData: { module, dir, options: PGLITE_OPTIONS } },
  );
  await new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb worker exited with ${code}`))));
  });
}
