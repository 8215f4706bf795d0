// Tasks, comments and links (scope `tasks`; DESIGN.md §7, tasks; spec: task comment, task link,
// behaviour rules 3 and 4). `{task_id}` is a task UUID or `TASK-<n>` on every route (spec:
// Endpoints); anything else names no task and answers 404.
import { Type } from '@sinclair/typebox';
import { ListOf, ListQuery, Uuid } from '../../domain/shapes.js';
import { TaskComment } from '../../domain/tasks/comment-records.js';
import { TargetType, TaskLink } from '../../domain/tasks/links.js';
import { Task } from '../../domain/tasks/tasks.js';
import { defineOperation, withStatus } from '../registry.js';

const UUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
const TaskRef = Type.String({
  pattern: `^(?:${UUID}|TASK-[1-9][0-9]{0,8})$`,
  description: 'The task UUID or its identifier `TASK-<n>`.',
});
const TaskParams = Type.Object({ task_id: TaskRef });

export const taskOperations = [
  defineOperation({
    id: 'createTask',
    method: 'POST',
    path: '/api/v1/tasks',
    scope: 'tasks:write',
    tag: 'Tasks',
    summary: 'Create a task',
    description:
      'Creates a task. It gets the next identifier `TASK-<n>` of the workspace (1, 2, 3…, never skipped or ' +
      'repeated); either that identifier or its UUID addresses it afterwards. `assignee_id` names a staff user.',
    body: Type.Object(
      {
        title: Type.String({ minLength: 1, maxLength: 500 }),
        description: Type.Optional(Type.String({ maxLength: 20_000 })),
        assignee_id: Type.Optional(Uuid),
      },
      { additionalProperties: false },
    ),
    response: Task,
    status: 201,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    handler: ({ tenantId, body, services }) => services.tasks.createTask(tenantId, body),
  }),
  defineOperation({
    id: 'listTasks',
    method: 'GET',
    path: '/api/v1/tasks',
    scope: 'tasks:read',
    tag: 'Tasks',
    summary: 'List tasks',
    description: 'Lists the tasks of the workspace, newest first.',
    query: ListQuery,
    response: ListOf(Task),
    handler: ({ tenantId, query, services }) => services.tasks.listTasks(tenantId, query),
  }),
  defineOperation({
    id: 'getTask',
    method: 'GET',
    path: '/api/v1/tasks/:task_id',
    scope: 'tasks:read',
    tag: 'Tasks',
    summary: 'Get a task',
    description: 'Returns one task by UUID or by identifier (`TASK-12`).',
    params: TaskParams,
    response: Task,
    handler: ({ tenantId, params, services }) => services.tasks.getTask(tenantId, params.task_id),
  }),
  defineOperation({
    id: 'addTaskComment',
    method: 'POST',
    path: '/api/v1/tasks/:task_id/comments',
    scope: 'tasks:write',
    tag: 'Tasks',
    summary: 'Comment on a task',
    description:
      'Adds a comment to a task and notifies each staff user named in `mention_ids` (see ' +
      '`GET /users/{user_id}/notifications`). The author is the staff user named by `author_id`, or else the ' +
      'calling API key (its id and name, email null). Returns the comment.',
    params: TaskParams,
    body: Type.Object(
      {
        content: Type.String({ minLength: 1, maxLength: 20_000 }),
        mention_ids: Type.Optional(
          Type.Array(Uuid, { maxItems: 50, description: 'Staff users to mention and notify.' }),
        ),
        author_id: Type.Optional(Uuid),
      },
      { additionalProperties: false },
    ),
    response: TaskComment,
    status: 201,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    handler: ({ tenantId, params, body, auth, services }) =>
      services.tasks.addComment(tenantId, params.task_id, body, { keyId: auth.keyId, keyName: auth.keyName }),
  }),
  defineOperation({
    id: 'listTaskComments',
    method: 'GET',
    path: '/api/v1/tasks/:task_id/comments',
    scope: 'tasks:read',
    tag: 'Tasks',
    summary: 'List the comments of a task',
    description: 'Lists the comments of a task with their authors and mentions, newest first.',
    params: TaskParams,
    query: ListQuery,
    response: ListOf(TaskComment),
    handler: ({ tenantId, params, query, services }) => services.tasks.listComments(tenantId, params.task_id, query),
  }),
  defineOperation({
    id: 'linkTask',
    method: 'POST',
    path: '/api/v1/tasks/:task_id/links',
    scope: 'tasks:write',
    tag: 'Tasks',
    summary: 'Link a task to a conversation, ticket, feedback, message or knowledge update request',
    description:
      'Links the task to a target of this workspace. The first link answers 201; linking the same target again ' +
      'is a no-op answering 200 with the existing link (a deleted link is revived). `context` gives the ' +
      "target's conversation and message; `admin_url` opens the target in the admin console.",
    params: TaskParams,
    body: Type.Object({ target_type: TargetType, target_id: Uuid }, { additionalProperties: false }),
    response: TaskLink,
    status: 201,
    alsoStatus: [200],
    idempotent: true,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    handler: async ({ tenantId, params, body, services }) => {
      const { created, link } = await services.taskLinks.linkTask(tenantId, params.task_id, body);
      return withStatus(created ? 201 : 200, link);
    },
  }),
  defineOperation({
    id: 'listTaskLinks',
    method: 'GET',
    path: '/api/v1/tasks/:task_id/links',
    scope: 'tasks:read',
    tag: 'Tasks',
    summary: 'List the links of a task',
    description: 'Lists the links of a task, deleted ones included (`deleted: true`), newest first.',
    params: TaskParams,
    query: ListQuery,
    response: ListOf(TaskLink),
    handler: ({ tenantId, params, query, services }) => services.taskLinks.listLinks(tenantId, params.task_id, query),
  }),
  defineOperation({
    id: 'getTaskLink',
    method: 'GET',
    path: '/api/v1/tasks/:task_id/links/:link_id',
    scope: 'tasks:read',
    tag: 'Tasks',
    summary: 'Get a link of a task',
    description: 'Returns one link of a task, deleted or not.',
    params: Type.Object({ task_id: TaskRef, link_id: Uuid }),
    response: TaskLink,
    handler: ({ tenantId, params, services }) => services.taskLinks.getLink(tenantId, params.task_id, params.link_id),
  }),
  defineOperation({
    id: 'deleteTaskLink',
    method: 'DELETE',
    path: '/api/v1/tasks/:task_id/links/:link_id',
    scope: 'tasks:write',
    tag: 'Tasks',
    summary: 'Delete a link of a task',
    description:
      'Marks a link deleted and returns it with `deleted: true`. It stays readable; linking the same target ' +
      'again revives it. Deleting a deleted link changes nothing.',
    params: Type.Object({ task_id: TaskRef, link_id: Uuid }),
    response: TaskLink,
    destructive: true,
    idempotent: true,
    handler: ({ tenantId, params, services }) =>
      services.taskLinks.deleteLink(tenantId, params.task_id, params.link_id),
  }),
];
