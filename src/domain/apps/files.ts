// An app's current files, as its last commit to each path left them.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { type Page, toList } from '../pagination.js';
import { Timestamp, Uuid } from '../shapes.js';
import { findAppId } from './names.js';
import { decodePathCursor } from './paths.js';

/** A file as the API answers it: the operations' response schema, and the record's type. */
export const AppFile = Type.Object(
  {
    object: Type.Literal('app_file'),
    path: Type.String(),
    content: Type.String(),
    size: Type.Integer({ description: 'Bytes of UTF-8 content.' }),
    commit_id: Uuid,
    updated_at: Timestamp,
  },
  { title: 'AppFile' },
);

export type AppFileRecord = Static<typeof AppFile>;

/** Current files, in path order; the cursor is the last path returned. */
export async function listFiles(db: Db, tenantId: string, name: string, page: Page) {
  const id = await findAppId(db, tenantId, name);
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
}
