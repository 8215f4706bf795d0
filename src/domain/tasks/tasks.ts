// Tasks (DESIGN.md §7, tasks). Every task has a per-tenant identifier `TASK-<n>`; `n` comes from
// a counter row incremented in the same transaction as the insert, so numbers run 1, 2, 3… with
// no gap and no repeat however many creations race. A task is addressed by its UUID or its
// identifier, on every route (./refs.ts); its comments are in ./comments.ts.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { findStaff, PersonSummary } from '../accounts/users.js';
import { InvalidParametersError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import type { EmitEvent } from '../webhooks/events.js';
import type { Caller } from './comment-records.js';
import { createCommentWrites } from './comment-writes.js';
import { addComment, listComments, type NewCommentInput } from './comments.js';
import { findTask, identifierOf, TASK_COLUMNS, type TaskRow } from './refs.js';

export { COMMENT_WRITE_COALESCING } from './comment-writes.js';
export { findTask, identifierOf, TASK_IDENTIFIER } from './refs.js';

/** A task as the API answers it: the operations' response schema, and the record's type. */
export const Task = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('task'),
    identifier: Type.String({ description: '`TASK-<n>`, numbered 1, 2, 3… per workspace without gaps.' }),
    title: Type.String(),
    description: Nullable(Type.String()),
    assignee_id: Nullable(Uuid),
    assignee: Nullable(PersonSummary),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Task' },
);

export type TaskRecord = Static<typeof Task>;

export interface NewTask {
  title: string;
  description?: string | undefined;
  assignee_id?: string | undefined;
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

/** Tasks with their assignees, in the order given. */
async function taskRecords(executor: Db, tenantId: string, rows: TaskRow[]) {
  const assignees = await findStaff(
    executor,
    tenantId,
    rows.flatMap((r) => (r.assignee_id ? [r.assignee_id] : [])),
  );
  return rows.map((row) => toTaskRecord(row, (row.assignee_id && assignees.get(row.assignee_id)) || null));
}

async function createTask(db: Db, tenantId: string, input: NewTask): Promise<TaskRecord> {
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
}

async function listTasks(db: Db, tenantId: string, page: Page) {
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
}

async function getTask(db: Db, tenantId: string, ref: string): Promise<TaskRecord> {
  const [record] = await taskRecords(db, tenantId, [await findTask(db, tenantId, ref)]);
  return record as TaskRecord;
}

export function createTaskService({ db, emitEvent }: { db: Db; emitEvent?: EmitEvent }) {
  const comments = { db, emitEvent, commentWrites: createCommentWrites(db, emitEvent) };
  return {
    createTask: (tenantId: string, input: NewTask) => createTask(db, tenantId, input),
    listTasks: (tenantId: string, page: Page) => listTasks(db, tenantId, page),
    getTask: (tenantId: string, ref: string) => getTask(db, tenantId, ref),
    addComment: (tenantId: string, ref: string, input: NewCommentInput, caller: Caller) =>
      addComment(comments, tenantId, ref, input, caller),
    listComments: (tenantId: string, ref: string, page: Page) => listComments(db, tenantId, ref, page),
  };
}

export type TaskService = ReturnType<typeof createTaskService>;
