// Apps (scope `apps`): create, list, get, delete, commit files, commit history, current files.
// Spec: Commit App Files and its bounds (message 1–500, 1–200 files, path ≤ 200, content or null);
// path rules beyond the spec's in docs/apps.md.
import { Type } from '@sinclair/typebox';
import { App } from '../../domain/apps/apps.js';
import { AppCommit } from '../../domain/apps/commits.js';
import { AppFile } from '../../domain/apps/files.js';
import { MAX_PATH_LENGTH } from '../../domain/apps/paths.js';
import { Deleted, ListOf, ListQuery } from '../../domain/shapes.js';
import { defineOperation } from '../registry.js';

const AppName = Type.String({
  minLength: 1,
  maxLength: 100,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
  description: 'Letters, digits, `.`, `_` and `-`, starting with a letter or digit.',
});

const AppParams = Type.Object({ name: AppName });

const CommitBody = Type.Object(
  {
    message: Type.String({ minLength: 1, maxLength: 500 }),
    files: Type.Array(
      Type.Object(
        {
          path: Type.String({ minLength: 1, maxLength: MAX_PATH_LENGTH }),
          content: Type.Union([Type.String(), Type.Null()], {
            description: 'New content, or null to delete the path.',
          }),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 200 },
    ),
  },
  { additionalProperties: false },
);

export const appOperations = [
  defineOperation({
    id: 'createApp',
    method: 'POST',
    path: '/api/v1/apps',
    scope: 'apps:write',
    tag: 'Apps',
    summary: 'Create an app',
    description: 'Creates an empty app to commit files to. The name is unique in the workspace. Returns the app.',
    body: Type.Object(
      { name: AppName, description: Type.Optional(Type.String({ maxLength: 2000 })) },
      { additionalProperties: false },
    ),
    response: App,
    status: 201,
    errors: ['conflict'],
    handler: ({ tenantId, body, services }) => services.apps.createApp(tenantId, body),
  }),
  defineOperation({
    id: 'listApps',
    method: 'GET',
    path: '/api/v1/apps',
    scope: 'apps:read',
    tag: 'Apps',
    summary: 'List apps',
    description: 'Lists the workspace apps, newest first, one page at a time.',
    query: ListQuery,
    response: ListOf(App),
    handler: ({ tenantId, query, services }) => services.apps.listApps(tenantId, query),
  }),
  defineOperation({
    id: 'getApp',
    method: 'GET',
    path: '/api/v1/apps/:name',
    scope: 'apps:read',
    tag: 'Apps',
    summary: 'Get an app',
    description: 'Returns one app by name, with its head commit and file count.',
    params: AppParams,
    response: App,
    handler: ({ tenantId, params, services }) => services.apps.getApp(tenantId, params.name),
  }),
  defineOperation({
    id: 'deleteApp',
    method: 'DELETE',
    path: '/api/v1/apps/:name',
    scope: 'apps:write',
    tag: 'Apps',
    summary: 'Delete an app',
    description: 'Deletes an app with its files and commit history. This cannot be undone.',
    params: AppParams,
    response: Deleted,
    destructive: true,
    handler: ({ tenantId, params, services }) => services.apps.deleteApp(tenantId, params.name),
  }),
  defineOperation({
    id: 'commitAppFiles',
    method: 'POST',
    writes: 'create',
    path: '/api/v1/apps/:name/commits',
    scope: 'apps:write',
    largeBody: true,
    tag: 'Apps',
    summary: 'Commit files to an app',
    description:
      'Applies 1 to 200 file changes to an app in one atomic commit: a string `content` adds or replaces the file ' +
      'at `path`, `null` deletes it. A path cannot be a file and hold files at once (`x.txt` and `x.txt/inner`). ' +
      'Paths are stored and compared in Unicode NFC; control, format (bidi, zero-width, BOM) and line separator ' +
      'characters are refused, and so is a segment that reads as `.` or `..` once folded by NFKC (`．．`). ' +
      'Returns the commit with each effective change (added, modified, deleted).',
    params: AppParams,
    body: CommitBody,
    response: AppCommit,
    errors: ['missing_required_parameter', 'invalid_parameters'],
    handler: ({ tenantId, params, body, services }) => services.apps.commit(tenantId, params.name, body),
  }),
  defineOperation({
    id: 'listAppCommits',
    method: 'GET',
    path: '/api/v1/apps/:name/commits',
    scope: 'apps:read',
    tag: 'Apps',
    summary: 'List commits of an app',
    description: 'Lists the commit history of an app, newest first.',
    params: AppParams,
    query: ListQuery,
    response: ListOf(AppCommit),
    handler: ({ tenantId, params, query, services }) => services.apps.listCommits(tenantId, params.name, query),
  }),
  defineOperation({
    id: 'listAppFiles',
    method: 'GET',
    path: '/api/v1/apps/:name/files',
    scope: 'apps:read',
    tag: 'Apps',
    summary: 'List the current files of an app',
    description: 'Lists the files of an app as of its latest commit, in path order, with their content.',
    params: AppParams,
    query: ListQuery,
    response: ListOf(AppFile),
    handler: ({ tenantId, params, query, services }) => services.apps.listFiles(tenantId, params.name, query),
  }),
];
