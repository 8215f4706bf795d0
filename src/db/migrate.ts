// Migrations are ordered files (src/db/migrations/NNNN-*.ts), each a list of statements run in
// one transaction. They run at start and through `workspace migrate`, on PGlite and PostgreSQL
// alike, under Kysely's Migrator (which takes an advisory lock, so instances may start together).
import { type Kysely, type Migration as KyselyMigration, Migrator, sql } from 'kysely';
import type { StartStage } from '../lib/start-progress.js';
import { foundation } from './migrations/0001-foundation.js';
import { knowledge } from './migrations/0002-knowledge.js';
import { customData } from './migrations/0003-data.js';
import { conversations } from './migrations/0004-conversations.js';
import { tasksAccounts } from './migrations/0005-tasks-accounts.js';
import { owners } from './migrations/0006-owners.js';
import { simulations } from './migrations/0007-simulations.js';
import { coverageAnalytics } from './migrations/0008-coverage-analytics.js';
import { webhooks } from './migrations/0009-webhooks.js';
import { knowledgeGapOccurrences } from './migrations/0010-knowledge-gap-occurrences.js';
import { boundedSearchVectors } from './migrations/0011-bounded-search-vectors.js';
import { idempotencyLeaseToken } from './migrations/0012-idempotency-lease-token.js';
import { jobsDueByKind } from './migrations/0013-jobs-due-by-kind.js';
import { jobsFollowUp } from './migrations/0014-jobs-follow-up.js';
import { messageTraces } from './migrations/0015-message-traces.js';
import { knowledgePassages } from './migrations/0016-knowledge-passages.js';
import { passageEmbeddings } from './migrations/0017-passage-embeddings.js';
import type { Database } from './schema.js';

export interface Migration {
  name: string;
  statements: string[];
}

export const MIGRATIONS: Migration[] = [
  foundation,
  knowledge,
  customData,
  conversations,
  tasksAccounts,
  owners,
  simulations,
  coverageAnalytics,
  webhooks,
  knowledgeGapOccurrences,
  boundedSearchVectors,
  idempotencyLeaseToken,
  jobsDueByKind,
  jobsFollowUp,
  messageTraces,
  knowledgePassages,
  passageEmbeddings,
];

/** `stage`, if given, shows the migrations as a stage of the start when there are any to run. */
export async function migrateToLatest(db: Kysely<Database>, stage?: StartStage): Promise<string[]> {
  const migrations: Record<string, KyselyMigration> = {};
  for (const migration of MIGRATIONS) {
    migrations[migration.name] = {
      async up(trx) {
        for (const statement of migration.statements) await sql.raw(statement).execute(trx);
      },
    };
  }
  // The bookkeeping tables live in the schema the connection works in (search_path), so
  // databases that hold several schemas (tests, shared servers) keep them apart.
  const schema = await currentSchema(db);
  const applied = await refuseNewerDatabase(db, schema);
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableSchema: schema,
  });
  // Before it takes its lock, the migrator lists the tables (and their columns) of every schema it
  // may read; another client dropping or altering a schema during that scan fails it, though
  // nothing of ours changed: invalid_schema_name (3F000), or a table or column gone from under
  // `pg_get_serial_sequence` (42P01, 42703). An error there comes without results: nothing was
  // migrated, so it is asked again.
  const run = async () => {
    for (let attempt = 1; ; attempt++) {
      const { error, results } = await migrator.migrateToLatest();
      if (error && results === undefined && isCatalogRace(error) && attempt < 5) continue;
      if (error) throw error instanceof Error ? error : new Error(String(error));
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    }
  };
  const pending = MIGRATIONS.length - applied.length;
  if (!stage || pending === 0) return run();
  return stage(`Migrating the database (${pending} migration${pending === 1 ? '' : 's'})`, run);
}

/**
 * A database migrated by a newer version holds migrations this one does not know. Kysely's
 * migrator then stops with "corrupted migrations" and a stack trace; this says what happened, in
 * one line (its `code` makes the CLI print the message alone), before anything is changed.
 * Otherwise it answers the migrations the database has.
 */
async function refuseNewerDatabase(db: Kysely<Database>, schema: string): Promise<string[]> {
  const table = await sql<{ found: string | null }>`
    select to_regclass(quote_ident(${schema}) || '.kysely_migration')::text as found`.execute(db);
  if (!table.rows[0]?.found) return []; // a new database
  const migrationTable = sql.table(`${schema}.kysely_migration`);
  const applied = await sql<{ name: string }>`select name from ${migrationTable} order by name`.execute(db);
  const known = new Set(MIGRATIONS.map((migration) => migration.name));
  const unknown = applied.rows.map((row) => row.name).filter((name) => !known.has(name));
  if (unknown.length === 0) return applied.rows.map((row) => row.name);
  throw Object.assign(
    new Error(
      `the database was migrated by a newer version of this server (migrations ${unknown.join(', ')}); ` +
        'run that version or a later one (docs/upgrading.md)',
    ),
    { code: 'EDBNEWER' },
  );
}

const CATALOG_RACE_CODES = new Set(['3F000', '42P01', '42703']);

function isCatalogRace(error: unknown): boolean {
  return (
    typeof error === 'object' && error !== null && CATALOG_RACE_CODES.has(String((error as { code?: unknown }).code))
  );
}

async function currentSchema(db: Kysely<Database>): Promise<string> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  return rows[0]?.schema ?? 'public';
}
