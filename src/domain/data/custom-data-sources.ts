// Custom data sources (DESIGN.md §7; spec rules 7 and 8): tenant-defined tables of rows keyed by
// `external_id`, which the agent looks things up in. Each source owns a real backing table,
// created in the same transaction as its metadata row and dropped in the same transaction as its
// deletion. The table name is generated (`cds_` + the source UUID's hex) and stored in the
// metadata row; it reaches SQL only through `sql.table`/`sql.id`, never from user input.
// Isolation: the backing table has no `tenant_id` of its own: a table belongs to exactly one
// source, and every statement reaches it only after looking the source up by tenant.
import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Db } from '../../db/client.js';
import { type CoalesceOptions, coalescedStatements } from '../../db/coalesce.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { Database, DataFieldDeclaration } from '../../db/schema.js';
import { isUuid, newId } from '../../lib/ids.js';
import { iso, startsWithCalendarDate } from '../../lib/time.js';
import { ConflictError, checkBulkItems, MissingParameterError, NotFoundError, ValidationError } from '../errors.js';
import { type SearchRunner, searchQuery } from '../knowledge/text-search.js';
import { decodeIdCursor, decodeRankCursor, newestFirst, type Page, rankCursor, toList } from '../pagination.js';

/** Row `data` may nest objects and arrays this many levels deep (the object itself is level 1). */
export const MAX_DATA_DEPTH = 32;
/** Fastify's router refuses path parameters longer than this (UTF-16 units, decoded). */
export const MAX_EXTERNAL_ID_LENGTH = 100;
/** Tags a row may carry, a smart source's own among them. */
export const MAX_ROW_TAGS = 100;
/** A slug: lowercase letters, digits, `_`, `-`; starts with a letter or digit; ≤ 63 characters. */
export const SLUG_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';
const SLUG = new RegExp(SLUG_PATTERN);

export type FieldType = DataFieldDeclaration['type'];

export interface DataSourceRecord {
  id: string;
  object: 'custom_data_source';
  name: string;
  slug: string;
  fields: DataFieldDeclaration[];
  created_at: string;
  updated_at: string;
}

/** The spec's custom data source row, exactly; `score` is null unless a query ranked the row. */
export interface RowRecord {
  id: string;
  external_id: string;
  data: Record<string, unknown>;
  tags: string[];
  searchable_text: string;
  content: string;
  updated_at: string;
  score: number | null;
}

export interface RowInput {
  data: Record<string, unknown>;
  tags?: string[] | undefined;
  searchable_text?: string | undefined;
  content?: string | undefined;
}

export interface BatchRowInput extends RowInput {
  external_id: string;
}

export interface RowsUpserted {
  object: 'rows_upserted';
  created_count: number;
  updated_count: number;
  data: RowRecord[];
}

export interface RowQuery extends Page {
  q?: string | undefined;
  tag?: string | undefined;
}

export interface NewDataSource {
  name: string;
  slug: string;
  fields?: DataFieldDeclaration[] | undefined;
}

interface SourceRow {
  id: string;
  name: string;
  slug: string;
  fields: DataFieldDeclaration[];
  table_name: string;
  created_at: Date;
  updated_at: Date;
}

interface StoredRow {
  id: string;
  external_id: string;
  data: Record<string, unknown>;
  tags: string[];
  searchable_text: string;
  content: string;
  updated_at: Date;
  score: number | null;
}

