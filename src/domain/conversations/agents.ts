// Agents (DESIGN.md §7): a name, instructions, and the agents it may hand a conversation to.
// The tenant's default agent, which answers messages sent without `agent_id`, is its oldest
// agent; a tenant with none gets one named `Assistant` on its first message.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, InvalidParametersError, NotFoundError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { Nullable, Timestamp, Uuid } from '../shapes.js';

export const DEFAULT_AGENT_NAME = 'Assistant';

/** An agent as the API answers it: the operations' response schema, and the record's type. */
export const Agent = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('agent'),
    name: Type.String(),
    instructions: Nullable(Type.String()),
    handoff_agent_ids: Type.Array(Uuid, { description: 'Agents this agent may hand a conversation to.' }),
    is_default: Type.Boolean({
      description: 'Whether this agent answers messages sent without `agent_id` (the oldest agent).',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Agent' },
);

export type AgentRecord = Static<typeof Agent>;

export interface NewAgent {
  name: string;
  instructions?: string | undefined;
  handoff_agent_ids?: string[] | undefined;
}

export interface AgentRow {
  id: string;
  tenant_id: string;
  name: string;
  instructions: string | null;
  handoff_agent_ids: string[];
  created_at: Date;
  updated_at: Date;
}

const toRecord = (row: AgentRow, defaultId: string | undefined): AgentRecord => ({
  id: row.id,
  object: 'agent',
  name: row.name,
  instructions: row.instructions,
  handoff_agent_ids: row.handoff_agent_ids,
  is_default: row.id === defaultId,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

async function defaultAgentId(db: Db, tenantId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('agents')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .orderBy('id', 'asc')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

async function findAgent(db: Db, tenantId: string, agentId: string): Promise<AgentRow | undefined> {
  return db
    .selectFrom('agents')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', agentId)
    .executeTakeFirst();
}

/**
 * The agents a new agent may hand conversations to, each once; one that is not an agent of this
 * workspace is `invalid_parameters`, naming the first such item.
 */
async function handoffAgentIds(db: Db, tenantId: string, input: NewAgent): Promise<string[]> {
  // Ids arrive lower-cased by validation (the `Uuid` schema), as the database answers them.
  const sent = input.handoff_agent_ids ?? [];
  const handoffIds = [...new Set(sent)];
  if (handoffIds.length === 0) return handoffIds;
  const found = await db
    .selectFrom('agents')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', handoffIds)
    .execute();
  const known = new Set(found.map((r) => r.id));
  const missing = sent.findIndex((id) => !known.has(id));
  if (missing >= 0) {
    throw new InvalidParametersError(
      `handoff_agent_ids[${missing}]`,
      `No agent '${sent[missing]}' in this workspace to hand conversations to.`,
    );
  }
  return handoffIds;
}

async function createAgent(db: Db, tenantId: string, input: NewAgent): Promise<AgentRecord> {
  const handoffIds = await handoffAgentIds(db, tenantId, input);
  try {
    const row = await db
      .insertInto('agents')
      .values({
        id: newId(),
        tenant_id: tenantId,
        name: input.name,
        instructions: input.instructions ?? null,
        handoff_agent_ids: JSON.stringify(handoffIds),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toRecord(row, await defaultAgentId(db, tenantId));
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`An agent named '${input.name}' already exists.`, 'name');
    throw error;
  }
}

async function listAgents(db: Db, tenantId: string, page: Page) {
  let query = db.selectFrom('agents').selectAll().where('tenant_id', '=', tenantId);
  query = newestFirst(query, page);
  const rows = await query.execute();
  const defaultId = await defaultAgentId(db, tenantId);
  return toList(
    rows,
    page,
    (row) => toRecord(row, defaultId),
    (row) => row.id,
  );
}

async function getAgent(db: Db, tenantId: string, agentId: string): Promise<AgentRecord> {
  const row = await findAgent(db, tenantId, agentId);
  if (!row) throw new NotFoundError('agent', agentId);
  return toRecord(row, await defaultAgentId(db, tenantId));
}

/** The agent answering messages sent without `agent_id`: the oldest, created on demand. */
async function defaultAgent(db: Db, tenantId: string): Promise<AgentRow> {
  const id = await defaultAgentId(db, tenantId);
  if (id) return (await findAgent(db, tenantId, id)) as AgentRow;
  await db
    .insertInto('agents')
    .values({
      id: newId(),
      tenant_id: tenantId,
      name: DEFAULT_AGENT_NAME,
      instructions: null,
      handoff_agent_ids: '[]',
    })
    .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
    .execute();
  const created = await defaultAgentId(db, tenantId);
  return (await findAgent(db, tenantId, created as string)) as AgentRow;
}

/** The agents `agent` may hand a conversation to, as they exist now. */
async function handoffTargets(db: Db, tenantId: string, agent: AgentRow): Promise<{ id: string; name: string }[]> {
  if (agent.handoff_agent_ids.length === 0) return [];
  const rows = await db
    .selectFrom('agents')
    .select(['id', 'name'])
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', agent.handoff_agent_ids)
    .execute();
  return agent.handoff_agent_ids.flatMap((id) => rows.filter((r) => r.id === id));
}

export function createAgentService({ db }: { db: Db }) {
  return {
    findAgent: (tenantId: string, agentId: string) => findAgent(db, tenantId, agentId),
    createAgent: (tenantId: string, input: NewAgent) => createAgent(db, tenantId, input),
    listAgents: (tenantId: string, page: Page) => listAgents(db, tenantId, page),
    getAgent: (tenantId: string, agentId: string) => getAgent(db, tenantId, agentId),
    defaultAgent: (tenantId: string) => defaultAgent(db, tenantId),
    handoffTargets: (tenantId: string, agent: AgentRow) => handoffTargets(db, tenantId, agent),
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
