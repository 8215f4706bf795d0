// Tasks and their comments (DESIGN.md §7, tasks; spec: task comment, behaviour rule 3).
// Every task has a per-tenant identifier `TASK-<n>`; `n` comes from a counter row incremented in
// the same transaction as the insert, so numbers run 1, 2, 3… with no gap and no repeat however
// many creations race. A task is addressed by its UUID or its identifier, on every route.
// A comment's mentions name staff users of the tenant; each mentioned user is notified.
import { CompiledQuery } from 'kysely';
import type { Db } from '../../db/client.js';
import { type CoalesceOptions, coalesce, type Outcome } from '../../db/coalesce.js';
import { isDataRefusal } from '../../db/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { findStaff, type PersonSummary } from '../accounts/users.js';
import { InvalidParametersError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { EmitEvent } from '../webhooks/events.js';

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

/** What a comment's event names of its task. */
type TaskSummary = Pick<TaskRow, 'id' | 'number' | 'title'>;

const TASK_COLUMNS = ['id', 'number', 'title', 'description', 'assignee_id', 'created_at', 'updated_at'] as const;

/** The query for the task a path names (UUID or `TASK-<n>`) in this tenant; `not_found` if `ref` names none. */
function taskQuery(db: Db, tenantId: string, ref: string) {
  const { id, number } = taskRef(ref);
  const query = db.selectFrom('tasks').select(TASK_COLUMNS).where('tenant_id', '=', tenantId);
  return number !== null ? query.where('number', '=', number) : query.where('id', '=', id as string);
}

/** What a path's task names: its UUID, or its number (`TASK-<n>`); `not_found` if neither. */
function taskRef(ref: string): { id: string; number: null } | { id: null; number: number } {
  const byNumber = TASK_IDENTIFIER.exec(ref);
  if (byNumber) return { id: null, number: Number(byNumber[1]) };
  if (isUuid(ref)) return { id: ref, number: null };
  throw new NotFoundError('task', ref);
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
  /**
   * A comment is written on its own (`db`, one statement, one round trip), coalesced with the
   * tenant's other comments waiting while its statements run. A statement of several that the
   * database refuses for what one comment holds (a task or user deleted meanwhile, a constraint)
   * is tried again one comment at a time, in turn, so each sees its own statement's error and no
   * other's. When an enabled endpoint subscribes to `task.comment.created`, that statement writes
   * nothing, and each comment is written again in a transaction with its event.
   */
  const commentWrites = coalesce<NewComment, WrittenComment>({
    ...COMMENT_WRITE_COALESCING,
    async runMany(tenantId, comments) {
      const unlessSubscribed = emitEvent !== undefined;
      try {
        return await writeComments(db, tenantId, comments, unlessSubscribed);
      } catch (error) {
        // Only a refusal that may be one comment's (data, a constraint, a deadlock) is tried again:
        // one that is every comment's (an outage, a timeout, a lost answer) is each one's answer,
        // as their own statements' would have been.
        if (comments.length === 1 || !isDataRefusal(error)) throw error;
        const outcomes: Outcome<WrittenComment>[] = [];
        // A retry refused for what is not its data (an outage, a timeout) is every later one's
        // answer too: they are not tried in turn, each waiting out its own connection timeout.
        let everyones: { error: unknown } | undefined;
        for (const comment of comments) {
          if (everyones !== undefined) {
            outcomes.push({ ok: false, error: everyones.error });
            continue;
          }
          try {
            outcomes.push(...(await writeComments(db, tenantId, [comment], unlessSubscribed)));
          } catch (error) {
            outcomes.push({ ok: false, error });
            if (!isDataRefusal(error)) everyones = { error };
          }
        }
        return outcomes;
      }
    },
  });

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

/** A comment to write, as the request gave it. */
interface NewComment {
  /** The task's UUID or identifier, as the path gave it, and the one of the two it is. */
  ref: string;
  taskId: string | null;
  taskNumber: number | null;
  content: string;
  authorId: string | null;
  /** In the order sent, lower-cased; a repeated id counts once. */
  mentionIds: string[];
  caller: Caller;
}

/** A comment written, or else its task found but the comment held back for its event (`record` null). */
interface WrittenComment {
  task: TaskSummary;
  record: TaskCommentRecord | null;
}

/**
 * Comment writes coalesced (db/coalesce.ts), per tenant: two statements at once (of the pool's 10
 * on PostgreSQL, 4 on PGlite), the second with the writes of one turn of the event loop, and the
 * writes beyond them wait, 32 to a statement at most; a statement held up (waiting on a row lock)
 * holds up the writes behind it 100 ms at most.
 */
export const COMMENT_WRITE_COALESCING: CoalesceOptions = { maxInFlight: 2, maxItems: 32, maxWaitMs: 100 };

/**
 * One statement for several comments of a tenant. For each it finds the task and the users the
 * comment names, and only when every one is found writes the comment, its mentions and the
 * notifications of the users mentioned (not the author). With `$2` (unless subscribed) it writes no
 * comment when an enabled endpoint subscribes to `task.comment.created` (as `subscribedEndpoints`
 * finds them, events.ts): the caller then writes each in a transaction with its event. One row per
 * comment whose task was found: the task (its id, number and title, all the event names of it),
 * whether the comment was written, and the users it names that were found.
 *
 * `$1` tenant; `$3`–`$11` one element per comment; `$12`–`$13` the users each names (mentions and
 * author, distinct), `$14`–`$16` its mentions, `$17`–`$19` its notifications, flattened with the
 * comment's id. Every read and write is of this tenant's rows: a user of another tenant is not
 * found, and a comment naming one is not written.
 */
const WRITE_COMMENTS = `
  with input as (
    select * from unnest($3::uuid[], $4::uuid[], $5::int[], $6::text[], $7::uuid[], $8::uuid[], $9::text[],
      $10::timestamptz[], $11::int[])
      as i (id, task_id, task_number, content, author_id, key_id, key_name, created_at, named_count)
  ),
  named as (select * from unnest($12::uuid[], $13::uuid[]) as n (comment_id, user_id)),
  staff as (
    select id, name, email from users where tenant_id = $1 and id in (select user_id from named)
  ),
  task as (
    select i.id as comment_id, t.id, t.number, t.title
    from input i
    join lateral (
      select id, number, title from tasks where tenant_id = $1 and id = i.task_id
      union all
      select id, number, title from tasks where tenant_id = $1 and number = i.task_number
    ) t on true
  ),
  held as (
    select $2::boolean and exists (
      select from webhook_endpoints
      where tenant_id = $1 and enabled and ('task.comment.created' = any(events) or '*' = any(events))
    ) as held
  ),
  comment as (
    insert into task_comments
      (id, tenant_id, task_id, content, author_user_id, author_key_id, author_key_name, created_at)
    select i.id, $1, task.id, i.content, i.author_id, i.key_id, i.key_name, i.created_at
    from input i join task on task.comment_id = i.id
    where not (select held from held)
      and (select count(*) from named join staff on staff.id = named.user_id where named.comment_id = i.id)
        = i.named_count
    returning id
  ),
  mentions as (
    insert into task_comment_mentions (tenant_id, comment_id, user_id, position)
    select $1, m.comment_id, m.user_id, m.position
    from unnest($14::uuid[], $15::uuid[], $16::int[]) as m (comment_id, user_id, position)
    where m.comment_id in (select id from comment)
  ),
  notifications as (
    insert into notifications (id, tenant_id, user_id, type, task_id, comment_id, message, created_at)
    select x.id, $1, x.user_id, 'task_mention', task.id, x.comment_id,
      format('%s mentioned you on %s: %s',
        coalesce((select name from staff where staff.id = i.author_id), i.key_name),
        '${IDENTIFIER_PREFIX}' || task.number, task.title),
      i.created_at
    from unnest($17::uuid[], $18::uuid[], $19::uuid[]) as x (id, comment_id, user_id)
    join comment on comment.id = x.comment_id
    join input i on i.id = x.comment_id
    join task on task.comment_id = x.comment_id
  )
  select task.*, task.comment_id in (select id from comment) as written,
    (select coalesce(json_agg(staff), '[]') from staff
      where staff.id in (select user_id from named where named.comment_id = task.comment_id)) as staff
  from task`;

/**
 * Writes `comments` of one tenant by one statement (`WRITE_COMMENTS`), atomic on its own, and
 * judges what each came to: written; held back for its event (`record` null, only with
 * `unlessSubscribed`); `not_found` for a missing task; `invalid_parameters` naming the first user
 * id not found.
 */
async function writeComments(
  executor: Db,
  tenantId: string,
  comments: NewComment[],
  unlessSubscribed: boolean,
): Promise<Outcome<WrittenComment>[]> {
  // The statement's arrays, a row per element: its comments, and the users, mentions and
  // notifications of each with the comment's id.
  const inputs: unknown[][] = [];
  const named: unknown[][] = [];
  const mentions: unknown[][] = [];
  const notifications: unknown[][] = [];
  const plans = comments.map((comment) => {
    const { authorId, caller } = comment;
    // Chosen now, as the statement goes: ids order the newest first.
    const id = newId();
    const createdAt = new Date();
    const mentionIds = [...new Set(comment.mentionIds)];
    const users = authorId === null || mentionIds.includes(authorId) ? mentionIds : [...mentionIds, authorId];
    for (const userId of users) named.push([id, userId]);
    mentionIds.forEach((userId, position) => {
      mentions.push([id, userId, position]);
      if (userId !== authorId) notifications.push([newId(), id, userId]);
    });
    inputs.push([
      id,
      comment.taskId,
      comment.taskNumber,
      comment.content,
      authorId,
      authorId === null ? caller.keyId : null,
      authorId === null ? caller.keyName : null,
      createdAt.toISOString(),
      users.length,
    ]);
    return { comment, id, createdAt, mentionIds };
  });
  const columns = (rows: unknown[][], width: number) =>
    Array.from({ length: width }, (_, i) => rows.map((row) => row[i]));
  const parameters = [
    tenantId,
    unlessSubscribed,
    ...columns(inputs, 9),
    ...columns(named, 2),
    ...columns(mentions, 3),
    ...columns(notifications, 3),
  ];
  const { rows } = await executor.executeQuery(
    CompiledQuery.raw(WRITE_COMMENTS, parameters) as CompiledQuery<
      TaskSummary & { comment_id: string; staff: PersonSummary[]; written: boolean }
    >,
  );
  const found = new Map(rows.map((row) => [row.comment_id, row]));
  return plans.map((plan): Outcome<WrittenComment> => {
    try {
      return { ok: true, value: judgeComment(plan, found.get(plan.id), unlessSubscribed) };
    } catch (error) {
      return { ok: false, error };
    }
  });
}

/** What one comment of `writeComments` came to, from its row of the statement's answer. */
function judgeComment(
  { comment, id, createdAt, mentionIds }: { comment: NewComment; id: string; createdAt: Date; mentionIds: string[] },
  found: (TaskSummary & { comment_id: string; staff: PersonSummary[]; written: boolean }) | undefined,
  unlessSubscribed: boolean,
): WrittenComment {
  if (found === undefined) throw new NotFoundError('task', comment.ref);
  const { comment_id: _, staff: people, written, ...task } = found;
  const { authorId, caller } = comment;
  const staff = new Map(people.map((person) => [person.id, person]));
  if (authorId !== null && !staff.has(authorId)) {
    throw new InvalidParametersError('author_id', 'author_id names no user of this workspace.');
  }
  comment.mentionIds.forEach((id, i) => {
    if (!staff.has(id)) {
      throw new InvalidParametersError(`mention_ids[${i}]`, `mention_ids[${i}] names no user of this workspace.`);
    }
  });
  if (!written) {
    if (!unlessSubscribed) throw new Error('a comment whose task and users were found was not written');
    return { task, record: null };
  }
  const row: CommentRow = {
    id,
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