const toSourceRecord = (row: SourceRow): DataSourceRecord => ({
  id: row.id,
  object: 'custom_data_source',
  name: row.name,
  slug: row.slug,
  fields: row.fields,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

const toRowRecord = (row: StoredRow): RowRecord => ({
  id: row.id,
  external_id: row.external_id,
  data: row.data,
  tags: row.tags,
  searchable_text: row.searchable_text,
  content: row.content,
  updated_at: iso(row.updated_at),
  score: row.score === null || row.score === undefined ? null : Number(row.score),
});

const backingTableName = (sourceId: string) => `cds_${sourceId.replace(/-/g, '')}`;

/** How a path names a source: a UUID is an id, anything else a slug; undefined names none. */
function sourceKey(idOrSlug: string): { column: 'id' | 'slug'; value: string } | undefined {
  if (isUuid(idOrSlug)) return { column: 'id', value: idOrSlug.toLowerCase() };
  return SLUG.test(idOrSlug) ? { column: 'slug', value: idOrSlug } : undefined;
}

const sqlState = (error: unknown): unknown =>
  typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
/** SQLSTATE 42P01: the backing table went away under us (the source was deleted meanwhile). */
const isUndefinedTable = (error: unknown): boolean => sqlState(error) === '42P01';
/** SQLSTATE 54000: PostgreSQL caps a search vector (tsvector) at 1 MiB. */
const isProgramLimit = (error: unknown): boolean => sqlState(error) === '54000';

const ROW_COLUMNS = sql`id, external_id, data, tags, searchable_text, content, updated_at`;

// --- input rules -------------------------------------------------------------------------------

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Row reads coalesced (db/coalesce.ts): two statements of a table at once (of the pool's 10 on
 * PostgreSQL, 4 on PGlite), the second with the reads of one turn of the event loop, and the reads
 * beyond them wait, 32 to a statement at most.
 */
export const ROW_READ_COALESCING: CoalesceOptions = { maxInFlight: 2, maxItems: 32 };

const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

function checkExternalId(param: string, externalId: string): void {
  if (externalId.length === 0 || externalId.length > MAX_EXTERNAL_ID_LENGTH) {
    throw new ValidationError(param, `${param} must be 1 to ${MAX_EXTERNAL_ID_LENGTH} characters.`);
  }
  if (CONTROL.test(externalId)) throw new ValidationError(param, `${param} must not contain control characters.`);
}

/** PostgreSQL text and jsonb cannot hold U+0000; say which field has it rather than fail later. */
function checkText(param: string, value: string | undefined): void {
  if (value?.includes('\u0000')) throw new ValidationError(param, `${param} must not contain the NUL character.`);
}

function matchesType(type: FieldType, value: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'date':
      return (
        typeof value === 'string' &&
        DATE.test(value) &&
        startsWithCalendarDate(value) &&
        !Number.isNaN(Date.parse(value))
      );
    case 'json':
      return true;
  }
}

const TYPE_WORDS: Record<FieldType, string> = {
  string: 'a string',
  number: 'a finite number',
  boolean: 'a boolean',
  date: 'an ISO 8601 date or date-time string',
  json: 'any JSON value',
};

/**
 * Row data: nested at most MAX_DATA_DEPTH levels, no NUL characters, and conforming to the
 * source's declared fields (undeclared keys are allowed; null counts as absent). Walks with an
 * explicit stack so hostile nesting cannot exhaust the call stack.
 */
function checkData(param: string, data: Record<string, unknown>, fields: DataFieldDeclaration[]): void {
  const stack: [unknown, number][] = [[data, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop() as [unknown, number];
    if (typeof value === 'string') {
      checkText(param, value);
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth > MAX_DATA_DEPTH) {
      throw new ValidationError(param, `${param} is nested more than ${MAX_DATA_DEPTH} levels deep.`);
    }
    if (Array.isArray(value)) {
      for (const item of value) stack.push([item, depth + 1]);
    } else {
      for (const [key, item] of Object.entries(value)) {
        checkText(param, key);
        stack.push([item, depth + 1]);
      }
    }
  }
  for (const field of fields) {
    const at = `${param}.${field.name}`;
    // Own keys only: a field named `constructor` or `toString` is absent, not Object's method.
    const value = Object.hasOwn(data, field.name) ? data[field.name] : undefined;
    if (value === undefined || value === null) {
      if (field.required) throw new MissingParameterError(at, `Missing required field: ${at} (declared required).`);
      continue;
    }
    if (!matchesType(field.type, value)) {
      throw new ValidationError(at, `${at} must be ${TYPE_WORDS[field.type]} (declared type ${field.type}).`);
    }
  }
}

/**
 * Field names no row could carry: request bodies may not hold a `__proto__` key (src/lib/json-body.ts).
 * `constructor` and `prototype` stay allowed: a row carries them as plain keys.
 */
const UNCARRIABLE_FIELD_NAMES: ReadonlySet<string> = new Set(['__proto__']);

function checkFields(fields: DataFieldDeclaration[]): void {
  const seen = new Map<string, number>();
  fields.forEach((field, i) => {
    if (UNCARRIABLE_FIELD_NAMES.has(field.name)) {
      throw new ValidationError(
        `fields[${i}].name`,
        `fields[${i}].name cannot be ${field.name}: no row could carry that key (request bodies may not hold it).`,
      );
    }
    const earlier = seen.get(field.name);
    if (earlier !== undefined) {
      throw new ValidationError(`fields[${i}].name`, `fields[${i}].name repeats fields[${earlier}].name.`);
    }
    seen.set(field.name, i);
  });
}

interface NormalizedRow {
  external_id: string;
  data: Record<string, unknown>;
  tags: string[];
  searchable_text: string;
  content: string;
}

/** Checks one row and fills its defaults; `prefix` is the row's parameter path (`rows[3]`, or ''). */
function normalizeRow(
  prefix: string,
  externalId: string,
  input: RowInput,
  fields: DataFieldDeclaration[],
  extraTag?: string,
): NormalizedRow {
  const at = (name: string) => (prefix === '' ? name : `${prefix}.${name}`);
  checkExternalId(at('external_id'), externalId);
  checkData(at('data'), input.data, fields);
  checkText(at('searchable_text'), input.searchable_text);
  checkText(at('content'), input.content);
  (input.tags ?? []).forEach((tag, i) => {
    checkText(`${at('tags')}[${i}]`, tag);
  });
  const tags = [...new Set([...(input.tags ?? []), ...(extraTag ? [extraTag] : [])])];
  if (tags.length > MAX_ROW_TAGS) {
    throw new ValidationError(
      at('tags'),
      `${at('tags')} must hold at most ${MAX_ROW_TAGS} distinct tags, the smart source's own (${extraTag}) among them.`,
    );
  }
  return {
    external_id: externalId,
    data: input.data,
    tags,
    searchable_text: input.searchable_text ?? '',
    content: input.content ?? '',
  };
}

// --- the service -------------------------------------------------------------------------------

export function createCustomDataSourceService({
  db,
  search,
  maxSources,
}: {
  db: Db;
  search: SearchRunner;
  /** Custom data sources one workspace may hold (CUSTOM_DATA_SOURCES_MAX): each is a table. */
  maxSources: number;
}) {
  /** The source named by id (a UUID) or slug (anything else), in this tenant only. */
  async function findSource(
    executor: Kysely<Database>,
    tenantId: string,
    idOrSlug: string,
    lock?: 'share',
  ): Promise<SourceRow> {
    const key = sourceKey(idOrSlug);
    if (!key) throw new NotFoundError('custom data source', idOrSlug);
    let query = executor
      .selectFrom('custom_data_sources')
      .select(['id', 'name', 'slug', 'fields', 'table_name', 'created_at', 'updated_at'])
      .where('tenant_id', '=', tenantId)
      .where(key.column, '=', key.value);
    if (lock === 'share') query = query.forShare();
    const row = await query.executeTakeFirst();
    if (!row) throw new NotFoundError('custom data source', idOrSlug);
    return row;
  }

  // The source behind a row route is looked up at most once a second per instance, so a row read
  // is one query. A source dropped (or dropped and made again) meanwhile shows up as a missing
  // backing table: the source is then looked up afresh and the work tried once more.
  const SOURCE_CACHE_MS = 1000;
  const SOURCE_CACHE_MAX = 10_000;
  const sourceCache = new Map<string, { source: SourceRow; at: number }>();

  async function lookupSource(tenantId: string, idOrSlug: string, fresh: boolean): Promise<SourceRow> {
    const cacheKey = `${tenantId}\u0000${idOrSlug}`;
    const hit = sourceCache.get(cacheKey);
    if (!fresh && hit && Date.now() - hit.at < SOURCE_CACHE_MS) return hit.source;
    sourceCache.delete(cacheKey);
    const source = await findSource(db, tenantId, idOrSlug);
    if (sourceCache.size >= SOURCE_CACHE_MAX) sourceCache.clear();
    sourceCache.set(cacheKey, { source, at: Date.now() });
    return source;
  }

  // The row read is the hottest statement of the API: its texts (one key, and several for reads
  // coalesced: db/coalesce.ts) are built once per table and kept (Kysely would build them on every
  // call), which also lets the prepared statements be found fast.
  const rowReads = new Map<string, { one: string; many: string }>();
  function rowReadStatements(tableName: string): { one: string; many: string } {
    let texts = rowReads.get(tableName);
    if (texts === undefined) {
      const select = sql`select ${ROW_COLUMNS}, null::float8 as score from ${sql.table(tableName)}`;
      texts = {
        one: sql`${select} where external_id = ${''}`.compile(db).sql,
        many: sql`${select} where external_id = any(${''}::text[])`.compile(db).sql,
      };
      if (rowReads.size >= SOURCE_CACHE_MAX) rowReads.clear();
      rowReads.set(tableName, texts);
    }
    return texts;
  }

  const rowReadsByKey = coalescedStatements<StoredRow>(
    db,
    rowReadStatements,
    (row) => row.external_id,
    ROW_READ_COALESCING,
  );

  /** Runs `work` on the source's backing table; a table dropped meanwhile reads as not found. */
  async function onTable<T>(
    tenantId: string,
    idOrSlug: string,
    work: (table: RawBuilder<unknown>, source: SourceRow) => Promise<T>,
  ): Promise<T> {
    const source = await lookupSource(tenantId, idOrSlug, false);
    try {
      return await work(sql.table(source.table_name), source);
    } catch (error) {
      if (!isUndefinedTable(error)) throw error;
    }
    const current = await lookupSource(tenantId, idOrSlug, true);
    try {
      return await work(sql.table(current.table_name), current);
    } catch (error) {
      if (isUndefinedTable(error)) throw new NotFoundError('custom data source', idOrSlug);
      throw error;
    }
  }

  /** UTF-8 byte order: PostgreSQL's `collate "C"`, whatever the database's own collation. */
  const compareKeys = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

  /**
   * One INSERT … ON CONFLICT for every row; `xmax = 0` tells a fresh insert from an update. The rows
   * go in `external_id` order, the order every write and delete of several rows locks them in, so
   * two batches over the same rows (sent in different orders) wait for each other, not deadlock.
   */
  async function writeRows(
    executor: Kysely<Database>,
    tableName: string,
    rows: NormalizedRow[],
    textParam: string,
  ): Promise<{ record: RowRecord; created: boolean }[]> {
    const inLockOrder = [...rows].sort((a, b) => compareKeys(a.external_id, b.external_id));
    const values = inLockOrder.map(
      (row) =>
        sql`(${newId()}::uuid, ${row.external_id}, ${JSON.stringify(row.data)}::jsonb, ${row.tags}::text[], ${row.searchable_text}, ${row.content}, now())`,
    );
    const statement = sql<StoredRow & { inserted: boolean }>`
      insert into ${sql.table(tableName)} (id, external_id, data, tags, searchable_text, content, updated_at)
      values ${sql.join(values)}
      on conflict (external_id) do update set
        data = excluded.data,
        tags = excluded.tags,
        searchable_text = excluded.searchable_text,
        content = excluded.content,
        updated_at = excluded.updated_at
      returning ${ROW_COLUMNS}, null::float8 as score, (xmax = 0) as inserted`;
    let result: Awaited<ReturnType<typeof statement.execute>>;
    try {
      result = await statement.execute(executor);
    } catch (error) {
      if (isProgramLimit(error)) {
        throw new ValidationError(
          textParam,
          'searchable_text and content hold too many distinct words to index for search (the index of one row is ' +
            'limited to 1 MiB); put bulk text in data instead.',
        );
      }
      throw error;
    }
    const byExternalId = new Map(result.rows.map((row) => [row.external_id, row]));
    return rows.map((row) => {
      const stored = byExternalId.get(row.external_id) as StoredRow & { inserted: boolean };
      return { record: toRowRecord(stored), created: Boolean(stored.inserted) };
    });
  }

  /** Checks a batch (1–100 rows, distinct external ids) and writes it all or not at all. */
  async function upsertBatch(
    tenantId: string,
    idOrSlug: string,
    rows: BatchRowInput[],
    extraTag?: string,
  ): Promise<RowsUpserted> {
    checkBulkItems('rows', rows);
    const seen = new Map<string, number>();
    rows.forEach((row, i) => {
      const earlier = seen.get(row.external_id);
      if (earlier !== undefined) {
        throw new ValidationError(
          `rows[${i}].external_id`,
          `rows[${i}].external_id repeats rows[${earlier}].external_id.`,
        );
      }
      seen.set(row.external_id, i);
    });
    return onTable(tenantId, idOrSlug, async (_table, source) => {
      const normalized = rows.map((row, i) =>
        normalizeRow(`rows[${i}]`, row.external_id, row, source.fields, extraTag),
      );
      // One statement: atomic on its own, so the batch is all-or-nothing.
      const written = await writeRows(db, source.table_name, normalized, 'rows');
      const created = written.filter((w) => w.created).length;
      return {
        object: 'rows_upserted' as const,
        created_count: created,
        updated_count: written.length - created,
        data: written.map((w) => w.record),
      };
    });
  }

  return {
    async createSource(tenantId: string, input: NewDataSource): Promise<DataSourceRecord> {
      if (isUuid(input.slug)) {
        throw new ValidationError('slug', 'slug must not have the form of a UUID: paths read a UUID as an id.');
      }
      const fields = input.fields ?? [];
      checkFields(fields);
      const id = newId();
      const tableName = backingTableName(id);
      try {
        return await db.transaction().execute(async (trx) => {
          // Each source is a table of the database: a workspace holds a bounded number. Its
          // creations take their turn on its tenant row, so two at once cannot both pass the count.
          // FOR NO KEY UPDATE, not FOR UPDATE: that one conflicts with the FOR KEY SHARE every
          // insert of a row naming the tenant takes (its foreign key), so it would hold back all
          // the workspace's writes while the table is made, and wait behind any open one.
          await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).forNoKeyUpdate().execute();
          const held = await trx
            .selectFrom('custom_data_sources')
            .select(sql<number>`count(*)::int`.as('n'))
            .where('tenant_id', '=', tenantId)
            .executeTakeFirstOrThrow();
          if (held.n >= maxSources) {
            throw new ConflictError(
              `This workspace holds ${held.n} custom data sources, its limit (CUSTOM_DATA_SOURCES_MAX); delete one before creating another.`,
            );
          }
          const row = await trx
            .insertInto('custom_data_sources')
            .values({
              id,
              tenant_id: tenantId,
              name: input.name,
              slug: input.slug,
              fields: JSON.stringify(fields),
              table_name: tableName,
            })
            .returning(['id', 'name', 'slug', 'fields', 'table_name', 'created_at', 'updated_at'])
            .executeTakeFirstOrThrow();
          const table = sql.table(tableName);
          // DDL takes no parameters: every name below is generated, quoted by sql.table/sql.id.
          // Full-text search: searchable_text ranks above content ('simple': no stemming, any language).
          await sql`create table ${table} (
              id uuid primary key,
              external_id text not null unique,
              data jsonb not null,
              tags text[] not null default '{}',
              searchable_text text not null default '',
              content text not null default '',
              search tsvector generated always as (
                setweight(to_tsvector('simple', searchable_text), 'A') ||
                setweight(to_tsvector('simple', content), 'B')
              ) stored,
              created_at timestamptz not null default now(),
              updated_at timestamptz not null default now()
            )`.execute(trx);
          await sql`create index ${sql.id(`${tableName}_search`)} on ${table} using gin (search)`.execute(trx);
          await sql`create index ${sql.id(`${tableName}_tags`)} on ${table} using gin (tags)`.execute(trx);
          return toSourceRecord(row);
        });
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new ConflictError(`A custom data source with slug '${input.slug}' already exists.`, 'slug');
        }
        throw error;
      }
    },

    async listSources(tenantId: string, page: Page) {
      let query = db
        .selectFrom('custom_data_sources')
        .select(['id', 'name', 'slug', 'fields', 'table_name', 'created_at', 'updated_at'])
        .where('tenant_id', '=', tenantId);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toSourceRecord, (row) => row.id);
    },

    async getSource(tenantId: string, idOrSlug: string): Promise<DataSourceRecord> {
      return toSourceRecord(await findSource(db, tenantId, idOrSlug));
    },

    /** Spec rule 8: the metadata row and the backing table go together, in one transaction. */
    async deleteSource(tenantId: string, idOrSlug: string) {
      const key = sourceKey(idOrSlug);
      if (!key) throw new NotFoundError('custom data source', idOrSlug);
      const deleted = await db.transaction().execute(async (trx) => {
        const row = await trx
          .deleteFrom('custom_data_sources')
          .where('tenant_id', '=', tenantId)
          .where(key.column, '=', key.value)
          .returning(['id', 'table_name'])
          .executeTakeFirst();
        if (!row) throw new NotFoundError('custom data source', idOrSlug);
        await sql`drop table if exists ${sql.table(row.table_name)}`.execute(trx);
        return { id: row.id, object: 'deleted' as const, deleted: true };
      });
      sourceCache.clear();
      return deleted;
    },

    /** Creates or replaces the row with this external id; omitted optional fields become empty. */
    async upsertRow(
      tenantId: string,
      idOrSlug: string,
      externalId: string,
      input: RowInput,
    ): Promise<{ record: RowRecord; created: boolean }> {
      return onTable(tenantId, idOrSlug, async (_table, source) => {
        const row = normalizeRow('', externalId, input, source.fields);
        const [written] = await writeRows(db, source.table_name, [row], 'content');
        return written as { record: RowRecord; created: boolean };
      });
    },

    upsertRows: (tenantId: string, idOrSlug: string, rows: BatchRowInput[]) => upsertBatch(tenantId, idOrSlug, rows),

    /** For smart sources: the same batch write, every row also tagged `extraTag`. */
    upsertTaggedRows: (tenantId: string, sourceId: string, rows: BatchRowInput[], extraTag: string) =>
      upsertBatch(tenantId, sourceId, rows, extraTag),

    async getRow(tenantId: string, idOrSlug: string, externalId: string): Promise<RowRecord> {
      return onTable(tenantId, idOrSlug, async (_table, source) => {
        if (CONTROL.test(externalId)) throw new NotFoundError('row', externalId);
        const row = await rowReadsByKey.read(source.table_name, externalId);
        if (!row) throw new NotFoundError('row', externalId);
        return toRowRecord(row);
      });
    },

    async deleteRow(tenantId: string, idOrSlug: string, externalId: string) {
      return onTable(tenantId, idOrSlug, async (table) => {
        if (CONTROL.test(externalId)) throw new NotFoundError('row', externalId);
        const { rows } = await sql<{ id: string }>`
          delete from ${table} where external_id = ${externalId} returning id`.execute(db);
        const row = rows[0];
        if (!row) throw new NotFoundError('row', externalId);
        return { id: row.id, object: 'deleted' as const, deleted: true };
      });
    },

    /**
     * Without `q`: newest first, cursor = last id. With `q` (websearch syntax): only matching rows,
     * best `score` first (ts_rank; ties newest first), cursor = last (score, id).
     */
    async listRows(tenantId: string, idOrSlug: string, rowQuery: RowQuery) {
      const query = { ...rowQuery, q: searchQuery(rowQuery.q) };
      checkText('q', query.q);
      checkText('tag', query.tag);
      return onTable(tenantId, idOrSlug, async (table) => {
        const tagFilter = query.tag === undefined ? sql`true` : sql`tags @> array[${query.tag}]::text[]`;
        if (query.q === undefined) {
          const after = decodeIdCursor(query.cursor);
          const { rows } = await sql<StoredRow>`
            select ${ROW_COLUMNS}, null::float8 as score from ${table}
            where ${tagFilter} ${after ? sql`and id < ${after}::uuid` : sql``}
            order by id desc
            limit ${query.limit + 1}`.execute(db);
          return toList(rows, query, toRowRecord, (row) => row.id);
        }
        const after = decodeRankCursor(query.cursor);
        // float8 carries the float4 rank exactly, so the cursor's score compares equal to it.
        const { rows } = await search(tenantId, (trx) =>
          sql<StoredRow>`
          select * from (
            select ${ROW_COLUMNS}, ts_rank(search, query)::float8 as score
            from ${table}, websearch_to_tsquery('simple', ${query.q}) as query
            where search @@ query and ${tagFilter}
          ) as ranked
          ${after ? sql`where (score, id) < (${after.s}::float8, ${after.i}::uuid)` : sql``}
          order by score desc, id desc
          limit ${query.limit + 1}`.execute(trx),
        );
        return toList(rows, query, toRowRecord, (row) => rankCursor(Number(row.score), row.id));
      });
    },

    /**
     * Spec rule 7: one DELETE empties the table; the source, its table and its fields remain. The
     * table is locked against writes first (reads go on): a DELETE alone locks rows in the table's
     * physical order, and a batch write holding some of them in `external_id` order would deadlock
     * with it. Locked, the clear waits for the writes under way and the next ones wait for it.
     */
    async clearRows(tenantId: string, idOrSlug: string) {
      return onTable(tenantId, idOrSlug, (table) =>
        db.transaction().execute(async (trx) => {
          await sql`lock table ${table} in share row exclusive mode`.execute(trx);
          const result = await sql`delete from ${table}`.execute(trx);
          return { object: 'rows_cleared' as const, deleted_count: Number(result.numAffectedRows ?? 0n) };
        }),
      );
    },

    /** The id of a source of this tenant named by id or slug, or undefined. */
    async resolveSourceId(tenantId: string, idOrSlug: string): Promise<string | undefined> {
      try {
        return (await findSource(db, tenantId, idOrSlug)).id;
      } catch (error) {
        if (error instanceof NotFoundError) return undefined;
        throw error;
      }
    },

    /**
     * Deletes every row carrying `tag` in every data source of the tenant, in one transaction.
     * The sources are locked for share, so none is dropped halfway.
     */
    async deleteRowsTagged(tenantId: string, tag: string): Promise<number> {
      return db.transaction().execute(async (trx) => {
        const sources = await trx
          .selectFrom('custom_data_sources')
          .select('table_name')
          .where('tenant_id', '=', tenantId)
          .orderBy('id')
          .forShare()
          .execute();
        let deleted = 0;
        for (const source of sources) {
          // Rows locked in `external_id` order first, as writes lock them: a purge racing an ingest
          // of the same rows then waits for it rather than deadlocking.
          const table = sql.table(source.table_name);
          const result = await sql`
            delete from ${table} where external_id in (
              select external_id from ${table} where tags @> array[${tag}]::text[]
              order by external_id collate "C" for update)`.execute(trx);
          deleted += Number(result.numAffectedRows ?? 0n);
        }
        return deleted;
      });
    },
  };
}

export type CustomDataSourceService = ReturnType<typeof createCustomDataSourceService>;
