// A staff user's notifications: each a mention in a task comment.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import { readUser } from './user-records.js';

/** A notification as the API answers it: the operations' response schema, and the record's type. */
export const Notification = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('notification'),
    type: Type.String({ description: '`task_mention`: the user was mentioned in a task comment.' }),
    user_id: Uuid,
    task_id: Nullable(Uuid),
    comment_id: Nullable(Uuid),
    message: Type.String({ description: 'What happened, for people: "Ana mentioned you on TASK-3: …".' }),
    created_at: Timestamp,
  },
  { title: 'Notification' },
);

export type NotificationRecord = Static<typeof Notification>;

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
