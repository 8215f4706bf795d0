// Agents (scope `agents`): create, list, get (DESIGN.md §7).
import { Type } from '@sinclair/typebox';
import { Agent } from '../../domain/conversations/agents.js';
import { ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

export const agentOperations = [
  defineOperation({
    id: 'createAgent',
    method: 'POST',
    path: '/api/v1/agents',
    scope: 'agents:write',
    tag: 'Agents',
    summary: 'Create an agent',
    description:
      'Creates an agent: a name (unique in the workspace), instructions for the language model, and the agents ' +
      'it may hand a conversation to (`handoff_agent_ids`, agents of this workspace). The oldest agent is the ' +
      'default one, answering messages sent without `agent_id`. Returns the agent.',
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 100 }),
        instructions: Type.Optional(Type.String({ maxLength: 20_000 })),
        handoff_agent_ids: Type.Optional(Type.Array(Uuid, { maxItems: 20 })),
      },
      { additionalProperties: false },
    ),
    response: Agent,
    status: 201,
    errors: ['missing_required_parameter', 'invalid_parameters', 'conflict'],
    handler: ({ tenantId, body, services }) => services.agents.createAgent(tenantId, body),
  }),
  defineOperation({
    id: 'listAgents',
    method: 'GET',
    path: '/api/v1/agents',
    scope: 'agents:read',
    tag: 'Agents',
    summary: 'List agents',
    description: 'Lists the agents of the workspace, newest first.',
    query: ListQuery,
    response: ListOf(Agent),
    handler: ({ tenantId, query, services }) => services.agents.listAgents(tenantId, query),
  }),
  defineOperation({
    id: 'getAgent',
    method: 'GET',
    path: '/api/v1/agents/:agent_id',
    scope: 'agents:read',
    tag: 'Agents',
    summary: 'Get an agent',
    description: 'Returns one agent with its instructions and handoff agents.',
    params: Type.Object({ agent_id: Uuid }),
    response: Agent,
    handler: ({ tenantId, params, services }) => services.agents.getAgent(tenantId, params.agent_id),
  }),
];
