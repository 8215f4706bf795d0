// Migrations against a database that other clients change at the same time (PostgreSQL only:
// PGlite has one client). Before it takes its lock, Kysely's migrator lists the tables and columns
// of every schema it may read, and a schema, table or column another client drops during that scan
// fails it, though nothing of ours changed.
import { randomBytes } from 'node:crypto';
import { type DatabaseIntrospector, type Kysely, Kysely as KyselyClass, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/migrate.js';
import type { Database } from '../../src/db/schema.js';
import { usingPostgres } from '../helpers.js';

/** PostgreSQL, but the first `failures.length` table scans fail as a concurrent DROP makes them fail. */
class RacingDialect extends PostgresDialect {
  scans = 0;
  constructor(
    pool: pg.Pool,
    private readonly failures: { code: string; message: string }[],
  ) {
    super({ pool });
  }
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    const real = super.createIntrospector(db);
    return {
      getSchemas: () => real.getSchemas(),
      getMetadata: (options) => real.getMetadata(options),
      getTables: async (options) => {
        const failure = this.failures[this.scans++];
        if (failure) throw Object.assign(new Error(failure.message), { code: failure.code });
        return real.getTables(options);
      },
    };
  }
}

describe.skipIf(!usingPostgres)('migrations beside other clients', () => {
  const schema = `test_${randomBytes(6).toString('hex')}`;
  let admin: pg.Client;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  });

  async function migrateWith(failures: { code: string; message: string }[]) {
    const pool = new pg.Pool({ connectionString: process.env.TEST_DATABASE_URL, options: `-c search_path=${schema}` });
    const dialect = new RacingDialect(pool, failures);
    const db = new KyselyClass<Database>({ dialect });
    try {
      return { applied: await migrateToLatest(db).catch((error: unknown) => error), scans: dialect.scans };
    } finally {
      await db.destroy();
    }
  }

  it('a scan that loses a schema, a table or a column to another client is run again', async () => {
    await admin.query(`create schema ${schema}`);
    const { applied, scans } = await migrateWith([
      { code: '42703', message: 'column "id" of relation "owners" does not exist' },
      { code: '42P01', message: 'relation "test_x.owners" does not exist' },
      { code: '3F000', message: 'schema "test_x" does not exist' },
    ]);
    expect(applied).toEqual(expect.arrayContaining(['0001-foundation']));
    expect(scans).toBeGreaterThan(3);
  });

  it('other errors, and a race that does not end, still fail the start', async () => {
    const other = await migrateWith([{ code: '42501', message: 'permission denied for schema public' }]);
    expect(other.applied).toMatchObject({ code: '42501' });
    const endless = await migrateWith(
      Array.from({ length: 10 }, () => ({ code: '42703', message: 'column "id" of relation "owners" does not exist' })),
    );
    expect(endless.applied).toMatchObject({ code: '42703' });
    expect(endless.scans).toBe(5);
  });
});
