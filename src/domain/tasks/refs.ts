// A task is addressed by its UUID or its per-tenant identifier `TASK-<n>`, on every route.
import type { Db } from '../../db/index.js';
import { isUuid } from '../../lib/ids.js';
import { NotFoundError } from '../errors.js';

export const TASK_IDENTIFIER = /^TASK-([1-9][0-9]{0,8})$/;

export const IDENTIFIER_PREFIX = 'TASK-';
export const identifierOf = (n: number) => `${IDENTIFIER_PREFIX}${n}`;

export interface TaskRow {
  id: string;
  number: number;
  title: string;
  description: string | null;
  assignee_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** What a comment's event names of its task. */
export type TaskSummary = Pick<TaskRow, 'id' | 'number' | 'title'>;

export const TASK_COLUMNS = [
  'id',
  'number',
  'title',
  'description',
  'assignee_id',
  'created_at',
  'updated_at',
] as const;

/** The query for the task a path names (UUID or `TASK-<n>`) in this tenant; `not_found` if `ref` names none. */
function taskQuery(db: Db, tenantId: string, ref: string) {
  const { id, number } = taskRef(ref);
  const query = db.selectFrom('tasks').select(TASK_COLUMNS).where('tenant_id', '=', tenantId);
  return number !== null ? query.where('number', '=', number) : query.where('id', '=', id as string);
}

/** What a path's task names: its UUID, or its number (`TASK-<n>`); `not_found` if neither. */
export function taskRef(ref: string): { id: string; number: null } | { id: null; number: number } {
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
