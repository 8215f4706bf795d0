// Workflows (scope `workflows`): created disabled, toggled with PUT .../enabled (spec: States).
import { Type } from '@sinclair/typebox';
import { Workflow } from '../../domain/apps/workflows.js';
import { Deleted, ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const WorkflowParams = Type.Object({ workflow_id: Uuid });

export const workflowOperations = [
  defineOperation({
    id: 'createWorkflow',
    method: 'POST',
    path: '/api/v1/workflows',
    scope: 'workflows:write',
    tag: 'Workflows',
    summary: 'Create a workflow',
    description:
      'Creates a workflow the agent can run as a server-side tool once it is enabled. Workflows start disabled. ' +
      '`input_schema` is a JSON Schema for its arguments. Returns the workflow.',
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 100 }),
        description: Type.Optional(Type.String({ maxLength: 2000 })),
        trigger_phrases: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 50 })),
        input_schema: Type.Optional(Type.Object({}, { additionalProperties: true })),
      },
      { additionalProperties: false },
    ),
    response: Workflow,
    status: 201,
    errors: ['conflict'],
    handler: ({ tenantId, body, services }) => services.workflows.createWorkflow(tenantId, body),
  }),
  defineOperation({
    id: 'listWorkflows',
    method: 'GET',
    path: '/api/v1/workflows',
    scope: 'workflows:read',
    tag: 'Workflows',
    summary: 'List workflows',
    description: 'Lists workflows, newest first; `enabled` filters by state.',
    query: Type.Object(
      { ...ListQuery.properties, enabled: Type.Optional(Type.Boolean()) },
      { additionalProperties: false },
    ),
    response: ListOf(Workflow),
    handler: ({ tenantId, query, services }) => services.workflows.listWorkflows(tenantId, query),
  }),
  defineOperation({
    id: 'getWorkflow',
    method: 'GET',
    path: '/api/v1/workflows/:workflow_id',
    scope: 'workflows:read',
    tag: 'Workflows',
    summary: 'Get a workflow',
    description: 'Returns one workflow, including whether it is enabled.',
    params: WorkflowParams,
    response: Workflow,
    handler: ({ tenantId, params, services }) => services.workflows.getWorkflow(tenantId, params.workflow_id),
  }),
  defineOperation({
    id: 'setWorkflowEnabled',
    method: 'PUT',
    path: '/api/v1/workflows/:workflow_id/enabled',
    scope: 'workflows:write',
    tag: 'Workflows',
    summary: 'Enable or disable a workflow',
    description:
      'Sets whether the agent may run the workflow: `enabled` true or false. Setting the current value again ' +
      'changes nothing. Returns the workflow.',
    params: WorkflowParams,
    body: Type.Object({ enabled: Type.Boolean() }, { additionalProperties: false }),
    response: Workflow,
    idempotent: true,
    errors: ['missing_required_parameter'],
    handler: ({ tenantId, params, body, services }) =>
      services.workflows.setEnabled(tenantId, params.workflow_id, body.enabled),
  }),
  defineOperation({
    id: 'deleteWorkflow',
    method: 'DELETE',
    path: '/api/v1/workflows/:workflow_id',
    scope: 'workflows:write',
    tag: 'Workflows',
    summary: 'Delete a workflow',
    description: 'Deletes a workflow; the agent can no longer run it.',
    params: WorkflowParams,
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) => services.workflows.deleteWorkflow(tenantId, params.workflow_id),
  }),
];
