// Writing task comments: the comments of a tenant waiting together (db/coalesce.ts) go in one
// statement, which finds the task and the users each comment names, and writes a comment, its
// mentions and the notifications of the users mentioned only when every one is found.
import { CompiledQuery } from 'kysely';
import type { Db } from '../../db/index.js';
import { type CoalesceOptions, coalesce, isDataRefusal, type Outcome } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import type { PersonSummary } from '../accounts/users.js';
import { InvalidParametersError, NotFoundError } from '../errors.js';
import type { EmitEvent } from '../webhooks/events.js';
import { authorOf, type Caller, type CommentRow, type TaskCommentRecord, toCommentRecord } from './comment-records.js';
import { IDENTIFIER_PREFIX, type TaskSummary } from './refs.js';

/** A comment to write, as the request gave it. */
export interface NewComment {
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
export interface WrittenComment {
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
export async function writeComments(
  executor: Db,
  tenantId: string,
  comments: NewComment[],
  unlessSubscribed: boolean,
): Promise<Outcome<WrittenComment>[]> {
  const { plans, parameters } = statementOf(tenantId, comments, unlessSubscribed);
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

/** What each comment is written as (its id and time, chosen now), and `WRITE_COMMENTS`' parameters for them all. */
function statementOf(tenantId: string, comments: NewComment[], unlessSubscribed: boolean) {
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
  return { plans, parameters };
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

/**
 * A comment is written on its own (`db`, one statement, one round trip), coalesced with the
 * tenant's other comments waiting while its statements run. A statement of several that the
 * database refuses for what one comment holds (a task or user deleted meanwhile, a constraint)
 * is tried again one comment at a time, in turn, so each sees its own statement's error and no
 * other's. When an enabled endpoint subscribes to `task.comment.created`, that statement writes
 * nothing, and each comment is written again in a transaction with its event.
 */
export function createCommentWrites(db: Db, emitEvent: EmitEvent | undefined) {
  return coalesce<NewComment, WrittenComment>({
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
}
