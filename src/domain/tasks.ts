// Tasks and their comments (DESIGN.md §7, tasks; spec: task comment, behaviour rule 3).
// Every task has a per-tenant identifier `TASK-<n>`; `n` comes from a counter row incremented in
// the same transaction as the insert, so numbers run 1, 2, 3… with no gap and no repeat however
// many creations race. A task is addressed by its UUID or its identifier, on every route.
// A comment's mentions name staff users of the tenant; each mentioned user is notified.
import { sql } from 'kysely';
import type { Db } from '../db/client.js';
import { isUuid, newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import { InvalidParametersError, NotFoundError } from './errors.js';
import { type EmitEvent, subscribedEndpoints } from './events.js';
import { newestFirst, type Page, toList } from './pagination.js';
import { findStaff, type PersonSummary } from './users.js';

export const TASK_IDENTIFIER = /^TASK-([1-9][0-9]{0,8})$/;

export interface TaskRecord {
  id: string;
  object: 'task';
  identifier: string;
  title: string;
  description: string | null;
  assignee_id: string | null;
  assignee: PersonSummary | null;
  created_at: string;
  updated_at: string;
}

export interface TaskCommentRecord {
  id: string;
  object: 'task_comment';
  task_id: string;
  content: string;
  mentions: PersonSummary[];
  author: PersonSummary;
  created_at: string;
  edited_at: string | null;
}

/** Who calls: the API key, which is the comment's author when no `author_id` is sent. */
export interface Caller {
  keyId: string;
  keyName: string;
}

const IDENTIFIER_PREFIX = 'TASK-';
export const identifierOf = (n: number) => `${IDENTIFIER_PREFIX}${n}`;

interface TaskRow {
  id: string;
  number: number;
  title: string;
  description: string | null;
  assignee_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const TASK_COLUMNS = ['id', 'number', 'title', 'description', 'assignee_id', 'created_at', 'updated_at'] as const;

/** The query for the task a path names (UUID or `TASK-<n>`) in this tenant; `not_found` if `ref` names none. */
function taskQuery(db: Db, tenantId: string, ref: string) {
  const byNumber = TASK_IDENTIFIER.exec(ref);
  if (!byNumber && !isUuid(ref)) throw new NotFoundError('task', ref);
  const query = db.selectFrom('tasks').select(TASK_COLUMNS).where('tenant_id', '=', tenantId);
  return byNumber ? query.where('number', '=', Number(byNumber[1])) : query.where('id', '=', ref);
}

/** The task a path names (UUID or `TASK-<n>`) in this tenant, or `not_found`. */
export async function findTask(db: Db, tenantId: string, ref: string): Promise<TaskRow> {
  const row = await taskQuery(db, tenantId, ref).executeTakeFirst();
  if (!row) throw new NotFoundError('task', ref);
  return row;
}

const toTaskRecord = (row: TaskRow, assignee: PersonSummary | null): TaskRecord => ({
  id: row.id,
  object: 'task',
  identifier: identifierOf(row.number),
  title: row.title,
  description: row.description,
  assignee_id: row.assignee_id,
  assignee,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

interface CommentRow {
  id: string;
  task_id: string;
  content: string;
  author_user_id: string | null;
  author_key_id: string | null;
  author_key_name: string | null;
  created_at: Date;
  edited_at: Date | null;
}

export function createTaskService({ db, emitEvent }: { db: Db; emitEvent?: EmitEvent }) {
  async function taskRecords(executor: Db, tenantId: string, rows: TaskRow[]) {
    const assignees = await findStaff(
      executor,
      tenantId,
      rows.flatMap((r) => (r.assignee_id ? [r.assignee_id] : [])),
    );
    return rows.map((row) => toTaskRecord(row, (row.assignee_id && assignees.get(row.assignee_id)) || null));
  }

  /** Comments with their authors and mentions, in the order given. */
  async function commentRecords(executor: Db, tenantId: string, rows: CommentRow[]): Promise<TaskCommentRecord[]> {
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

  return {
    async createTask(
      tenantId: string,
      input: { title: string; description?: string | undefined; assignee_id?: string | undefined },
    ): Promise<TaskRecord> {
      const assigneeId = input.assignee_id ?? null;
      return db.transaction().execute(async (trx) => {
        if (assigneeId !== null && !(await findStaff(trx, tenantId, [assigneeId])).has(assigneeId)) {
          throw new InvalidParametersError('assignee_id', `assignee_id names no user of this workspace.`);
        }
        // The increment holds the counter row's lock until commit: the next creation waits for
        // it, and a rollback returns the number, so the sequence has no gap.
        const { last_number } = await trx
          .insertInto('task_counters')
          .values({ tenant_id: tenantId, last_number: 1 })
          .onConflict((oc) =>
            oc.column('tenant_id').doUpdateSet((eb) => ({ last_number: eb('task_counters.last_number', '+', 1) })),
          )
          .returning('last_number')
          .executeTakeFirstOrThrow();
        const now = new Date();
        const row = await trx
          .insertInto('tasks')
          .values({
            id: newId(),
            tenant_id: tenantId,
            number: last_number,
            title: input.title,
            description: input.description ?? null,
            assignee_id: assigneeId,
            created_at: now,
            updated_at: now,
          })
          .returning(TASK_COLUMNS)
          .executeTakeFirstOrThrow();
        const [record] = await taskRecords(trx, tenantId, [row]);
        return record as TaskRecord;
      });
    },

    async listTasks(tenantId: string, page: Page) {
      let query = db.selectFrom('tasks').select(TASK_COLUMNS).where('tenant_id', '=', tenantId);
      query = newestFirst(query, page);
      const rows = await query.execute();
      const list = toList(
        rows,
        page,
        (row) => row,
        (row) => row.id,
      );
      return { ...list, data: await taskRecords(db, tenantId, list.data) };
    },

    async getTask(tenantId: string, ref: string): Promise<TaskRecord> {
      const [record] = await taskRecords(db, tenantId, [await findTask(db, tenantId, ref)]);
      return record as TaskRecord;
    },

    /**
     * Adds a comment and notifies each mentioned user (spec: behaviour rule 3), all or nothing.
     * Repeated mention ids count once; an author mentioning themselves is not notified.
     *
     * The comment is written by one statement (`writeComment`), atomic on its own: one round trip.
     * When an enabled endpoint subscribes to `task.comment.created`, that statement writes nothing,
     * and the comment is written again in a transaction with its event.
     */
    async addComment(
      tenantId: string,
      ref: string,
      input: { content: string; mention_ids?: string[] | undefined; author_id?: string | undefined },
      caller: Caller,
    ): Promise<TaskCommentRecord> {
      const comment: NewComment = {
        id: newId(),
        tenantId,
        ref,
        content: input.content,
        // Lower-cased as the database answers UUIDs (validation does it too), so that the statement's
        // match of the users named and the checks made on its answer cannot disagree.
        authorId: input.author_id?.toLowerCase() ?? null,
        mentionIds: (input.mention_ids ?? []).map((id) => id.toLowerCase()),
        caller,
        createdAt: new Date(),
      };
      const alone = await writeComment(db, comment, emitEvent !== undefined);
      if (alone.record) return alone.record;
      return db.transaction().execute(async (trx) => {
        const written = await writeComment(trx, comment, false);
        const { task } = written;
        const record = written.record as TaskCommentRecord;
        // Webhook event (issue 12), in this transaction: how a mention reaches people outside the product.
        await emitEvent?.(trx, tenantId, 'task.comment.created', {
          task: { id: task.id, identifier: identifierOf(task.number), title: task.title },
          comment: record,
        });
        return record;
      });
    },

    /** Comments of a task, newest first. */
    async listComments(tenantId: string, ref: string, page: Page) {
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
    },
  };
}

/** A comment to write: its id and time are chosen before the statement that writes it. */
interface NewComment {
  id: string;
  tenantId: string;
  /** The task's UUID or identifier, as the path gave it. */
  ref: string;
  content: string;
  authorId: string | null;
  /** In the order sent, lower-cased; a repeated id counts once. */
  mentionIds: string[];
  caller: Caller;
  createdAt: Date;
}

/**
 * One statement finds the task and the users the comment names, and only when every one is found
 * writes the comment, its mentions and the notifications of the users mentioned (not the author).
 * With `unlessSubscribed`, it also writes nothing when an enabled endpoint subscribes to the
 * comment's event: `record` is then null, and the caller writes the comment in a transaction with
 * its event.
 * `not_found` for a missing task; `invalid_parameters` naming the first user id not found.
 */
async function writeComment(
  executor: Db,
  comment: NewComment,
  unlessSubscribed: boolean,
): Promise<{ task: TaskRow; record: TaskCommentRecord | null }> {
  const { tenantId, authorId, caller, createdAt } = comment;
  const mentionIds = [...new Set(comment.mentionIds)];
  const named = authorId === null || mentionIds.includes(authorId) ? mentionIds : [...mentionIds, authorId];
  const notified = mentionIds.filter((userId) => userId !== authorId);
  const held = unlessSubscribed
    ? sql<boolean>`exists (${subscribedEndpoints(executor, tenantId, 'task.comment.created')})`
    : sql<boolean>`false`;
  const { rows } = await sql<TaskRow & { staff: PersonSummary[]; written: boolean }>`
    with task as (${taskQuery(executor, tenantId, comment.ref)}),
    staff as (
      select id, name, email from users where tenant_id = ${tenantId} and id = any(${named}::uuid[])
    ),
    ready as (
      select id from task where (select count(*) from staff) = ${named.length} and not ${held}
    ),
    comment as (
      insert into task_comments
        (id, tenant_id, task_id, content, author_user_id, author_key_id, author_key_name, created_at)
      select ${comment.id}::uuid, ${tenantId}, ready.id, ${comment.content}, ${authorId}::uuid,
        ${authorId === null ? caller.keyId : null}::uuid, ${authorId === null ? caller.keyName : null}::text,
        ${createdAt}::timestamptz
      from ready
      returning id
    ),
    mentions as (
      insert into task_comment_mentions (tenant_id, comment_id, user_id, position)
      select ${tenantId}, comment.id, m.user_id, m.position - 1
      from comment, unnest(${mentionIds}::uuid[]) with ordinality as m (user_id, position)
    ),
    notifications as (
      insert into notifications (id, tenant_id, user_id, type, task_id, comment_id, message, created_at)
      select n.id, ${tenantId}, n.user_id, 'task_mention', task.id, comment.id,
        format('%s mentioned you on %s: %s',
          coalesce((select name from staff where id = ${authorId}::uuid), ${caller.keyName}::text),
          ${IDENTIFIER_PREFIX}::text || task.number, task.title),
        ${createdAt}::timestamptz
      from comment, task, unnest(${notified.map(() => newId())}::uuid[], ${notified}::uuid[]) as n (id, user_id)
    )
    select task.*, (select coalesce(json_agg(staff), '[]') from staff) as staff,
      exists (select from comment) as written
    from task`.execute(executor);
  const task = rows[0];
  if (!task) throw new NotFoundError('task', comment.ref);
  const staff = new Map(task.staff.map((person) => [person.id, person]));
  if (authorId !== null && !staff.has(authorId)) {
    throw new InvalidParametersError('author_id', 'author_id names no user of this workspace.');
  }
  comment.mentionIds.forEach((id, i) => {
    if (!staff.has(id)) {
      throw new InvalidParametersError(`mention_ids[${i}]`, `mention_ids[${i}] names no user of this workspace.`);
    }
  });
  if (!task.written) {
    if (!unlessSubscribed) throw new Error('a comment whose task and users were found was not written');
    return { task, record: null };
  }
  const row: CommentRow = {
    id: comment.id,
    task_id: task.id,
    content: comment.content,
    author_user_id: authorId,
    author_key_id: authorId === null ? caller.keyId : null,
    author_key_name: authorId === null ? caller.keyName : null,
    created_at: createdAt,
    edited_at: null,
  };
  // The mentions and the author are the staff read above: no need to read them back.
  const mentions = mentionIds.map((userId) => staff.get(userId) as PersonSummary);
  return { task, record: toCommentRecord(row, mentions, authorOf(row, staff)) };
}

/** A comment as the API answers it, given its mentions (in the order written) and its author. */
function toCommentRecord(row: CommentRow, mentions: PersonSummary[], author: PersonSummary): TaskCommentRecord {
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
function authorOf(row: CommentRow, staff: Map<string, PersonSummary>): PersonSummary {
  if (row.author_user_id !== null) {
    return staff.get(row.author_user_id) ?? { id: row.author_user_id, name: 'Former user', email: null };
  }
  return { id: row.author_key_id ?? '', name: row.author_key_name ?? 'API key', email: null };
}

export type TaskService = ReturnType<typeof createTaskService>;
