// The point query of the benchmark of record, on its own table: what the row read asks the
// database (one row by `external_id`, the columns a custom data source row has), without the API.
// The ceiling loop (run.ts) and the bare Fastify route (floor.ts) both use it.
import { CompiledQuery, type Kysely, sql } from 'kysely';
import { coalescedStatements } from '../src/db/coalesce.js';
import { ROW_READ_COALESCING } from '../src/domain/data/custom-data-sources.js';

export async function createPointTable(db: Kysely<never>, rows: number): Promise<void> {
  await sql`drop table if exists bench_rows`.execute(db);
  await sql`create table bench_rows (id uuid primary key, external_id text unique not null, data jsonb not null,
    tags text[] not null, searchable_text text not null, content text not null,
    created_at timestamptz not null default now(), updated_at timestamptz not null default now())`.execute(db);
  await sql`insert into bench_rows (id, external_id, data, tags, searchable_text, content)
    select gen_random_uuid(), 'row-' || i, jsonb_build_object('sku', 'SKU-' || i, 'price', i), array['even'],
      'product ' || i, 'content ' || i
    from generate_series(0, ${rows - 1}) i`.execute(db);
}

/** The point query's text, as the ceiling loops and the floor send it. */
export const POINT_SQL = `select id, external_id, data, tags, searchable_text, content, updated_at,
  null::float8 as score from bench_rows where external_id = $1`;

export async function pointQuery(db: Kysely<never>, externalId: string): Promise<unknown> {
  const { rows } = await db.executeQuery(CompiledQuery.raw(POINT_SQL, [externalId]));
  return rows[0];
}

/** The same columns for several keys at once: what the row read sends for reads it coalesces. */
export const POINT_MANY_SQL = `select id, external_id, data, tags, searchable_text, content, updated_at,
  null::float8 as score from bench_rows where external_id = any($1::text[])`;

/** The point query as the row read now makes it: reads coalesced while others run (src/db/coalesce.ts). */
export function coalescedPointQuery(db: Kysely<never>): (externalId: string) => Promise<unknown> {
  const reads = coalescedStatements<{ external_id: string }>(
    db,
    () => ({ one: POINT_SQL, many: POINT_MANY_SQL }),
    (row) => row.external_id,
    ROW_READ_COALESCING,
  );
  return (externalId) => reads.read('bench_rows', externalId);
}
