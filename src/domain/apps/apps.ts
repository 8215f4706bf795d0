// Apps and their files: a commit applies file changes atomically (spec: Commit App Files).
// `content: null` deletes a path; content equal to what is stored is no change and is not listed.
import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/client.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { CommitFileChange, Database } from '../../db/schema.js';
import { newId } from '../../lib/ids.js';
import { characterCount } from '../../lib/text.js';
import { iso } from '../../lib/time.js';
import { ConflictError, InvalidParametersError, NotFoundError, ValidationError } from '../errors.js';
import { encodeCursor, foreignCursor, newestFirst, type Page, toList } from '../pagination.js';

export interface AppRecord {
  id: string;
  object: 'app';
  name: string;
  description: string | null;
  head_commit_id: string | null;
  file_count: number;
  created_at: string;
  updated_at: string;
}

export interface AppCommitRecord {
  id: string;
  object: 'app_commit';
  app_id: string;
  message: string;
  files: CommitFileChange[];
  parent_id: string | null;
  created_at: string;
}

export interface AppFileRecord {
  object: 'app_file';
  path: string;
  content: string;
  size: number;
  commit_id: string;
  updated_at: string;
}

export interface CommitInput {
  message: string;
  files: { path: string; content: string | null }[];
}

/** The longest file path, in characters (code points), as sent and as stored (NFC). */
export const MAX_PATH_LENGTH = 200;

/** Control (Cc), format (Cf: zero-width, bidi, BOM) and line or paragraph separator characters. */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** A path is relative and slash-separated, without empty, `.` or `..` segments or backslashes. */
function hasBadShape(path: string): boolean {
  return path.includes('\\') || path.split('/').some((s) => s === '' || s === '.' || s === '..');
}

/** The path's shape as any stored path has it; a cursor is held to this. */
function checkPath(path: string, param: string): void {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point.
  if (/[\u0000-\u001f\u007f-\u009f\\]/.test(path))
    throw new ValidationError(param, `${param} contains a forbidden character.`);
  if (hasBadShape(path)) {
    throw new ValidationError(param, `${param} must be a relative path without empty, '.' or '..' segments.`);
  }
}

/**
 * A committed path, already in NFC (the form stored and compared). On top of the shape: no
 * character that does not show (a bidi override or a BOM makes two names look alike), and no
 * segment that reads as `.` or `..` once compatibility characters are folded (NFKC turns
 * `．．` into `..`), as a consumer that folds them would walk out of the app.
 */
function checkCommittedPath(path: string, param: string): void {
  const invisible = INVISIBLE.exec(path)?.[0];
  if (invisible !== undefined) {
    const code = `U+${invisible.codePointAt(0)?.toString(16).toUpperCase().padStart(4, '0')}`;
    throw new ValidationError(param, `${param} contains ${code}, a control, format or line separator character.`);
  }
  checkPath(path, param);
  const folded = path.normalize('NFKC');
  if (hasBadShape(folded)) {
    throw new ValidationError(
      param,
      `${param} reads as '${folded}' once compatibility characters are folded (NFKC): ` +
        "a path cannot have empty, '.' or '..' segments or backslashes.",
    );
  }
  // NFC can lengthen a path (U+2ADC becomes two characters); the stored form must fit too.
  if (characterCount(path) > MAX_PATH_LENGTH) {
    throw new ValidationError(param, `${param} is longer than ${MAX_PATH_LENGTH} characters once normalised to NFC.`);
  }
}

/** The path a files cursor stands for; a cursor this service could not have issued is a `validation_error`. */
function decodePathCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const path = Buffer.from(cursor, 'base64url').toString('utf8');
  // Not base64url, or not UTF-8: it does not encode back to itself.
  if (encodeCursor(path) !== cursor || characterCount(path) > MAX_PATH_LENGTH) throw foreignCursor();
  try {
    checkPath(path, 'cursor');
  } catch {
    throw foreignCursor();
  }
  return path;
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

