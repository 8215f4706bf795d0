// What the in-process benchmarks share: a database of their own (a fresh schema on PostgreSQL,
// dropped at the end; in-memory PGlite otherwise), migrated, and the app listening on 127.0.0.1.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { type DatabaseHandle, openDatabase } from '../src/db/client.js';
import { migrateToLatest } from '../src/db/migrate.js';

/** Runs `work` on a migrated database: DATABASE_URL in a schema `<prefix>_<hex>`, else PGlite. */
export async function withBenchDatabase(prefix: string, work: (database: DatabaseHandle) => Promise<void>) {
  const databaseUrl = process.env.DATABASE_URL;
  const schema = databaseUrl ? `${prefix}_${randomBytes(4).toString('hex')}` : undefined;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(statement);
    await client.end();
  };
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
