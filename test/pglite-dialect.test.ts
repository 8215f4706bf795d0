// The embedded database's Kysely dialect (src/db/pglite-dialect.ts): transactions never interleave
// on PGlite's one session, and a chain of queries never starves HTTP requests.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/client.js';
import { startTestApp, type TestApp, usingPostgres } from './helpers.js';

let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(() => t.close());

describe('database handle', () => {
  it('a new PGlite data directory is created (initdb, in a worker thread) and opened again later', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-pgdata-'));
    try {
      const first = await openDatabase({ dataDir });
      expect(existsSync(path.join(dataDir, 'pgdata', 'PG_VERSION'))).toBe(true);
      await sql`create table kept (n int)`.execute(first.db);
      await sql`insert into kept values (7)`.execute(first.db);
      await first.close();
      const again = await openDatabase({ dataDir });
      const { rows } = await sql<{ n: number }>`select n from kept`.execute(again.db);
      expect(rows).toEqual([{ n: 7 }]);
      await again.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it.skipIf(usingPostgres)(
    'PGlite runs with 16 MB of shared buffers (its memory), not PostgreSQL’s 128 MB',
    async () => {
      const { rows } = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(t.database.db);
      expect(rows[0]?.shared_buffers).toBe('16MB');
    },
  );

  it('a long chain of queries (a background job) leaves room for HTTP requests', async () => {
    let chainDone = false;
    const chain = (async () => {
      for (let i = 0; i < 3000; i++) await sql`select ${i}::int as n`.execute(t.database.db);
      chainDone = true;
    })();
    await new Promise((r) => setTimeout(r, 20));
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(chainDone).toBe(false);
    await chain;
  });

  it('concurrent transactions do not see each other’s uncommitted writes', async () => {
    await sql`create table dialect_probe (n int)`.execute(t.database.db);
    const inside = t.database.db.transaction().execute(async (trx) => {
      await sql`insert into dialect_probe values (1)`.execute(trx);
      await new Promise((r) => setTimeout(r, 50));
      throw new Error('roll back');
    });
    const outside = sql<{ n: number }>`select count(*)::int as n from dialect_probe`.execute(t.database.db);
    await expect(inside).rejects.toThrow('roll back');
    expect((await outside).rows[0]?.n).toBe(0);
    expect(
      (await sql<{ n: number }>`select count(*)::int as n from dialect_probe`.execute(t.database.db)).rows[0]?.n,
    ).toBe(0);
  });
});