export function createAppService({ db }: { db: Db }) {
  function selectApps(tenantId: string) {
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

  async function appId(tenantId: string, name: string): Promise<string> {
    const row = await db
      .selectFrom('apps')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where('name', '=', name)
      .executeTakeFirst();
    if (!row) throw new NotFoundError('app', name);
    return row.id;
  }

  return {
    async createApp(tenantId: string, input: { name: string; description?: string | undefined }): Promise<AppRecord> {
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
    },

    async listApps(tenantId: string, page: Page) {
      let query = selectApps(tenantId);
      query = newestFirst(query, page);
      const rows = (await query.execute()) as AppRow[];
      return toList(rows, page, toAppRecord, (row) => row.id);
    },

    async getApp(tenantId: string, name: string): Promise<AppRecord> {
      const row = (await selectApps(tenantId).where('name', '=', name).executeTakeFirst()) as AppRow | undefined;
      if (!row) throw new NotFoundError('app', name);
      return toAppRecord(row);
    },

    async deleteApp(tenantId: string, name: string) {
      const row = await db
        .deleteFrom('apps')
        .where('tenant_id', '=', tenantId)
        .where('name', '=', name)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('app', name);
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },

    /** Applies every change of the commit or none; the app row is locked so commits form a line. */
    async commit(tenantId: string, name: string, input: CommitInput): Promise<AppCommitRecord> {
      // Paths are stored and compared in NFC, so `café.txt` sent composed or decomposed is one file.
      const files = input.files.map((file) => ({ path: file.path.normalize('NFC'), content: file.content }));
      const seen = new Map<string, number>();
      files.forEach((file, i) => {
        const param = `files[${i}].path`;
        checkCommittedPath(file.path, param);
        const earlier = seen.get(file.path);
        if (earlier !== undefined) {
          const how = input.files[earlier]?.path === input.files[i]?.path ? '' : ' once normalised to NFC';
          throw new ValidationError(param, `${param} repeats files[${earlier}].path${how}.`);
        }
        seen.set(file.path, i);
      });

      return db.transaction().execute(async (trx) => {
        const app = await trx
          .selectFrom('apps')
          .select(['id', 'head_commit_id'])
          .where('tenant_id', '=', tenantId)
          .where('name', '=', name)
          .forUpdate()
          .executeTakeFirst();
        if (!app) throw new NotFoundError('app', name);

        const existing = new Map(
          (
            await trx
              .selectFrom('app_files')
              .select(['path', 'content'])
              .where('tenant_id', '=', tenantId)
              .where('app_id', '=', app.id)
              .where(
                'path',
                'in',
                files.map((f) => f.path),
              )
              .execute()
          ).map((row) => [row.path, row.content]),
        );

        const commitId = newId();
        const changes: CommitFileChange[] = [];
        const upserts: { path: string; content: string }[] = [];
        const deletions: string[] = [];
        files.forEach((file, i) => {
          const current = existing.get(file.path);
          if (file.content === null) {
            if (current === undefined) {
              throw new InvalidParametersError(`files[${i}].path`, `There is no file at '${file.path}' to delete.`);
            }
            deletions.push(file.path);
            changes.push({ path: file.path, change: 'deleted' });
          } else if (current !== file.content) {
            upserts.push({ path: file.path, content: file.content });
            changes.push({ path: file.path, change: current === undefined ? 'added' : 'modified' });
          }
        });

        const now = new Date();
        if (upserts.length > 0) {
          await trx
            .insertInto('app_files')
            .values(
              upserts.map((f) => ({
                tenant_id: tenantId,
                app_id: app.id,
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
            .where('app_id', '=', app.id)
            .where('path', 'in', deletions)
            .execute();
        }
        const added = changes.filter((c) => c.change === 'added').map((c) => c.path);
        await refuseFileUnderFile(trx, tenantId, app.id, added, seen);
        const commit = await trx
          .insertInto('app_commits')
          .values({
            id: commitId,
            tenant_id: tenantId,
            app_id: app.id,
            message: input.message,
            parent_id: app.head_commit_id,
            files: JSON.stringify(changes),
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
    },

    async listCommits(tenantId: string, name: string, page: Page) {
      const id = await appId(tenantId, name);
      let query = db.selectFrom('app_commits').selectAll().where('tenant_id', '=', tenantId).where('app_id', '=', id);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toCommitRecord, (row) => row.id);
    },

    /** Current files, in path order; the cursor is the last path returned. */
    async listFiles(tenantId: string, name: string, page: Page) {
      const id = await appId(tenantId, name);
      let query = db
        .selectFrom('app_files')
        .select(['path', 'content', 'size', 'commit_id', 'updated_at'])
        .where('tenant_id', '=', tenantId)
        .where('app_id', '=', id)
        .orderBy('path')
        .limit(page.limit + 1);
      const after = decodePathCursor(page.cursor);
      if (after !== undefined) query = query.where('path', '>', after);
      return toList(
        await query.execute(),
        page,
        (row): AppFileRecord => ({
          object: 'app_file',
          path: row.path,
          content: row.content,
          size: row.size,
          commit_id: row.commit_id,
          updated_at: iso(row.updated_at),
        }),
        (row) => row.path,
      );
    },
  };
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

export type AppService = ReturnType<typeof createAppService>;
