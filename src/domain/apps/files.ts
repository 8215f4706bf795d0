// An app's current files, as its last commit to each path left them.
import type { Db } from '../../db/client.js';
import { iso } from '../../lib/time.js';
import { type Page, toList } from '../pagination.js';
import { findAppId } from './names.js';
import { decodePathCursor } from './paths.js';

export interface AppFileRecord {
  object: 'app_file';
  path: string;
  content: string;
  size: number;
  commit_id: string;
  updated_at: string;
}

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
