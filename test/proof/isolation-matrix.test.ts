// Tenant isolation over the whole API (DESIGN.md §3: "A request can never read or change
// another tenant's data, whatever ids it sends: that answers 404 not_found"), derived from the
// OpenAPI document rather than listed by hand, so that a new operation is covered the day it
// appears: tenant A holds one of every resource a path parameter can name (test/support/seed.ts);
// tenant B's key, holding every scope, sends every id-bearing operation with A's values and gets
// 404 on each, over REST and over MCP; A's records read the same afterwards; no list of B's shows
// A's rows. Tenant B is seeded as well, so its lists are not trivially empty and the bodies it
// sends can name its own resources: the path id is the only thing in the request that is not B's.
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolName } from '../../src/operations/registry.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';
import { documentOperations } from '../support/openapi-document.js';
import { paramValue, type Seeded, seedTenants } from '../support/seed.js';

// biome-ignore lint/suspicious/noExplicitAny: the document and JSON Schema fragments are read loosely.
type Json = any;
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface DocOperation {
  id: string;
  method: Method;
  path: string;
  /** The names of the path's `{…}` parameters, in order. */
  params: string[];
  requestSchema: Json | undefined;
  /** The JSON schema of the 200 answer; undefined for one that is not JSON (the MCP SSE stream). */
  responseSchema: Json | undefined;
}

let t: TestApp;
let doc: Json;
let a: { key: string; seeded: Seeded };
let b: { key: string; seeded: Seeded };

beforeAll(async () => {
  t = await startTestApp();
  const [tenantA, tenantB] = [await t.tenant(), await t.tenant()];
  const [seededA, seededB] = await seedTenants(t, [
    { key: tenantA.key, label: 'alpha' },
    { key: tenantB.key, label: 'bravo' },
  ]);
  a = { key: tenantA.key, seeded: seededA as Seeded };
  b = { key: tenantB.key, seeded: seededB as Seeded };
  doc = (await t.call({ url: '/api/v1/openapi.json' })).body;
});
afterAll(() => t.close());

/** Every operation of the document under /api/v1. */
function operations(): DocOperation[] {
  return documentOperations(doc)
    .filter((op) => op.path.startsWith('/api/v1/'))
    .map(({ method, path, spec }) => ({
      id: spec.operationId,
      method: method as Method,
      path,
      params: [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] as string),
      requestSchema: spec.requestBody?.content?.['application/json']?.schema,
      responseSchema: spec.responses?.['200']?.content?.['application/json']?.schema,
    }));
}

const idBearing = () => operations().filter((op) => op.params.length > 0);

/** A list answer: `{object: "list", data: [...]}` (DESIGN.md §5). */
const isList = (op: DocOperation) =>
  op.method === 'GET' && op.params.length === 0 && op.responseSchema?.properties?.object?.enum?.[0] === 'list';

/** The operation's path with a tenant's values in it; undefined when one has none. */
function urlFor(op: DocOperation, seeded: Seeded): string | undefined {
  let url = op.path;
  for (const name of op.params) {
    const value = paramValue(seeded, op.path, name);
    if (value === undefined) return undefined;
    url = url.replace(`{${name}}`, encodeURIComponent(value));
  }
  return url;
}

/**
 * What a body field that refers to a resource names, by field name: the value in a tenant's seed. A
 * field the document gives `format: uuid` (or a list of them) is a reference; `data_source` takes
 * an id or a slug.
 */
const BODY_REFERENCES: Record<string, (s: Seeded) => string> = {
  agent_id: (s) => s.params.agent_id as string,
  assignee_id: (s) => s.params.user_id as string,
  author_id: (s) => s.params.user_id as string,
  conversation_id: (s) => s.params.conversation_id as string,
  data_source: (s) => s.params.id_or_slug as string,
  default_persona_id: (s) => s.refs.personaId,
  document_id: (s) => s.params.document_id as string,
  document_ids: (s) => s.params.document_id as string,
  expected_agent_id: (s) => s.params.agent_id as string,
  handoff_agent_ids: (s) => s.params.agent_id as string,
  mention_ids: (s) => s.params.user_id as string,
  persona_id: (s) => s.refs.personaId,
  referential_id: (s) => s.params.referential_id as string,
  source_id: (s) => s.params.source_id as string,
  target_id: (s) => s.params.conversation_id as string,
};
const NON_UUID_REFERENCES = new Set(['data_source']);

