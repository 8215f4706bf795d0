// A staff user's notifications: each a mention in a task comment.
import type { Db } from '../../db/client.js';
import { iso } from '../../lib/time.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { readUser } from './user-records.js';

export interface NotificationRecord {
  id: string;
  object: 'notification';
  type: string;
  user_id: string;
  task_id: string | null;
  comment_id: string | null;
  message: string;
  created_at: string;
}

/** The user's notifications (mentions in task comments), newest first. */
export async function listNotifications(db: Db, tenantId: string, userId: string, page: Page) {
  await readUser(db, tenantId, userId);
  let query = db
    .selectFrom('notifications')
    .select(['id', 'type', 'user_id', 'task_id', 'comment_id', 'message', 'created_at'])
    .where('tenant_id', '=', tenantId)
    .where('user_id', '=', userId);
  query = newestFirst(query, page);
  return toList(
    await query.execute(),
    page,
    (row): NotificationRecord => ({ ...row, object: 'notification', created_at: iso(row.created_at) }),
    (row) => row.id,
  );
}
