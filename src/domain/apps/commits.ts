// An app's commits: a commit applies file changes atomically (spec: Commit App Files).
// `content: null` deletes a path; content equal to what is stored is no change and is not listed.
import { type Static, Type } from '@sinclair/typebox';
import { sql, type Transaction } from 'kysely';
import type { CommitFileChange, Database, Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { InvalidParametersError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import { findAppId } from './names.js';
import { checkCommittedPath } from './paths.js';

const FileChange = Type.Object({
  path: Type.String(),
  change: Type.Union([Type.Literal('added'), Type.Literal('modified'), Type.Literal('deleted')]),
});

/** A commit as the API answers it: the operations' response schema, and the record's type. */
export const AppCommit = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('app_commit'),
    app_id: Uuid,
    message: Type.String(),
    files: Type.Array(FileChange, { description: 'The effective changes; unchanged content is not listed.' }),
    parent_id: Nullable(Uuid),
    created_at: Timestamp,
  },
  { title: 'AppCommit' },
);

export type AppCommitRecord = Static<typeof AppCommit>;

export interface CommitInput {
  message: string;
  files: { path: string; content: string | null }[];
}

type CommitFile = CommitInput['files'][number];

/** What a commit does to the stored files: the changes it lists, the files it writes and the paths it deletes. */
interface CommitPlan {
  changes: CommitFileChange[];
  upserts: { path: string; content: string }[];
  deletions: string[];
}

