// Prepared statements (src/db/prepared.ts): a parameterised query is prepared once per connection
// and reused, a connection keeps a bounded number, and a statement whose table changed shape is
// prepared afresh. On PostgreSQL (TEST_DATABASE_URL) and on PGlite, whose thread the same driver
// speaks to (src/db/pglite-thread.ts).
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/client.js';

const url = process.env.TEST_DATABASE_URL;

describe('DATABASE_PREPARED_STATEMENTS', () => {
  it('is 200 by default, 0 turns preparing off, and a bad value names the variable', () => {
    expect(loadConfig({}).databasePreparedStatements).toBe(200);
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: '0' }).databasePreparedStatements).toBe(0);
    expect(() => loadConfig({ DATABASE_PREPARED_STATEMENTS: '-1' })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_PREPARED_STATEMENTS: 'many' })).toThrow(/DATABASE_PREPARED_STATEMENTS/);
  });
});

describe(url ? 'prepared statements on PostgreSQL' : 'prepared statements on PGlite', () => {
  const schema = `test_prep_${randomBytes(5).toString('hex')}`;
  let database: DatabaseHandle;

  beforeAll(async () => {
    if (url) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`create schema ${schema}`);
      await client.end();
    }
    // One connection, so every statement below runs in the session whose statements we count.
    database = await openDatabase(
      url ? { url, schema, poolSize: 1, preparedStatements: 3 } : { poolSize: 1, preparedStatements: 3 },
    );
    await sql`create table items (id int primary key, label text not null)`.execute(database.db);
    await sql`insert into items select i, 'item ' || i from generate_series(1, 10) i`.execute(database.db);
  });

  afterAll(async () => {
    await database?.close();
    if (!url) return;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  });

  const prepared = async () =>
    (
      await sql<{ statement: string }>`select statement from pg_prepared_statements order by prepare_time`.execute(
        database.db,
      )
    ).rows.map((r) => r.statement);

  it('prepares a parameterised statement once and reuses it', async () => {
    for (const id of [1, 2, 3]) {
      const { rows } = await sql<{ label: string }>`select label from items where id = ${id}`.execute(database.db);
      expect(rows).toEqual([{ label: `item ${id}` }]);
    }
    const statements = await prepared();
    expect(statements.filter((s) => s.includes('select label from items where id = $1'))).toHaveLength(1);
    // A statement without parameters is sent as it is (nothing to reuse a plan for).
    expect(statements.some((s) => s.includes('pg_prepared_statements'))).toBe(false);
  });

  it('keeps at most the configured number per connection, deallocating the least recently used', async () => {
    for (let n = 1; n <= 6; n++) {
      // Six different texts (the literal differs), each with a parameter.
      const { rows } = await sql<{ n: number }>`select ${n}::int + ${sql.lit(n)} as n`.execute(database.db);
      expect(rows[0]?.n).toBe(2 * n);
    }
    const statements = await prepared();
    expect(statements.length).toBeLessThanOrEqual(3);
    // The newest are the ones kept; the first query of the file was evicted.
    expect(statements.some((s) => s.includes('select label from items'))).toBe(false);
  });

  it('later calls of a statement read their rows as the first call did', async () => {
    const read = (id: number) =>
      sql<{ id: number; label: string; at: Date; ids: number[]; none: null }>`
        select id, label, ${new Date(Date.UTC(2026, 0, id))}::timestamptz as at, array[id, ${id}] as ids,
          null::text as none from items where id = ${id}`.execute(database.db);
    for (const id of [6, 7, 8]) {
      const { rows } = await read(id);
      expect(rows).toEqual([
        { id, label: `item ${id}`, at: new Date(Date.UTC(2026, 0, id)), ids: [id, id], none: null },
      ]);
    }
    // A statement that returns no rows (NoData).
    for (const id of [6, 7]) {
      const result = await sql`update items set label = label where id = ${id}`.execute(database.db);
      expect(result.numAffectedRows).toBe(1n);
    }
    // A call that finds no row.
    expect((await read(99)).rows).toEqual([]);
  });

  it('with 0 prepared statements, every statement goes unnamed (for a pooler in transaction mode)', async () => {
    const unnamed = await openDatabase({ url, schema, poolSize: 1, preparedStatements: 0 });
    try {
      // On PGlite a second handle is a database of its own.
      if (!url) await sql`create table items (id int primary key, label text not null)`.execute(unnamed.db);
      for (const id of [1, 2]) await sql`select label from items where id = ${id}`.execute(unnamed.db);
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements`.execute(
        unnamed.db,
      );
      expect(rows[0]?.n).toBe(0);
    } finally {
      await unnamed.close();
    }
  });

  it('prepares afresh when the table behind a statement changed shape', async () => {
    const read = () => sql<Record<string, unknown>>`select * from items where id = ${4}`.execute(database.db);
    expect((await read()).rows).toEqual([{ id: 4, label: 'item 4' }]);
    await sql`alter table items add column color text not null default 'red'`.execute(database.db);
    // PostgreSQL refuses the old plan ("cached plan must not change result type"); outside a
    // transaction the statement is prepared again and the caller never sees the error.
    expect((await read()).rows).toEqual([{ id: 4, label: 'item 4', color: 'red' }]);
  });

  it('inside a transaction the changed plan fails the statement, and the next one is fresh', async () => {
    const read = (db: typeof database.db) =>
      sql<Record<string, unknown>>`select * from items where id = ${5}`.execute(db);
    expect((await read(database.db)).rows).toHaveLength(1);
    await sql`alter table items add column size int not null default 1`.execute(database.db);
    await expect(database.db.transaction().execute((trx) => read(trx))).rejects.toThrow(/cached plan/);
    expect((await read(database.db)).rows).toEqual([{ id: 5, label: 'item 5', color: 'red', size: 1 }]);
  });
});
