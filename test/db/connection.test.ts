// A PostgreSQL connection lost (src/db/client.ts): the database restarted, a failover or a proxy cut
// it. The pool's clients see it as an 'error' event, which nobody listened to: the process ended.
// PostgreSQL only (TEST_DATABASE_URL), through a TCP proxy of the test's own that can cut them.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import { cuttableProxy } from '../helpers.js';

const url = process.env.TEST_DATABASE_URL;

describe.runIf(url)('a PostgreSQL connection lost', () => {
  it('ends no process: the query on it fails, a client idle or checked out is dropped, and the next query connects afresh', async () => {
    const proxy = await cuttableProxy(new URL(url as string));
    const database = await openDatabase({ url: proxy.url, poolSize: 2 });
    try {
      // Two clients made; one goes on idle in the pool, the other is checked out by a transaction.
      await Promise.all([sql`select pg_sleep(0.05)`.execute(database.db), sql`select 1`.execute(database.db)]);
      const transaction = database.db.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        proxy.cut();
        // Both clients hear of it between queries: the idle one through the pool, the other itself.
        await new Promise((resolve) => setTimeout(resolve, 200));
        await sql`select 1`.execute(trx);
      });
      await expect(transaction).rejects.toThrow();
      proxy.restore();
      const { rows } = await sql<{ n: number }>`select 2 as n`.execute(database.db);
      expect(rows).toEqual([{ n: 2 }]);
    } finally {
      await database.close();
      await proxy.close();
    }
  });
});