/** Applies every change of the commit or none; the app row is locked so commits form a line. */
export async function commit(db: Db, tenantId: string, name: string, input: CommitInput): Promise<AppCommitRecord> {
  const { files, indexOf } = committedFiles(input);
  return db.transaction().execute(async (trx) => {
    const app = await trx
      .selectFrom('apps')
      .select(['id', 'head_commit_id'])
      .where('tenant_id', '=', tenantId)
      .where('name', '=', name)
      .forUpdate()
      .executeTakeFirst();
    if (!app) throw new NotFoundError('app', name);

    const existing = await storedContents(trx, tenantId, app.id, files);
    const commitId = newId();
    const plan = planCommit(files, existing);
    const now = new Date();
    await writeFiles(trx, tenantId, app.id, plan, commitId, now);
    const added = plan.changes.filter((c) => c.change === 'added').map((c) => c.path);
    await refuseFileUnderFile(trx, tenantId, app.id, added, indexOf);
    const commit = await trx
      .insertInto('app_commits')
      .values({
        id: commitId,
        tenant_id: tenantId,
        app_id: app.id,
        message: input.message,
        parent_id: app.head_commit_id,
        files: JSON.stringify(plan.changes),
        created_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await trx
      .updateTable('apps')
      .set({ head_commit_id: commitId, updated_at: now })
      .where('id', '=', app.id)
      .where('tenant_id', '=', tenantId)
      .execute();
    return toCommitRecord(commit);
  });
}

/**
 * The commit's files with their paths in NFC, each checked, and the index each path was sent at.
 * Paths are stored and compared in NFC, so `café.txt` sent composed or decomposed is one file.
 */
function committedFiles(input: CommitInput): { files: CommitFile[]; indexOf: Map<string, number> } {
  const files = input.files.map((file) => ({ path: file.path.normalize('NFC'), content: file.content }));
  const indexOf = new Map<string, number>();
  files.forEach((file, i) => {
    const param = `files[${i}].path`;
    checkCommittedPath(file.path, param);
    const earlier = indexOf.get(file.path);
    if (earlier !== undefined) {
      const how = input.files[earlier]?.path === input.files[i]?.path ? '' : ' once normalised to NFC';
      throw new ValidationError(param, `${param} repeats files[${earlier}].path${how}.`);
    }
    indexOf.set(file.path, i);
  });
  return { files, indexOf };
}

/** The stored content of each of the commit's paths that has a file. */
async function storedContents(
  trx: Transaction<Database>,
  tenantId: string,
  appId: string,
  files: CommitFile[],
): Promise<Map<string, string>> {
  const rows = await trx
    .selectFrom('app_files')
    .select(['path', 'content'])
    .where('tenant_id', '=', tenantId)
    .where('app_id', '=', appId)
    .where(
      'path',
      'in',
      files.map((f) => f.path),
    )
    .execute();
  return new Map(rows.map((row) => [row.path, row.content]));
}

/** What each file of the commit changes; deleting a path that has no file is `invalid_parameters`. */
function planCommit(files: CommitFile[], existing: Map<string, string>): CommitPlan {
  const plan: CommitPlan = { changes: [], upserts: [], deletions: [] };
  files.forEach((file, i) => {
    const current = existing.get(file.path);
    if (file.content === null) {
      if (current === undefined) {
        throw new InvalidParametersError(`files[${i}].path`, `There is no file at '${file.path}' to delete.`);
      }
      plan.deletions.push(file.path);
      plan.changes.push({ path: file.path, change: 'deleted' });
    } else if (current !== file.content) {
      plan.upserts.push({ path: file.path, content: file.content });
      plan.changes.push({ path: file.path, change: current === undefined ? 'added' : 'modified' });
    }
  });
  return plan;
}

/** Writes the plan's files (as of `commitId`) and deletes its paths. */
async function writeFiles(
  trx: Transaction<Database>,
  tenantId: string,
  appId: string,
  { upserts, deletions }: CommitPlan,
  commitId: string,
  now: Date,
): Promise<void> {
  if (upserts.length > 0) {
    await trx
      .insertInto('app_files')
      .values(
        upserts.map((f) => ({
          tenant_id: tenantId,
          app_id: appId,
          path: f.path,
          content: f.content,
          size: Buffer.byteLength(f.content),
          commit_id: commitId,
          updated_at: now,
        })),
      )
      .onConflict((oc) =>
        oc.columns(['app_id', 'path']).doUpdateSet((eb) => ({
          content: eb.ref('excluded.content'),
          size: eb.ref('excluded.size'),
          commit_id: eb.ref('excluded.commit_id'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }
  if (deletions.length > 0) {
    await trx
      .deleteFrom('app_files')
      .where('tenant_id', '=', tenantId)
      .where('app_id', '=', appId)
      .where('path', 'in', deletions)
      .execute();
  }
}

/**
 * A path cannot be a file and hold files at once (`x.txt` and `x.txt/inner`): no file tree, and
 * no git tree, can hold both. Checked after the commit's changes, within its transaction, for
 * the paths it added (a changed file's path clashes with nothing new); a clash names the path of
 * this commit involved.
 */
async function refuseFileUnderFile(
  trx: Transaction<Database>,
  tenantId: string,
  appId: string,
  written: string[],
  indexOf: Map<string, number>,
): Promise<void> {
  if (written.length === 0) return;
  const clash = await trx
    .selectFrom('app_files as a')
    .innerJoin('app_files as b', (join) =>
      join
        .onRef('b.tenant_id', '=', 'a.tenant_id')
        .onRef('b.app_id', '=', 'a.app_id')
        .on(sql<boolean>`starts_with(b.path, a.path || '/')`),
    )
    .select(['a.path as file', 'b.path as inner'])
    .where('a.tenant_id', '=', tenantId)
    .where('a.app_id', '=', appId)
    .where((eb) => eb.or([eb('a.path', 'in', written), eb('b.path', 'in', written)]))
    .limit(1)
    .executeTakeFirst();
  if (!clash) return;
  const ours = indexOf.has(clash.inner) ? clash.inner : clash.file;
  const param = `files[${indexOf.get(ours)}].path`;
  throw new InvalidParametersError(
    param,
    `'${clash.file}' would be a file and hold '${clash.inner}' at once; delete one of them in the same commit.`,
  );
}

/** The app's commits, newest first. */
export async function listCommits(db: Db, tenantId: string, name: string, page: Page) {
  const id = await findAppId(db, tenantId, name);
  let query = db.selectFrom('app_commits').selectAll().where('tenant_id', '=', tenantId).where('app_id', '=', id);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toCommitRecord, (row) => row.id);
}

function toCommitRecord(row: {
  id: string;
  app_id: string;
  message: string;
  parent_id: string | null;
  files: CommitFileChange[];
  created_at: Date;
}): AppCommitRecord {
  return {
    id: row.id,
    object: 'app_commit',
    app_id: row.app_id,
    message: row.message,
    files: row.files,
    parent_id: row.parent_id,
    created_at: iso(row.created_at),
  };
}
