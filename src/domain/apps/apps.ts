// Apps and their files: an app is named in its tenant, holds files changed only by commits
// (./commits.ts) and answers its current files (./files.ts).
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import { type CommitInput, commit, listCommits } from './commits.js';
import { listFiles } from './files.js';

/** An app as the API answers it: the operations' response schema, and the record's type. */
export const App = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('app'),
    name: Type.String(),
    description: Nullable(Type.String()),
    head_commit_id: Nullable(Uuid),
    file_count: Type.Integer(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'App' },
);

export type AppRecord = Static<typeof App>;

export interface NewApp {
  name: string;
  description?: string | undefined;
}

type AppRow = {
  id: string;
  name: string;
  description: string | null;
  head_commit_id: string | null;
  file_count: number;
  created_at: Date;
  updated_at: Date;
};

const toAppRecord = (row: AppRow): AppRecord => ({
  id: row.id,
  object: 'app',
  name: row.name,
  description: row.description,
  head_commit_id: row.head_commit_id,
  file_count: Number(row.file_count),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

/** The tenant's apps, each with the number of files it holds. */
function selectApps(db: Db, tenantId: string) {
  return db
    .selectFrom('apps')
    .select(['id', 'name', 'description', 'head_commit_id', 'created_at', 'updated_at'])
    .select((eb) =>
      eb
        .selectFrom('app_files')
        .select(sql<number>`count(*)::int`.as('n'))
        .whereRef('app_files.app_id', '=', 'apps.id')
        .whereRef('app_files.tenant_id', '=', 'apps.tenant_id')
        .as('file_count'),
    )
    .where('tenant_id', '=', tenantId);
}

async function createApp(db: Db, tenantId: string, input: NewApp): Promise<AppRecord> {
  try {
    const row = await db
      .insertInto('apps')
      .values({ id: newId(), tenant_id: tenantId, name: input.name, description: input.description ?? null })
      .returning(['id', 'name', 'description', 'head_commit_id', 'created_at', 'updated_at'])
      .executeTakeFirstOrThrow();
    return toAppRecord({ ...row, file_count: 0 });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`An app named '${input.name}' already exists.`, 'name');
    throw error;
  }
}

async function listApps(db: Db, tenantId: string, page: Page) {
  let query = selectApps(db, tenantId);
  query = newestFirst(query, page);
  const rows = (await query.execute()) as AppRow[];
  return toList(rows, page, toAppRecord, (row) => row.id);
}

async function getApp(db: Db, tenantId: string, name: string): Promise<AppRecord> {
  const row = (await selectApps(db, tenantId).where('name', '=', name).executeTakeFirst()) as AppRow | undefined;
  if (!row) throw new NotFoundError('app', name);
  return toAppRecord(row);
}

async function deleteApp(db: Db, tenantId: string, name: string) {
  const row = await db
    .deleteFrom('apps')
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .returning('id')
    .executeTakeFirst();
  if (!row) throw new NotFoundError('app', name);
  return { id: row.id, object: 'deleted' as const, deleted: true };
}

export function createAppService({ db }: { db: Db }) {
  return {
    createApp: (tenantId: string, input: NewApp) => createApp(db, tenantId, input),
    listApps: (tenantId: string, page: Page) => listApps(db, tenantId, page),
    getApp: (tenantId: string, name: string) => getApp(db, tenantId, name),
    deleteApp: (tenantId: string, name: string) => deleteApp(db, tenantId, name),
    commit: (tenantId: string, name: string, input: CommitInput) => commit(db, tenantId, name, input),
    listCommits: (tenantId: string, name: string, page: Page) => listCommits(db, tenantId, name, page),
    listFiles: (tenantId: string, name: string, page: Page) => listFiles(db, tenantId, name, page),
  };
}

export type AppService = ReturnType<typeof createAppService>;
