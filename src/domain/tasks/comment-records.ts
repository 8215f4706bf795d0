// A task comment as the API answers it: its mentions in the order written, and its author, a
// staff user or the API key that wrote it.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { findStaff, PersonSummary } from '../accounts/users.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

/** A comment as the API answers it: the operations' response schema, and the record's type. */
export const TaskComment = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('task_comment'),
    task_id: Uuid,
    content: Type.String(),
    mentions: Type.Array(PersonSummary, { description: 'The staff users mentioned, in the order sent.' }),
    created_at: Timestamp,
    author: Type.Object(PersonSummary.properties, {
      description: 'The staff user named by `author_id`, else the API key that added the comment (email null).',
    }),
    edited_at: Nullable(Timestamp),
  },
  { title: 'TaskComment' },
);

export type TaskCommentRecord = Static<typeof TaskComment>;

/** Who calls: the API key, which is the comment's author when no `author_id` is sent. */
export interface Caller {
  keyId: string;
  keyName: string;
}

export interface CommentRow {
  id: string;
  task_id: string;
  content: string;
  author_user_id: string | null;
  author_key_id: string | null;
  author_key_name: string | null;
  created_at: Date;
  edited_at: Date | null;
}

/** Comments with their authors and mentions, in the order given. */
export async function commentRecords(executor: Db, tenantId: string, rows: CommentRow[]): Promise<TaskCommentRecord[]> {
  if (rows.length === 0) return [];
  const mentionRows = await executor
    .selectFrom('task_comment_mentions as m')
    .innerJoin('users as u', (join) => join.onRef('u.id', '=', 'm.user_id').onRef('u.tenant_id', '=', 'm.tenant_id'))
    .select(['m.comment_id', 'u.id', 'u.name', 'u.email'])
    .where('m.tenant_id', '=', tenantId)
    .where(
      'm.comment_id',
      'in',
      rows.map((r) => r.id),
    )
    .orderBy('m.comment_id')
    .orderBy('m.position')
    .execute();
  const mentions = new Map<string, PersonSummary[]>();
  for (const { comment_id, ...person } of mentionRows) {
    mentions.set(comment_id, [...(mentions.get(comment_id) ?? []), person]);
  }
  const authors = await findStaff(
    executor,
    tenantId,
    rows.flatMap((r) => (r.author_user_id ? [r.author_user_id] : [])),
  );
  return rows.map((row) => toCommentRecord(row, mentions.get(row.id) ?? [], authorOf(row, authors)));
}

/** A comment as the API answers it, given its mentions (in the order written) and its author. */
export function toCommentRecord(row: CommentRow, mentions: PersonSummary[], author: PersonSummary): TaskCommentRecord {
  return {
    id: row.id,
    object: 'task_comment',
    task_id: row.task_id,
    content: row.content,
    mentions,
    author,
    created_at: iso(row.created_at),
    edited_at: iso(row.edited_at),
  };
}

/**
 * A staff author as they are now; an integration (the API key that called) by its id and name,
 * with `email: null` since a key has none.
 */
export function authorOf(row: CommentRow, staff: Map<string, PersonSummary>): PersonSummary {
  if (row.author_user_id !== null) {
    return staff.get(row.author_user_id) ?? { id: row.author_user_id, name: 'Former user', email: null };
  }
  return { id: row.author_key_id ?? '', name: row.author_key_name ?? 'API key', email: null };
}
