// The OpenAPI document's own metadata (src/http/docs.ts): what `info` says, the tags that group the
// operations with what each covers, and the scopes of the API-key scheme. Kept apart from the code
// that builds the document so the texts read in one place.
import { SCOPE_RESOURCES } from '../domain/accounts/scopes.js';

export const API_DESCRIPTION =
  'The public, multi-tenant HTTP API of the workspace of an AI support-agent platform. ' +
  'Authenticate with an API key in `X-API-Key`; keys carry `<resource>:read` / `<resource>:write` scopes ' +
  '(a write scope includes read access), and each operation names the scope it requires.\n\n' +
  'Errors answer `{"error": {type, code, message, param, doc_url}}`: the [error catalogue](/docs/errors) says ' +
  'when each `code` is answered and how to fix it, and `doc_url` links to its entry.';

/**
 * No licence is granted by this document's publisher beyond the deployment's own terms: an SPDX
 * custom reference (OpenAPI 3.1 takes an SPDX expression as `identifier`).
 */
export const API_LICENSE = { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' };

/** Who answers for this deployment: its operator, at PUBLIC_URL when it is set. */
export function apiContact(publicUrl: string | undefined) {
  return { name: "This deployment's operator", ...(publicUrl ? { url: publicUrl } : {}) };
}

/**
 * What each tag covers, in the order the reference lists them. A tag an operation uses that is
 * missing here is still declared (without a description), and test/http/openapi.test.ts fails on it.
 */
export const TAG_DESCRIPTIONS: Record<string, string> = {
  Apps: 'Apps and their files: commit files, list commits, read the current files.',
  Documents: 'Knowledge documents and their translations: create, search, read, delete one by one or in bulk.',
  Sources: 'Knowledge sources: websites crawled into documents on sync, or manual ones fed through the API.',
  'Smart sources': 'Sources that ingest rows into a custom data source, and purge the rows they ingested.',
  'Custom data sources':
    'Tables of your own records that the agent can look up: create a source, write, search and clear rows.',
  'Knowledge update requests':
    'Knowledge gaps: questions the agent could not answer from the knowledge, to review, apply or resolve.',
  Agents: 'The agents that answer conversations, their instructions and hand-offs.',
  Conversations:
    'Conversations and their messages: send a message (its answer streamed when asked), continue a paused turn, ' +
    'send client function results, rate answers.',
  Tasks: 'Tasks for people: create, comment, link to conversations, tickets, feedback, messages or requests.',
  Users: 'The staff users of the workspace, their permissions and notifications.',
  Workflows: 'Workflows the agent runs as server-side tools once enabled.',
  Coverage:
    'How well the knowledge answers real questions: extract questions from conversations, evaluate, read results.',
  Simulations: 'Datasets of test cases played against an agent, their runs and results.',
  Analytics: 'The dashboard report of the workspace over whole UTC days.',
  Webhooks:
    'Webhook endpoints that receive the events of the workspace (signed per Standard Webhooks), their ' +
    'deliveries and replays. The events themselves are listed under `webhooks`.',
  MCP: 'The Model Context Protocol endpoint (Streamable HTTP): every operation as a tool, with the same API key.',
  'Control plane': 'Operating the deployment (/admin/v1, with the operator token): tenants, their owners and API keys.',
};

/** The tags the document's operations use, each declared once with what it covers. */
export function documentTags(used: Iterable<string>): { name: string; description?: string }[] {
  const names = new Set(used);
  const known = Object.keys(TAG_DESCRIPTIONS).filter((name) => names.has(name));
  const unknown = [...names].filter((name) => TAG_DESCRIPTIONS[name] === undefined).sort();
  return [
    ...known.map((name) => ({ name, description: TAG_DESCRIPTIONS[name] as string })),
    ...unknown.map((name) => ({ name })),
  ];
}

/** The scope catalogue (src/domain/accounts/scopes.ts), as the API-key scheme lists it: scope → what it opens. */
export function scopeList(): Record<string, string> {
  return Object.fromEntries(
    SCOPE_RESOURCES.flatMap((resource) => [
      [`${resource}:read`, `Read ${resource}.`],
      [`${resource}:write`, `Create, change and delete ${resource}; includes ${resource}:read.`],
    ]),
  );
}
