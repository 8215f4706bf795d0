// PGlite in the thread that calls it, reached by the same driver, prepared statements and
// observation as the API's database thread (src/db/pglite-thread.ts): the variant against which
// bench/database.ts measures what that thread buys. One client, as PGlite is one session: each
// batch of the client's messages runs to its end in this thread, and the next waits for it.
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { type DatabaseHandle, PGLITE_OPTIONS } from '../src/db/client.js';
import { ThreadSocket } from '../src/db/pglite-thread.js';
import { prepareStatements } from '../src/db/prepared.js';
import type { Database } from '../src/db/schema.js';
import { observedDialect } from '../src/observability/database.js';

export async function openPGliteHere(dataDir: string): Promise<DatabaseHandle> {
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = new PGlite(path.join(dataDir, 'pgdata'), PGLITE_OPTIONS);
  await pglite.waitReady;
  let previous: Promise<unknown> = Promise.resolve();
  const stream = () => {
    const socket: ThreadSocket = new ThreadSocket({
      send: (bytes) => {
        previous = previous.then(async () => {
          const chunks: Uint8Array[] = [];
          try {
            await pglite.execProtocolRawStream(bytes, {
              syncToFs: false,
              onRawData: (chunk) => chunks.push(chunk.slice()),
            });
            socket.receive(Buffer.concat(chunks));
          } catch (error) {
            socket.destroy(error as Error);
          }
        });
      },
      gone: () => {},
    });
    return socket;
  };
  const pool = new pg.Pool({ max: 1, idleTimeoutMillis: 0, stream });
  pool.on('connect', (client) => prepareStatements(client, 200));
  const db = new Kysely<Database>({ dialect: observedDialect(new PostgresDialect({ pool }), pool, 'pglite') });
  return {
    db,
    kind: 'pglite',
    close: async () => {
      await db.destroy();
      await pglite.close();
    },
  };
}