/**
 * Bodies that the smallest valid one (the required fields, below) would not make plausible: fields
 * whose value must be one the tenant holds, a pattern to match, or a change whose absence afterwards
 * shows that nothing was written. `s` is the sender's seed: the body names the sender's own things.
 */
const BODIES: Record<string, (s: Seeded) => Json> = {
  addDocumentTranslation: () => ({ language: 'de', title: 'Öffnungszeiten', content: 'Neun bis fünf.' }),
  addTaskComment: (s) => ({ content: 'a comment', mention_ids: [s.params.user_id] }),
  addUserPermissions: (s) => ({ permissions: [s.refs.permission] }),
  applyKnowledgeUpdateRequest: () => ({ proposed_answer: 'Not yet.' }),
  createSimulationRun: (s) => ({ agent_id: s.params.agent_id }),
  createSimulationTestCase: (s) => ({
    question: 'Open on Sunday?',
    expected_type: 'no_answer',
    persona_id: s.refs.personaId,
  }),
  importSimulationConversation: (s) => ({ persona_id: s.refs.personaId }),
  renameReferentialDomain: (s) => ({ old_domain: s.refs.domain, new_domain: `${s.refs.domain}-renamed` }),
  reviewKnowledgeUpdateRequest: () => ({ decision: 'approve', proposed_answer: 'Not yet.' }),
  setWorkflowEnabled: () => ({ enabled: true }),
  submitFunctionResults: (s) => ({ results: [{ call_id: s.refs.callId, output: { status: 'shipped' } }] }),
  updateSource: () => ({ name: 'renamed by someone' }),
  updateWebhookEndpoint: () => ({ description: 'changed by someone' }),
};

/**
 * The smallest value a schema accepts: required properties only, one item per array; a field that
 * refers to a resource (BODY_REFERENCES) names the sender's own.
 */
function minimal(schema: Json, sender: Seeded, field?: string): Json {
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  const options = schema.anyOf ?? schema.oneOf;
  if (options) return minimal(options.find((o: Json) => o.type !== 'null') ?? options[0], sender, field);
  switch (schema.type) {
    case 'object':
      return Object.fromEntries(
        (schema.required ?? []).map((k: string) => [k, minimal(schema.properties[k], sender, k)]),
      );
    case 'array':
      return [minimal(schema.items ?? {}, sender, field)];
    case 'string':
      if (field && (schema.format === 'uuid' || NON_UUID_REFERENCES.has(field)) && BODY_REFERENCES[field]) {
        return BODY_REFERENCES[field](sender);
      }
      if (schema.format === 'email') return 'someone@example.com';
      return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    default:
      return {};
  }
}

const ajv = new Ajv({ strict: false, allErrors: false });
addFormats.default(ajv);
const validators = new Map<string, ValidateFunction>();

/**
 * The body `sender` sends to `op`, checked against the document's request schema first: a body
 * refused at validation (400/422) would be refused before any lookup, and prove nothing.
 */
function bodyFor(op: DocOperation, sender: Seeded): Json {
  if (!op.requestSchema) return undefined;
  const body = BODIES[op.id]?.(sender) ?? minimal(op.requestSchema, sender);
  let validate = validators.get(op.id);
  if (!validate) {
    validate = ajv.compile(op.requestSchema);
    validators.set(op.id, validate);
  }
  if (!validate(body)) {
    throw new Error(`${op.id}: the body ${JSON.stringify(body)} is invalid: ${ajv.errorsText(validate.errors)}`);
  }
  return body;
}

/** A's ids and names that `text` shows, leaving out those the request itself sent. */
const leaked = (text: string, sent: string) => a.seeded.values.filter((v) => text.includes(v) && !sent.includes(v));

const describeOp = (op: DocOperation) => `${op.method} ${op.path} (${op.id})`;

/** A's answers to every GET of the document (JSON ones), to compare before and after B's requests. */
async function readEverything() {
  const answers = new Map<string, string>();
  for (const op of operations()) {
    if (op.method !== 'GET' || !op.responseSchema) continue;
    const url = urlFor(op, a.seeded);
    if (!url) continue;
    const r = await t.call({ url: isList(op) ? `${url}?limit=100` : url, key: a.key });
    answers.set(describeOp(op), `${r.status} ${r.text}`);
  }
  return answers;
}

/** Fields a reference needs beside it to make a valid body. */
const COMPANIONS: Record<string, Json> = {
  'bulkDeleteDocuments.source_id': { page_ids: ['page-1'] },
  'createSimulationTestCase.expected_agent_id': { expected_type: 'handoff' },
};

