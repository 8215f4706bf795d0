// The API's server for bench/database.ts, with one piece of the database layer's machinery as
// BENCH_DATABASE says: `all` (as the server runs), `unprepared` (no prepared statements),
// `uncoalesced` (DATABASE_COALESCING=off, set by the caller), `one-client` (a pool of one client
// rather than four on PGlite's thread) or `in-thread` (PGlite in the server's own thread, one
// client: pglite-here.ts). Environment as `workspace serve` takes it (DATA_DIR or
// DATABASE_URL, PORT, ADMIN_TOKEN, …).

import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/index.js';
import { tuneHeapGrowth } from '../src/lib/heap.js';
import { openPGliteHere } from './pglite-here.js';

const variant = process.env.BENCH_DATABASE ?? 'all';
const config = loadConfig();
const database =
  variant === 'in-thread'
    ? await openPGliteHere(config.dataDir ?? '')
    : await openDatabase({
        url: config.databaseUrl,
        dataDir: config.dataDir,
        preparedStatements: variant === 'unprepared' ? 0 : config.databasePreparedStatements,
        ...(variant === 'one-client' ? { poolSize: 1 } : {}),
      });
tuneHeapGrowth(database.kind);
await migrateToLatest(database.db);
const { app } = await buildApp({ config, db: database.db });
await app.listen({ host: '127.0.0.1', port: config.port });
const stop = async () => {
  await app.close();
  await database.close();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
