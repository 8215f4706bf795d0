// Workflows: server-side actions the agent may call. Created disabled; only an enabled workflow
// is ever offered to the agent (spec: States, workflow enabled flag).
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { argumentsSchemaProblem } from '../../lib/json-schema.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

/** A workflow as the API answers it: the operations' response schema, and the record's type. */
export const Workflow = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('workflow'),
    name: Type.String(),
    description: Nullable(Type.String()),
    trigger_phrases: Type.Array(Type.String()),
    input_schema: Nullable(Type.Object({}, { additionalProperties: true })),
    enabled: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Workflow' },
);

export type WorkflowRecord = Static<typeof Workflow>;

export interface NewWorkflow {
  name: string;
  description?: string | undefined;
  trigger_phrases?: string[] | undefined;
  input_schema?: Record<string, unknown> | undefined;
}

const toRecord = (row: {
  id: string;
  name: string;
  description: string | null;
  trigger_phrases: string[];
  input_schema: Record<string, unknown> | null;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}): WorkflowRecord => ({
  id: row.id,
  object: 'workflow',
  name: row.name,
  description: row.description,
  trigger_phrases: row.trigger_phrases,
  input_schema: row.input_schema,
  enabled: row.enabled,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export function createWorkflowService({ db }: { db: Db }) {
  return {
    async createWorkflow(tenantId: string, input: NewWorkflow): Promise<WorkflowRecord> {
      const problem =
        input.input_schema === undefined ? undefined : argumentsSchemaProblem(input.input_schema, 'input_schema');
      if (problem !== undefined) throw new ValidationError('input_schema', problem);
      try {
        const row = await db
          .insertInto('workflows')
          .values({
            id: newId(),
            tenant_id: tenantId,
            name: input.name,
            description: input.description ?? null,
            trigger_phrases: JSON.stringify(input.trigger_phrases ?? []),
            input_schema: JSON.stringify(input.input_schema ?? null),
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        return toRecord(row);
      } catch (error) {
        if (isUniqueViolation(error))
          throw new ConflictError(`A workflow named '${input.name}' already exists.`, 'name');
        throw error;
      }
    },

    async listWorkflows(tenantId: string, page: Page & { enabled?: boolean | undefined }) {
      let query = db.selectFrom('workflows').selectAll().where('tenant_id', '=', tenantId);
      if (page.enabled !== undefined) query = query.where('enabled', '=', page.enabled);
      query = newestFirst(query, page);
      return toList(await query.execute(), page, toRecord, (row) => row.id);
    },

    async getWorkflow(tenantId: string, workflowId: string): Promise<WorkflowRecord> {
      const row = await db
        .selectFrom('workflows')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('id', '=', workflowId)
        .executeTakeFirst();
      if (!row) throw new NotFoundError('workflow', workflowId);
      return toRecord(row);
    },

    async setEnabled(tenantId: string, workflowId: string, enabled: boolean): Promise<WorkflowRecord> {
      // Sending the current value changes nothing, `updated_at` included.
      const row = await db
        .updateTable('workflows')
        .set({
          enabled,
          updated_at: sql<Date>`case when enabled = ${enabled} then updated_at else ${new Date()} end`,
        })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', workflowId)
        .returningAll()
        .executeTakeFirst();
      if (!row) throw new NotFoundError('workflow', workflowId);
      return toRecord(row);
    },

    async deleteWorkflow(tenantId: string, workflowId: string) {
      const row = await db
        .deleteFrom('workflows')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', workflowId)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('workflow', workflowId);
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },
  };
}

export type WorkflowService = ReturnType<typeof createWorkflowService>;