/**
 * Reference cases whose operation, by its contract, answers an id that names nothing in the tenant
 * like any other: there the answer to A's id must be exactly the answer to an id nobody holds.
 * POST /documents/bulk-delete: "Ids and pages that name no document are not counted; `deleted_count`
 * says how many were deleted" (its description; DESIGN.md §7 `POST /documents/bulk-delete`*).
 */
const ANSWERED_AS_UNKNOWN = new Set(['bulkDeleteDocuments.document_ids']);
const NOBODY_S_ID = '0190a0a0-0000-7000-8000-000000000000';

/** What the sender does to its own records first, so that the case reaches the reference's lookup. */
const PREPARE: Record<string, (s: Seeded) => { method: 'POST'; url: string; body: Json }> = {
  // Only an approved request can be applied (409 otherwise, before `document_id` is looked at).
  'applyKnowledgeUpdateRequest.document_id': (s) => ({
    method: 'POST',
    url: `/api/v1/knowledge-update-requests/${s.params.knowledge_update_request_id}/review`,
    body: { decision: 'approve', proposed_answer: 'Not yet.' },
  }),
};

/** Every (operation, body field that refers to a resource) pair, with the body B sends: its own, but that field A's. */
function bodyReferences() {
  const cases: { op: DocOperation; field: string; body: Json; unknown: Json; asUnknown: boolean }[] = [];
  const unmapped: string[] = [];
  for (const op of operations()) {
    const properties = op.requestSchema?.properties ?? {};
    for (const [field, schema] of Object.entries<Json>(properties)) {
      const isList = schema.type === 'array';
      const uuid = (isList ? schema.items : schema)?.format === 'uuid';
      if (!uuid && !NON_UUID_REFERENCES.has(field)) continue;
      const value = BODY_REFERENCES[field]?.(a.seeded);
      if (value === undefined) {
        unmapped.push(`${describeOp(op)}: ${field}`);
        continue;
      }
      const base = { ...bodyFor(op, b.seeded), ...COMPANIONS[`${op.id}.${field}`] };
      const body = { ...base, [field]: isList ? [value] : value };
      const unknown = { ...base, [field]: isList ? [NOBODY_S_ID] : NOBODY_S_ID };
      cases.push({ op, field, body, unknown, asUnknown: ANSWERED_AS_UNKNOWN.has(`${op.id}.${field}`) });
    }
  }
  // A new reference field lands here: say in BODY_REFERENCES which seeded resource it names.
  if (unmapped.length > 0)
    throw new Error(`body fields naming a resource the table does not know:\n${unmapped.join('\n')}`);
  return cases;
}

/**
 * Why an answer to a request naming A's resource in its body is not a refusal, or undefined when
 * it is: 404 `not_found`, or 422 `invalid_parameters` naming the field (DESIGN.md §4: "a body UUID
 * naming nothing in this tenant"), and nothing of A's shown but what was sent.
 */
function refusedReference(status: number | undefined, error: Json, field: string, text: string, sent: string) {
  const notFound = error?.code === 'not_found' && (status === undefined || status === 404);
  const invalid =
    error?.code === 'invalid_parameters' &&
    (status === undefined || status === 422) &&
    (error.param === field || String(error.param).startsWith(`${field}[`));
  if (!notFound && !invalid) return `${status ?? 'tool'} ${text.slice(0, 300)}`;
  const shown = leaked(text, sent);
  return shown.length > 0 ? `the answer shows ${shown.join(', ')}` : undefined;
}

interface ToolInfo {
  name: string;
  inputSchema: { properties?: Record<string, unknown> };
  annotations?: { destructiveHint?: boolean };
}

/** A JSON-RPC request to POST /api/v1/mcp, as an MCP client sends it (test/mcp/mcp.test.ts). */
async function rpc(key: string, method: string, params: Json) {
  const r = await t.call({
    method: 'POST',
    url: '/api/v1/mcp',
    key,
    headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: { jsonrpc: '2.0', id: 1, method, params },
  });
  if (r.status !== 200 || !r.body?.result) throw new Error(`mcp ${method}: ${r.status} ${r.text}`);
  return r.body.result;
}

