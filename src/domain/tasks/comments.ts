// A task's comments (spec: task comment, behaviour rule 3). A comment's mentions name staff users
// of the tenant; each mentioned user is notified.
import type { Db } from '../../db/index.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';
import { type Caller, type CommentRow, commentRecords, type TaskCommentRecord } from './comment-records.js';
import { type createCommentWrites, type NewComment, writeComments } from './comment-writes.js';
import { findTask, identifierOf, taskRef } from './refs.js';

export interface CommentDeps {
  db: Db;
  emitEvent?: EmitEvent | undefined;
  /** The tenant's comment writes, coalesced. */
  commentWrites: ReturnType<typeof createCommentWrites>;
}

export interface NewCommentInput {
  content: string;
  mention_ids?: string[] | undefined;
  author_id?: string | undefined;
}

/**
 * Adds a comment and notifies each mentioned user (spec: behaviour rule 3), all or nothing.
 * Repeated mention ids count once; an author mentioning themselves is not notified.
 *
 * The comment is written by one statement (`writeComments`), atomic on its own: one round trip.
 * When an enabled endpoint subscribes to `task.comment.created`, that statement writes nothing,
 * and the comment is written again in a transaction with its event.
 */
export async function addComment(
  { db, emitEvent, commentWrites }: CommentDeps,
  tenantId: string,
  ref: string,
  input: NewCommentInput,
  caller: Caller,
): Promise<TaskCommentRecord> {
  const { id: taskId, number: taskNumber } = taskRef(ref);
  const comment: NewComment = {
    ref,
    taskId,
    taskNumber,
    content: input.content,
    // Lower-cased as the database answers UUIDs (validation does it too), so that the statement's
    // match of the users named and the checks made on its answer cannot disagree.
    authorId: input.author_id?.toLowerCase() ?? null,
    mentionIds: (input.mention_ids ?? []).map((id) => id.toLowerCase()),
    caller,
  };
  const alone = await commentWrites.run(tenantId, comment);
  if (alone.record) return alone.record;
  return db.transaction().execute(async (trx) => {
    const [written] = await writeComments(trx, tenantId, [comment], false);
    if (!written?.ok) throw written?.error;
    const { task } = written.value;
    const record = written.value.record as TaskCommentRecord;
    // Webhook event, in this transaction: how a mention reaches people outside the product.
    await emitEvent?.(trx, tenantId, 'task.comment.created', {
      task: { id: task.id, identifier: identifierOf(task.number), title: task.title },
      comment: record,
    });
    return record;
  });
}

/** Comments of a task, newest first. */
export async function listComments(db: Db, tenantId: string, ref: string, page: Page) {
  const task = await findTask(db, tenantId, ref);
  let query = db
    .selectFrom('task_comments')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('task_id', '=', task.id);
  query = newestFirst(query, page);
  const list = toList(
    (await query.execute()) as CommentRow[],
    page,
    (row) => row,
    (row) => row.id,
  );
  return { ...list, data: await commentRecords(db, tenantId, list.data) };
}
