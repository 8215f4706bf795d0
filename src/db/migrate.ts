// Migrations are ordered files (src/db/migrations/NNNN-*.ts), each a list of statements run in
// one transaction. They run at start and through `workspace migrate`, on PGlite and PostgreSQL
// alike, under Kysely's Migrator (which takes an advisory lock, so instances may start together).
import { type Kysely, type Migration as KyselyMigration, Migrator, sql } from 'kysely';
import { foundation } from './migrations/0001-foundation.js';
import type { Database } from './schema.js';

export interface Migration {
  name: string;
  statements: string[];
}

export const MIGRATIONS: Migration[] = [foundation];

export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  const migrations: Record<string, KyselyMigration> = {};
  for (const migration of MIGRATIONS) {
    migrations[migration.name] = {
      async up(trx) {
        for (const statement of migration.statements) await sql.raw(statement).execute(trx);
      },
    };
  }
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