async function listTools(key: string): Promise<ToolInfo[]> {
  const tools: ToolInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await rpc(key, 'tools/list', cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

const callTool = (key: string, name: string, args: Json) => rpc(key, 'tools/call', { name, arguments: args });

/**
 * A tool's arguments: the path parameters with `pathValues`' values, and the body, spread or, when
 * one of its fields is named like a path parameter, as the one argument `body` (src/mcp/tools.ts).
 */
function toolArguments(tool: ToolInfo, op: DocOperation, pathValues: Seeded, body: Json) {
  const args: Record<string, unknown> = {};
  for (const name of op.params) args[name] = paramValue(pathValues, op.path, name);
  if (body === undefined) return args;
  const nested = tool.inputSchema.properties?.body !== undefined && op.requestSchema?.properties?.body === undefined;
  return nested ? { ...args, body } : { ...args, ...body };
}

/** Why a tool result is not a not_found tool error showing nothing of A's, or undefined when it is. */
function toolNotFound(result: Json, sent: string) {
  if (!result.isError) return `answered ${JSON.stringify(result.structuredContent).slice(0, 200)}`;
  if (result.structuredContent !== undefined) return 'an error with structured content';
  const text = result.content?.[0]?.text ?? '';
  if (JSON.parse(text).error?.code !== 'not_found') return text.slice(0, 300);
  const shown = leaked(text, sent);
  return shown.length > 0 ? `the answer shows ${shown.join(', ')}` : undefined;
}

let before: Map<string, string>;

describe('tenant isolation, operation by operation', () => {
  // What A's GETs answer before any request of B's, for the comparison at the end.
  beforeAll(async () => {
    before = await readEverything();
  });

  it('every id-bearing operation of the document has a seeded value for each of its path parameters', () => {
    const ops = idBearing();
    expect(ops.length).toBeGreaterThan(60);
    const missing = ops
      .filter((op) => urlFor(op, a.seeded) === undefined)
      .map((op) => `${describeOp(op)}: ${op.params.filter((p) => !paramValue(a.seeded, op.path, p)).join(', ')}`);
    // A new operation whose parameter names a kind of resource the seed does not make lands here:
    // make one in test/support/seed.ts.
    expect(missing, `path parameters without a seeded value:\n${missing.join('\n')}`).toEqual([]);
  });

  it("tenant A's own key reads every id-bearing GET with its values (200), so the values are real", async () => {
    const failures: string[] = [];
    for (const op of idBearing()) {
      if (op.method !== 'GET') continue;
      const answer = before.get(describeOp(op)) ?? '';
      if (!answer.startsWith('200 ')) failures.push(`${describeOp(op)}: ${answer.slice(0, 200)}`);
    }
    expect(failures).toEqual([]);
  });

  it("tenant B's key on tenant A's ids answers 404 not_found on every id-bearing operation, revealing nothing", async () => {
    const failures: string[] = [];
    for (const op of idBearing()) {
      const url = urlFor(op, a.seeded);
      if (!url) {
        failures.push(`${describeOp(op)} → not sent: a path parameter has no seeded value`);
        continue;
      }
      const body = bodyFor(op, b.seeded);
      const r = await t.call({ method: op.method, url, key: b.key, ...(body !== undefined ? { body } : {}) });
      try {
        expectError(r, 404, 'not_found');
        const shown = leaked(r.text, url);
        if (shown.length > 0) throw new Error(`the answer shows ${shown.join(', ')}`);
      } catch (error) {
        failures.push(`${describeOp(op)} → ${(error as Error).message}`);
      }
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it("tenant B's key with tenant A's ids in a request body is refused: 404, or 422 invalid_parameters naming the field", async () => {
    const cases = bodyReferences();
    expect(cases.length).toBeGreaterThan(10);
    const failures: string[] = [];
    for (const { op, field, body, unknown, asUnknown } of cases) {
      const prepare = PREPARE[`${op.id}.${field}`];
      if (prepare) await t.call({ ...prepare(b.seeded), key: b.key });
      // The path names B's own resources: the body field is the one foreign thing in the request.
      const url = urlFor(op, b.seeded);
      if (!url) {
        failures.push(`${describeOp(op)} ${field} → not sent: a path parameter has no seeded value`);
        continue;
      }
      const r = await t.call({ method: op.method, url, key: b.key, body });
      if (asUnknown) {
        const nobody = await t.call({ method: op.method, url, key: b.key, body: unknown });
        if (r.status !== nobody.status || r.text !== nobody.text) {
          failures.push(`${describeOp(op)} ${field} → ${r.status} ${r.text}, not as for nobody's id: ${nobody.text}`);
        }
        continue;
      }
      const problem = refusedReference(r.status, r.body?.error, field, r.text, JSON.stringify(body));
      if (problem) failures.push(`${describeOp(op)} ${field} → ${problem}`);
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });
});

describe('tenant isolation over MCP', () => {
  it("tenant B's key calling every tool with an id or slug argument, with A's values, gets a not_found tool error", async () => {
    const tools = await listTools(b.key);
    const byTool = new Map(operations().map((op) => [toolName(op.id), op]));
    const failures: string[] = [];
    let called = 0;
    for (const tool of tools) {
      const op = byTool.get(tool.name);
      // Every tool is an operation of the document (DESIGN.md §6): one that is not could take ids unseen.
      if (!op) {
        failures.push(`${tool.name}: no operation of the document has this tool's name`);
        continue;
      }
      if (op.params.length === 0) continue;
      const absent = op.params.filter((p) => tool.inputSchema.properties?.[p] === undefined);
      if (absent.length > 0) failures.push(`${tool.name}: no argument for the path's ${absent.join(', ')}`);
      if (!urlFor(op, a.seeded)) {
        failures.push(`${tool.name} → not called: a path parameter has no seeded value`);
        continue;
      }
      const args = toolArguments(tool, op, a.seeded, bodyFor(op, b.seeded));
      const result = await callTool(b.key, tool.name, args);
      called++;
      const problem = toolNotFound(result, JSON.stringify(args));
      if (problem) failures.push(`${tool.name} → ${problem}`);
    }
    expect(failures, failures.join('\n')).toEqual([]);
    // The tools with an id argument are exactly the id-bearing operations, all of them called.
    expect(called).toBe(idBearing().length);
  });

  it("a tool given tenant A's ids in its body arguments is refused: not_found, or invalid_parameters naming the field", async () => {
    const tools = new Map((await listTools(b.key)).map((tool) => [tool.name, tool]));
    const failures: string[] = [];
    for (const { op, field, body, unknown, asUnknown } of bodyReferences()) {
      const tool = tools.get(toolName(op.id));
      if (!tool) {
        failures.push(`${describeOp(op)}: no tool ${toolName(op.id)}`);
        continue;
      }
      const prepare = PREPARE[`${op.id}.${field}`];
      if (prepare) await t.call({ ...prepare(b.seeded), key: b.key });
      const args = toolArguments(tool, op, b.seeded, body);
      const result = await callTool(b.key, tool.name, args);
      if (asUnknown) {
        const nobody = await callTool(b.key, tool.name, toolArguments(tool, op, b.seeded, unknown));
        if (JSON.stringify(result) !== JSON.stringify(nobody)) {
          failures.push(`${tool.name} ${field} → ${JSON.stringify(result)}, not as for nobody's id`);
        }
        continue;
      }
      const error = result.isError ? JSON.parse(result.content[0].text).error : undefined;
      const problem = result.isError
        ? refusedReference(undefined, error, field, result.content[0].text, JSON.stringify(args))
        : `answered ${JSON.stringify(result.structuredContent).slice(0, 200)}`;
      if (problem) failures.push(`${tool.name} ${field} → ${problem}`);
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });
});

describe("tenant A's records afterwards", () => {
  it("after B's requests, every GET of tenant A answers exactly as before: nothing deleted, changed or added", async () => {
    const after = await readEverything();
    const changed = [...before.keys()].filter((k) => after.get(k) !== before.get(k));
    for (const k of changed) {
      console.log(`${k}\n  before: ${before.get(k)?.slice(0, 400)}\n  after:  ${after.get(k)?.slice(0, 400)}`);
    }
    expect(changed).toEqual([]);
    // The reads cover what B's writes aimed at: the deleted still there, the changed still A's.
    const read = async (url: string) => (await t.call({ url, key: a.key })).body;
    const p = a.seeded.params;
    expect((await read(`/api/v1/workflows/${p.workflow_id}`)).enabled).toBe(false);
    expect((await read(`/api/v1/sources/${p.source_id}`)).name).toBe('source-alpha');
    expect((await read(`/api/v1/webhook-endpoints/${p.endpoint_id}`)).description).toBe('hook-alpha');
    expect((await read(`/api/v1/users/${p.user_id}`)).permissions).toHaveLength(1);
    expect((await read(`/api/v1/custom-data-sources/${p.id_or_slug}/rows`)).data).toHaveLength(2);
    const domains = (await read(`/api/v1/coverage/referentials/${p.referential_id}/questions`)).domains;
    expect(domains).toContainEqual({ domain: a.seeded.refs.domain, question_count: 1 });
  });
});

describe('tenant isolation in lists and other reads without an id', () => {
  it("every list of tenant B shows B's own rows and none of A's; A's shows its own", async () => {
    const lists = operations().filter(isList);
    expect(lists.length).toBeGreaterThan(10);
    const failures: string[] = [];
    for (const op of lists) {
      const mine = await t.call({ url: `${op.path}?limit=100`, key: a.key });
      const theirs = await t.call({ url: `${op.path}?limit=100`, key: b.key });
      const myIds = (mine.body?.data ?? []).map((row: { id: string }) => row.id);
      const theirIds = (theirs.body?.data ?? []).map((row: { id: string }) => row.id);
      // Not vacuous: the seed made a row for every list, for each tenant.
      if (mine.status !== 200 || myIds.length === 0) {
        failures.push(`${describeOp(op)}: A sees ${mine.text.slice(0, 200)}`);
      }
      if (theirs.status !== 200 || theirIds.length === 0) {
        failures.push(`${describeOp(op)}: B sees ${theirs.text.slice(0, 200)}`);
      }
      const shared = theirIds.filter((id: string) => myIds.includes(id));
      if (shared.length > 0) failures.push(`${describeOp(op)}: B's list shows A's ${shared.join(', ')}`);
      const shown = leaked(theirs.text, '');
      if (shown.length > 0) failures.push(`${describeOp(op)}: B's list shows ${shown.join(', ')}`);
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it("no other read without an id (coverage, extraction status, analytics) shows B anything of A's", async () => {
    // POST /analytics/dashboard is a read (DESIGN.md §3). GET /mcp, the SSE stream, has no JSON answer.
    const reads = operations().filter(
      (op) =>
        op.params.length === 0 &&
        !isList(op) &&
        op.responseSchema &&
        (op.method === 'GET' || op.id === 'getDashboardAnalytics'),
    );
    const failures: string[] = [];
    for (const op of reads) {
      const body = op.method === 'GET' ? undefined : bodyFor(op, b.seeded);
      const mine = await t.call({ method: op.method, url: op.path, key: a.key, body });
      const theirs = await t.call({ method: op.method, url: op.path, key: b.key, body });
      if (mine.status !== 200 || theirs.status !== 200) {
        failures.push(`${describeOp(op)}: ${mine.status} / ${theirs.status} ${theirs.text.slice(0, 200)}`);
      }
      const shown = leaked(theirs.text, '');
      if (shown.length > 0) failures.push(`${describeOp(op)}: B sees ${shown.join(', ')}`);
    }
    expect(reads.length).toBeGreaterThan(0);
    expect(failures, failures.join('\n')).toEqual([]);
  });
});

describe('the matrix is not vacuous', () => {
  // Last: these change and delete tenant A's records. The GETs above showed every value real where a
  // GET reads it; this shows it for the rest (a permission, a test case, a thread named only by a
  // write), and that every body passes validation: a 404 to B above was the lookup, not the body.
  it("tenant A's own key, sending the same requests, finds every resource: no 404, no validation error", async () => {
    // The destructive ones (as the tools' annotations say) last, each before what it belongs to: the
    // deepest path first, and on one path a record's DELETE before emptying the collection.
    const destructive = new Set(
      (await listTools(a.key)).filter((x) => x.annotations?.destructiveHint).map((x) => x.name),
    );
    const rank = (op: DocOperation) =>
      destructive.has(toolName(op.id)) ? 1000 - 10 * op.path.split('/').length - Number(op.method === 'DELETE') : 0;
    const writes = idBearing()
      .filter((op) => op.method !== 'GET')
      .sort((x, y) => rank(x) - rank(y));
    expect(writes.filter((op) => op.method === 'DELETE').every((op) => destructive.has(toolName(op.id)))).toBe(true);
    const failures: string[] = [];
    for (const op of writes) {
      const url = urlFor(op, a.seeded);
      if (!url) {
        failures.push(`${describeOp(op)}: not sent, a path parameter has no seeded value`);
        continue;
      }
      const r = await t.call({ method: op.method, url, key: a.key, body: bodyFor(op, a.seeded) });
      // A state that forbids the change (a turn not waiting, a request already reviewed) is a 409:
      // the resource was found.
      if (r.status >= 300 && !(r.status === 409 && r.body?.error?.code === 'conflict')) {
        failures.push(`${describeOp(op)}: ${r.status} ${r.text.slice(0, 300)}`);
      }
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });
});
