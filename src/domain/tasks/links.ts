// Task links (spec: task link, behaviour rule 4): a task points at a conversation, ticket,
// feedback, message or knowledge update request of the same tenant. "Linking twice is a no-op":
// one link per task and target is a unique constraint, and creation is one
// `insert … on conflict` statement, so even racing requests make one link — never a
// check-then-insert. A deleted link is kept and reads `deleted: true`; linking the target again
// revives it.
import { type Static, Type } from '@sinclair/typebox';
import type { Db, TaskLinksTable } from '../../db/index.js';
import { isUuid, newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { InvalidParametersError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';
import type { EmitEvent } from '../webhooks/events.js';
import { findTask, identifierOf, type TaskSummary } from './refs.js';

/** The linkable kinds, with the admin console path each target is shown at. */
export const LINK_TARGETS = {
  conversation: 'conversations',
  ticket: 'tickets',
  feedback: 'feedback',
  message: 'messages',
  knowledge_update_request: 'knowledge-update-requests',
} as const;

export type LinkTargetType = keyof typeof LINK_TARGETS;
export const LINK_TARGET_TYPES = Object.keys(LINK_TARGETS) as LinkTargetType[];

export const TargetType = Type.Unsafe<LinkTargetType>({
  type: 'string',
  enum: LINK_TARGET_TYPES,
  description: 'The kind of the target.',
});

/** A task link as the API answers it: the operations' response schema, and the record's type. */
export const TaskLink = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('task_link'),
    task_id: Uuid,
    target_type: TargetType,
    target_id: Uuid,
    context: Type.Object(
      { conversation_id: Nullable(Uuid), message_id: Nullable(Uuid) },
      { description: 'The conversation and message the target belongs to, where it has them.' },
    ),
    deleted: Type.Boolean(),
    admin_url: Type.String({ description: 'Where the target is shown in the admin console.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'TaskLink' },
);

export type TaskLinkRecord = Static<typeof TaskLink>;

/** The conversation and message a link's target belongs to. */
export type LinkContext = TaskLinkRecord['context'];

type LinkRow = Omit<TaskLinksTable, 'created_at' | 'updated_at' | 'deleted_at'> & {
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
};

/**
 * The conversation and message a target belongs to (a message: its conversation and itself;
 * feedback: the message it rates and its conversation; a ticket or a knowledge update request:
 * the conversation and message it came from, where known), or undefined when the tenant has no
 * such target. The tables belong to the conversations and knowledge areas; this only reads them.
 * A target in a conversation a simulation case is playing is no target: it is deleted when the
 * case is recorded (docs/simulations.md).
 */
async function findTarget(
  db: Db,
  tenantId: string,
  type: LinkTargetType,
  id: string,
): Promise<LinkContext | undefined> {
  switch (type) {
    case 'conversation': {
      const row = await db
        .selectFrom('conversations')
        .select('id')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .where(isCustomerConversation(tenantId, 'id'))
        .executeTakeFirst();
      return row && { conversation_id: row.id, message_id: null };
    }
    case 'message': {
      const row = await db
        .selectFrom('messages')
        .select(['id', 'conversation_id'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .where(isCustomerConversation(tenantId, 'conversation_id'))
        .executeTakeFirst();
      return row && { conversation_id: row.conversation_id, message_id: row.id };
    }
    case 'ticket':
      return db
        .selectFrom('tickets')
        .select(['conversation_id', 'message_id'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .where(isCustomerConversation(tenantId, 'conversation_id'))
        .executeTakeFirst();
    case 'feedback':
      return db
        .selectFrom('message_feedback')
        .select(['conversation_id', 'message_id'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .where(isCustomerConversation(tenantId, 'conversation_id'))
        .executeTakeFirst();
    case 'knowledge_update_request':
      return db
        .selectFrom('knowledge_update_requests')
        .select(['conversation_id', 'message_id'])
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .where(isCustomerConversation(tenantId, 'conversation_id', { nullable: true }))
        .executeTakeFirst();
  }
}

export interface LinkDeps {
  db: Db;
  adminBaseUrl: string;
  emitEvent?: EmitEvent | undefined;
}

export interface NewLink {
  target_type: LinkTargetType;
  target_id: string;
}

function toLinkRecord(adminBaseUrl: string, row: LinkRow): TaskLinkRecord {
  const type = row.target_type as LinkTargetType;
  return {
    id: row.id,
    object: 'task_link',
    task_id: row.task_id,
    target_type: type,
    target_id: row.target_id,
    context: { conversation_id: row.conversation_id, message_id: row.message_id },
    deleted: row.deleted_at !== null,
    admin_url: `${adminBaseUrl}/${LINK_TARGETS[type]}/${row.target_id}`,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

async function findLink(db: Db, tenantId: string, taskId: string, linkId: string) {
  if (!isUuid(linkId)) throw new NotFoundError('task link', linkId);
  const row = await db
    .selectFrom('task_links')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('task_id', '=', taskId)
    .where('id', '=', linkId)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('task link', linkId);
  return row;
}

/**
 * Links a target to a task: `created` is true only for a new link. The same target again
 * answers the existing link and changes nothing, or revives it when it was deleted.
 */
async function linkTask(
  deps: LinkDeps,
  tenantId: string,
  ref: string,
  input: NewLink,
): Promise<{ created: boolean; link: TaskLinkRecord }> {
  const { db, adminBaseUrl } = deps;
  const task = await findTask(db, tenantId, ref);
  const context = await findTarget(db, tenantId, input.target_type, input.target_id);
  if (!context) {
    throw new InvalidParametersError(
      'target_id',
      `target_id names no ${input.target_type.replace(/_/g, ' ')} of this workspace.`,
    );
  }
  const id = newId();
  const written = await writeLink(deps, tenantId, task, input, context, id);
  if (written) return { created: written.id === id, link: toLinkRecord(adminBaseUrl, written) };
  const existing = await db
    .selectFrom('task_links')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('task_id', '=', task.id)
    .where('target_type', '=', input.target_type)
    .where('target_id', '=', input.target_id)
    .executeTakeFirstOrThrow();
  return { created: false, link: toLinkRecord(adminBaseUrl, existing) };
}

/**
 * Inserts the link as `id`, or revives it when it was deleted, and answers the row written. A
 * live link is left untouched (the update's `where` fails, nothing is returned). The insert and
 * its webhook event commit together; only a new link is an event.
 */
async function writeLink(
  { db, adminBaseUrl, emitEvent }: LinkDeps,
  tenantId: string,
  task: TaskSummary,
  input: NewLink,
  context: LinkContext,
  id: string,
) {
  const now = new Date();
  return db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('task_links')
      .values({
        id,
        tenant_id: tenantId,
        task_id: task.id,
        target_type: input.target_type,
        target_id: input.target_id,
        conversation_id: context.conversation_id,
        message_id: context.message_id,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc
          .columns(['task_id', 'target_type', 'target_id'])
          .doUpdateSet({ deleted_at: null, updated_at: now })
          .where('task_links.deleted_at', 'is not', null),
      )
      .returningAll()
      .executeTakeFirst();
    if (inserted?.id === id) {
      await emitEvent?.(trx, tenantId, 'task.link.created', {
        task: { id: task.id, identifier: identifierOf(task.number), title: task.title },
        link: toLinkRecord(adminBaseUrl, inserted),
      });
    }
    return inserted;
  });
}

/** Links of a task, deleted ones included (they read `deleted: true`), newest first. */
async function listLinks({ db, adminBaseUrl }: LinkDeps, tenantId: string, ref: string, page: Page) {
  const task = await findTask(db, tenantId, ref);
  let query = db.selectFrom('task_links').selectAll().where('tenant_id', '=', tenantId).where('task_id', '=', task.id);
  query = newestFirst(query, page);
  return toList(
    await query.execute(),
    page,
    (row) => toLinkRecord(adminBaseUrl, row),
    (row) => row.id,
  );
}

async function getLink({ db, adminBaseUrl }: LinkDeps, tenantId: string, ref: string, linkId: string) {
  const task = await findTask(db, tenantId, ref);
  return toLinkRecord(adminBaseUrl, await findLink(db, tenantId, task.id, linkId));
}

/** Marks the link deleted and answers it; deleting a deleted link changes nothing. */
async function deleteLink({ db, adminBaseUrl }: LinkDeps, tenantId: string, ref: string, linkId: string) {
  const task = await findTask(db, tenantId, ref);
  await findLink(db, tenantId, task.id, linkId);
  const now = new Date();
  const row = await db
    .updateTable('task_links')
    .set({ deleted_at: now, updated_at: now })
    .where('tenant_id', '=', tenantId)
    .where('task_id', '=', task.id)
    .where('id', '=', linkId)
    .where('deleted_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
  return toLinkRecord(adminBaseUrl, row ?? (await findLink(db, tenantId, task.id, linkId)));
}

export function createTaskLinkService(deps: LinkDeps) {
  return {
    linkTask: (tenantId: string, ref: string, input: NewLink) => linkTask(deps, tenantId, ref, input),
    listLinks: (tenantId: string, ref: string, page: Page) => listLinks(deps, tenantId, ref, page),
    getLink: (tenantId: string, ref: string, linkId: string): Promise<TaskLinkRecord> =>
      getLink(deps, tenantId, ref, linkId),
    deleteLink: (tenantId: string, ref: string, linkId: string): Promise<TaskLinkRecord> =>
      deleteLink(deps, tenantId, ref, linkId),
  };
}

export type TaskLinkService = ReturnType<typeof createTaskLinkService>;
