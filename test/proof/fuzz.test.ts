// Fuzzing from the OpenAPI document: for every operation of the document — the API's,
// the control plane's (/admin/v1) and MCP's (/api/v1/mcp) — requests generated from its own
// schemas, valid ones and the mistakes clients make (missing fields, wrong types, nulls, extra
// fields, huge and unicode strings, bad UUIDs, malformed JSON, wrong content types and charsets,
// bodies where none is taken), sent over real HTTP to the app listening on a port, so that Node's
// parser, the socket and Fastify's content-type parsers are fuzzed too. Every answer must have a
// status documented for the operation, a content type documented for that status, a body that
// matches its schema, and never be a 5xx (the document lists 500 and 503 for every operation, for
// a fault or an outage: the fuzzer causes neither). MCP answers are also checked against the
// protocol's result schemas and each tool's own output schema.
//
// Seeded and bounded: FUZZ_SEED, and FUZZ_RUNS rounds over every operation (about 2,600 requests
// each). A summary (requests per area and kind, answers by status and content type, failures with
// their request and answer) is always printed, and any failure fails the test. FUZZ_LOG=1 prints
// each request as it is answered; FUZZ_ONLY=<regular expression> fuzzes only the operations whose
// `METHOD /path` it matches.
//
// The fuzz tenant holds one of every resource a path parameter can name (test/support/seed.ts),
// so that valid requests on id-bearing operations mostly reach a real resource and their success
// bodies are checked too; deletions are sent last, so that the other requests find what they
// name. The summary says how many 2xx answers those operations got.
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CallToolResultSchema,
  EmptyResultSchema,
  InitializeResultSchema,
  ListToolsResultSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolName } from '../../src/operations/registry.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers.js';
import { type DocumentOperation, documentOperations } from '../support/openapi-document.js';
import { arbitraryFor, type JsonSchema, wrongTypeFor } from '../support/schema-arbitrary.js';
import { paramValue, type Seeded, seedTenants } from '../support/seed.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const RUNS = Number(process.env.FUZZ_RUNS ?? 3);
const LOG_EACH = process.env.FUZZ_LOG === '1';
const ONLY = new RegExp(process.env.FUZZ_ONLY ?? '');
const EVERY_OPERATION = process.env.FUZZ_ONLY === undefined;
/** BODY_LIMIT_BYTES here: small, so that a body over it is cheap to send, and above the huge fields sent. */
const BODY_LIMIT = 256 * 1024;
/** Values in the 'huge flat array' body: more than any operation takes, in fewer bytes than BODY_LIMIT. */
const HUGE_ARRAY = 110_000;
/** An answer not complete by then is a failure (a hang), rather than a suite that never ends. */
const ANSWER_TIMEOUT_MS = 10_000;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const MCP_PATH = '/api/v1/mcp';
const MCP_ACCEPT = 'application/json, text/event-stream';

/**
 * The real value of parameter `name` (in the path or the query) of the operation at `path`, and of
 * the tool argument of that name: the fuzz tenant's own resources, seeded in `beforeAll`, and its
 * id on the control plane. By path too, as one name can mean another resource on another path (a
 * custom data source by slug or by id). None for `key_id`: the fuzzer would revoke and lock the
 * keys it sends. A valid request takes it most of the time, and so reaches past "not found".
 */
let pathValues: (path: string, name: string) => string | undefined = () => undefined;
/** One value in this many is generated rather than real: ids that name nothing, too. */
const GENERATED_ONE_IN = 5;

/** Where an operation lives, for credentials and the summary. */
type Area = 'api' | 'admin' | 'mcp';

interface Op extends DocumentOperation {
  area: Area;
}

/** The credentials a request carries: the operation's own, none, a wrong one, or a key of one scope. */
type Credentials = 'valid' | 'none' | 'wrong' | 'narrow' | 'api key on admin';

interface Variant {
  /** What the request tries, for the summary: 'valid', 'malformed JSON', 'no credentials'… */
  kind: string;
  url: string;
  /** A JSON value, sent as application/json. */
  json?: unknown;
  /** Bytes sent as they are, with this content type (none when undefined). */
  raw?: { bytes: string | Buffer; contentType?: string | undefined };
  headers?: Record<string, string>;
  credentials?: Credentials;
  /** Statuses this request must get (besides being documented): 401 for no credentials, say. */
  expect?: number[];
  /** The request is wrong, whatever the data: any documented 4xx, never a 2xx. */
  refused?: boolean;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

interface Sent {
  op: Op;
  variant: Variant;
  method: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

let t: TestApp;
let port: number;
let key: string;
let otherKey: string;
/** A key of one scope (a key has at least one): the other operations must answer it 403. */
let narrowKey: string;
const NARROW_SCOPE = 'analytics:read';
// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is read loosely.
let doc: any;
/** The MCP tools, as tools/list shows them to a key with every scope. */
let tools: Map<string, { name: string; inputSchema: JsonSchema; outputSchema?: JsonSchema }>;
/** The operation each tool runs, by tool name. */
let toolOps: Map<string, Op>;
const agent = new http.Agent({ keepAlive: true });

beforeAll(async () => {
  t = await startTestApp({ BODY_LIMIT_BYTES: String(BODY_LIMIT) });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
  const fuzzTenant = await t.tenant();
  key = fuzzTenant.key;
  ({ key: otherKey } = await t.tenant());
  ({ key: narrowKey } = await t.tenant([NARROW_SCOPE]));
  // Seeding runs the jobs it needs, then leaves webhook deliveries queued: no job runs afterwards.
  const seeded = (await seedTenants(t, [{ key, label: 'fuzz' }]))[0] as Seeded;
  pathValues = (path, name) => {
    if (name === 'key_id') return undefined;
    if (name === 'tenant_id') return fuzzTenant.tenantId;
    return paramValue(seeded, path, name);
  };
  doc = JSON.parse((await request('GET', '/api/v1/openapi.json')).text);
  const listed = await request(
    'POST',
    MCP_PATH,
    { 'x-api-key': key, accept: MCP_ACCEPT, 'content-type': 'application/json' },
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  );
  tools = new Map(JSON.parse(listed.text).result.tools.map((tool: { name: string }) => [tool.name, tool]));
  toolOps = new Map(operations().map((op) => [toolName(String(op.spec.operationId)), op]));
});
afterAll(async () => {
  agent.destroy();
  await t.close();
});

/** One request over HTTP; an event stream is read up to its first chunk, then closed. */
function request(method: string, url: string, headers: Record<string, string> = {}, body?: string | Buffer) {
  return new Promise<Answer>((resolve, reject) => {
    const bytes = body === undefined ? undefined : Buffer.from(body);
    let done = false;
    const req = http.request({
      host: '127.0.0.1',
      port,
      method,
      path: url,
      agent,
      headers: { ...headers, ...(bytes ? { 'content-length': String(bytes.length) } : {}) },
    });
    // From the start, not the socket's idleness: a request still queued for a socket counts too.
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`)),
      ANSWER_TIMEOUT_MS,
    );
    req.on('close', () => clearTimeout(timer));
    req.on('error', (error) => {
      if (!done) reject(error);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      const stream = /^text\/event-stream/i.test(String(res.headers['content-type'] ?? ''));
      const finish = () => {
        if (done) return;
        done = true;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') });
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        if (stream) {
          finish();
          res.destroy();
        }
      });
      res.on('end', finish);
      res.on('error', (error) => {
        if (!done) reject(error);
      });
    });
    req.end(bytes);
  });
}

function operations(): Op[] {
  return documentOperations(doc).map((op) => ({
    ...op,
    area: op.path === MCP_PATH ? 'mcp' : op.path.startsWith('/admin/') ? 'admin' : 'api',
  }));
}

const sample = <T>(arb: fc.Arbitrary<T>, salt: number): T => fc.sample(arb, { numRuns: 1, seed: SEED + salt })[0] as T;
const pick = <T>(items: readonly T[], salt: number): T => items[Math.abs(salt) % items.length] as T;

function paramSchemas(op: Op, where: 'path' | 'query' | 'header'): Record<string, JsonSchema> {
  const out: Record<string, JsonSchema> = {};
  for (const p of op.spec.parameters ?? []) if (p.in === where) out[p.name] = { ...p.schema, required: p.required };
  return out;
}

const bodySchema = (op: Op): JsonSchema | undefined => op.spec.requestBody?.content?.['application/json']?.schema;

/** A response object of the document, its `$ref` (`#/components/responses/Error404`) followed. */
// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI response object.
function documentedResponse(responses: any, status: number): any {
  const response = responses?.[String(status)];
  return typeof response?.$ref === 'string' ? doc.components.responses[response.$ref.split('/').pop()] : response;
}

/** The parameter's real value (`pathValues`), when there is one, but for one time in GENERATED_ONE_IN. */
const realValue = (path: string, name: string, salt: number): string | undefined =>
  sample(fc.nat(GENERATED_ONE_IN - 1), salt + name.length) === 0 ? undefined : pathValues(path, name);

/** A real value for the parameter most of the time (`pathValues`), else one generated from its schema. */
const valueFor = (op: Op, name: string, schema: JsonSchema, salt: number): unknown =>
  realValue(op.path, name, salt) ?? sample(arbitraryFor(schema), salt + name.length);

/** Path values as they go in a URL: encoded, unless `raw` (bytes the router must refuse itself). */
function buildUrl(op: Op, path: Record<string, unknown>, query: Record<string, unknown>, raw = false): string {
  let url = op.path.replace(/\{([^}]+)\}/g, (_, name) =>
    raw ? String(path[name]) : encodeURIComponent(String(path[name])),
  );
  const qs = Object.entries(query)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  if (qs) url += `?${qs}`;
  return url;
}

/** A header value from a string schema: visible ASCII only, which is all HTTP carries as is. */
function headerValue(schema: JsonSchema, salt: number): string {
  const min = schema.minLength ?? 1;
  const max = Math.min(schema.maxLength ?? 40, 40);
  const chars = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:'.split(''));
  return sample(fc.array(chars, { minLength: min, maxLength: Math.max(min, max) }), salt).join('');
}

const allowsNull = (schema: JsonSchema): boolean =>
  schema?.type === 'null' ||
  (Array.isArray(schema?.type) && schema.type.includes('null')) ||
  (schema?.anyOf ?? schema?.oneOf ?? []).some(allowsNull) ||
  schema?.type === undefined;

const MULTIPART = '--fuzz\r\nContent-Disposition: form-data; name="name"\r\n\r\nx\r\n--fuzz--\r\n';

interface RawBody {
  kind: string;
  bytes: string | Buffer;
  /** None when undefined. */
  contentType: string | undefined;
  /** Refused by any operation that reads bodies (all but GETs), whether it takes one or not. */
  refused: boolean;
}

/**
 * Bodies sent as bytes, the same for every operation: one that takes JSON must refuse them, and so
 * must one that takes none (src/operations/registry.ts, refuseBody); a GET's body is not read, as
 * HTTP allows.
 */
function rawBodies(salt: number, run: number): RawBody[] {
  const json = 'application/json';
  const bodies: RawBody[] = [
    { kind: 'malformed JSON', bytes: '{"broken": ', contentType: json, refused: true },
    { kind: 'text/plain body', bytes: '{"name":"x"}', contentType: 'text/plain', refused: true },
    {
      kind: 'form body',
      bytes: 'name=x&tags=%ZZ',
      contentType: 'application/x-www-form-urlencoded',
      refused: true,
    },
    { kind: 'multipart body', bytes: MULTIPART, contentType: 'multipart/form-data; boundary=fuzz', refused: true },
    { kind: 'body without content type', bytes: '{"name":"x"}', contentType: undefined, refused: true },
    { kind: '+json content type', bytes: '{"name":"x"}', contentType: 'application/vnd.api+json', refused: true },
    {
      kind: 'latin-1 charset',
      bytes: Buffer.from('{"name":"café"}', 'latin1'),
      contentType: `${json}; charset=iso-8859-1`,
      refused: true,
    },
    {
      kind: 'UTF-16 charset',
      bytes: Buffer.from('{"name":"x"}', 'utf16le'),
      contentType: `${json}; charset=utf-16`,
      refused: true,
    },
    {
      kind: 'invalid UTF-8',
      bytes: Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
      contentType: json,
      refused: true,
    },
    { kind: 'JSON scalar body', bytes: pick(['null', '42', '"text"', 'true'], salt), contentType: json, refused: true },
    { kind: 'deep nesting', bytes: `${'['.repeat(3000)}${']'.repeat(3000)}`, contentType: json, refused: true },
    { kind: 'forbidden key', bytes: '{"__proto__": {"polluted": true}}', contentType: json, refused: true },
    { kind: 'prototype key', bytes: '{"constructor": {"prototype": {"x": 1}}}', contentType: json, refused: true },
    // More values than any operation takes, under the byte limit: refused before it is parsed.
    { kind: 'huge flat array', bytes: `{"a":[${'1,'.repeat(HUGE_ARRAY - 1)}1]}`, contentType: json, refused: true },
  ];
  // Bodies that are not wrong in themselves, and one over the limit, once: they cost bytes, not coverage.
  if (run === 0) {
    bodies.push(
      { kind: 'empty JSON body', bytes: '', contentType: json, refused: false },
      { kind: 'byte order mark', bytes: '\ufeff{}', contentType: `${json}; charset="UTF-8"`, refused: false },
      {
        kind: 'body over the limit',
        bytes: JSON.stringify({ filler: 'x'.repeat(BODY_LIMIT) }),
        contentType: json,
        refused: true,
      },
    );
  }
  return bodies;
}

const rawVariant = (url: string, { kind, bytes, contentType }: RawBody): Variant => ({
  kind,
  url,
  raw: { bytes, contentType },
});

/** The requests of a REST or control-plane operation for one round. */
function restVariants(op: Op, salt: number, run: number): Variant[] {
  const pathSchemas = paramSchemas(op, 'path');
  const querySchemas = paramSchemas(op, 'query');
  const headerSchemas = paramSchemas(op, 'header');
  const path: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(pathSchemas)) path[name] = valueFor(op, name, schema, salt);
  const query: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(querySchemas)) {
    if (schema.required || sample(fc.boolean(), salt + 7)) query[name] = valueFor(op, name, schema, salt * 3);
  }
  delete query.cursor; // cursors are opaque: only the API issues them
  const url = buildUrl(op, path, query);
  const headers: Record<string, string> = {};
  for (const [name, schema] of Object.entries(headerSchemas)) {
    if (schema.required || sample(fc.boolean(), salt + 11)) headers[name] = headerValue(schema, salt);
  }
  // An operation that streams when asked is asked so, half the time.
  const successStatus = Object.keys(op.spec.responses).find((status) => Number(status) < 300);
  const success = documentedResponse(op.spec.responses, Number(successStatus));
  if (success?.content?.['text/event-stream'] && sample(fc.boolean(), salt + 13)) headers.accept = 'text/event-stream';
  const schema = bodySchema(op);
  const body = schema ? sample(arbitraryFor(schema), salt) : undefined;
  const withBody = body !== undefined ? { json: body } : {};
  const out: Variant[] = [{ kind: 'valid', url, headers, ...withBody }];

  if (Object.keys(pathSchemas).length > 0) {
    const [bad, raw] = pick(
      [
        ['not-a-uuid-☃', false],
        ['00000000-0000-0000-0000-000000000000', false],
        ['%E0%A4%A', true],
        ['x'.repeat(300), false],
        ['..', false],
      ] as const,
      salt,
    );
    const badPath = Object.fromEntries(Object.keys(pathSchemas).map((k) => [k, bad]));
    out.push({ kind: 'bad path id', url: buildUrl(op, badPath, query, raw), ...withBody });
  }
  if (Object.keys(querySchemas).length > 0) {
    const first = Object.keys(querySchemas)[0] as string;
    const wrong = { ...query, [first]: pick(['%%%', '-1', '1e999', 'ünïcødé', ''], salt) };
    out.push({ kind: 'wrong query value', url: buildUrl(op, path, wrong), ...withBody });
    out.push({ kind: 'unknown query parameter', url: buildUrl(op, path, { ...query, surprise: 'x' }), ...withBody });
  }
  for (const [name, schema] of Object.entries(headerSchemas)) {
    const bad = 'k'.repeat((schema.maxLength ?? 255) + 1);
    out.push({ kind: `bad ${name}`, url, headers: { [name]: bad }, ...withBody, expect: [422] });
  }
  if (schema && body && typeof body === 'object' && !Array.isArray(body)) {
    const record = body as Record<string, unknown>;
    const props = Object.keys(schema.properties ?? {});
    const required: string[] = schema.required ?? [];
    const missing = pick([...required, ''], salt);
    // A field with a default is filled in when left out.
    if (missing && schema.properties?.[missing]?.default === undefined) {
      const { [missing]: _dropped, ...rest } = record;
      out.push({ kind: 'missing required field', url, json: rest, refused: true });
    }
    const field = props[salt % Math.max(1, props.length)];
    if (field) {
      const fieldSchema = schema.properties[field];
      const wrong = wrongTypeFor(fieldSchema);
      if (wrong !== undefined) {
        const typed = fieldSchema.type !== undefined && !fieldSchema.anyOf;
        out.push({ kind: 'wrong type', url, json: { ...record, [field]: wrong }, refused: typed });
      }
      out.push({ kind: 'null field', url, json: { ...record, [field]: null }, refused: !allowsNull(fieldSchema) });
      const huge = pick(['x'.repeat(200_000), '☃'.repeat(60_000), '🎉'.repeat(40_000)], salt);
      out.push({ kind: 'huge field', url, json: { ...record, [field]: huge } });
      // Look-alikes too: a decomposed accent, bidi and format characters, fullwidth dots.
      const odd = pick(['\u0000', '\ud800', 'RTL \u202e', 'e\u0301', '\ufeff', '．．/x', 'a\u200b/..'], salt);
      const oddRefused = odd === '\u0000' || odd === '\ud800';
      out.push({ kind: 'odd unicode field', url, json: { ...record, [field]: odd }, refused: oddRefused });
    }
    if ('input_schema' in (schema.properties ?? {})) {
      // A tenant's regex runs on a linear-time engine; one it cannot run is refused.
      const pattern = pick(['^(a+)+$', '(a)\\1', '(?=a)a'], salt);
      const inputSchema = { type: 'object', properties: { a: { type: 'string', pattern } } };
      out.push({ kind: 'tenant regex', url, json: { ...record, input_schema: inputSchema } });
    }
    out.push({
      kind: 'extra field',
      url,
      json: { ...record, unexpected_field: 'surprise' },
      refused: schema.additionalProperties === false,
    });
  }
  // The body as an array, for every operation: one that takes an object must refuse it.
  out.push({ kind: 'array body', url, json: [body ?? {}], refused: Boolean(schema) || op.method !== 'GET' });
  const reads = op.method !== 'GET';
  for (const raw of rawBodies(salt, run)) {
    const over = reads && (raw.kind === 'body over the limit' || raw.kind === 'huge flat array');
    out.push({ ...rawVariant(url, raw), refused: reads && raw.refused, ...(over ? { expect: [413] } : {}) });
  }
  if (run === 0) {
    // Past Node's header limit (16 KiB): refused by the HTTP parser, before Fastify.
    out.push({ kind: 'huge query', url: `${url}${url.includes('?') ? '&' : '?'}q=${'q'.repeat(20_000)}`, ...withBody });
    out.push(...credentialVariants(op, url, withBody));
  }
  return out;
}

function credentialVariants(op: Op, url: string, withBody: { json?: unknown }): Variant[] {
  const out: Variant[] = [
    { kind: 'no credentials', url, ...withBody, credentials: 'none', expect: [401] },
    { kind: 'wrong credentials', url, ...withBody, credentials: 'wrong', expect: [401] },
  ];
  if (op.area === 'admin') {
    out.push({
      kind: 'API key on the control plane',
      url,
      ...withBody,
      credentials: 'api key on admin',
      expect: [401],
    });
  } else if (op.area === 'api') {
    const allowed = op.spec['x-required-scope'] === NARROW_SCOPE;
    out.push({
      kind: 'key of another scope',
      url,
      ...withBody,
      credentials: 'narrow',
      ...(allowed ? {} : { expect: [403] }),
    });
  }
  return out;
}

// MCP: JSON-RPC messages from the protocol's shapes, with tool arguments from each tool's input schema.

const rpcId = fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.string({ minLength: 1, maxLength: 12 }));
const rpcRequest = (method: string, params?: fc.Arbitrary<unknown>) =>
  fc.record({
    jsonrpc: fc.constant('2.0'),
    id: rpcId,
    method: fc.constant(method),
    ...(params ? { params } : {}),
  });

/**
 * Tool arguments from the tool's input schema; those that are parameters of its operation take
 * real values as over REST (`pathValues`), but not a deleting tool's: REST's deletions take the
 * seeded resources, after every other request (the run, below).
 */
function toolArguments(name: string): fc.Arbitrary<unknown> {
  const tool = tools.get(name);
  const op = toolOps.get(name);
  const parameters = op && op.method !== 'DELETE' ? { ...paramSchemas(op, 'path'), ...paramSchemas(op, 'query') } : {};
  return fc.tuple(arbitraryFor(tool?.inputSchema ?? { type: 'object' }), fc.nat()).map(([args, salt]) => {
    if (typeof args !== 'object' || args === null || !op) return args;
    const real = Object.keys(args).flatMap((k) => {
      const value = k in parameters ? realValue(op.path, k, salt) : undefined;
      return value === undefined ? [] : [[k, value]];
    });
    return { ...args, ...Object.fromEntries(real) };
  });
}

function mcpArbitraries() {
  const toolCall = fc
    .constantFrom(...tools.keys())
    .chain((name) => toolArguments(name).map((args) => ({ name, arguments: args })));
  const initialize = rpcRequest(
    'initialize',
    fc.record({
      protocolVersion: fc.constantFrom(...SUPPORTED_PROTOCOL_VERSIONS),
      capabilities: fc.constant({}),
      clientInfo: fc.record({ name: fc.string({ maxLength: 20 }), version: fc.constant('1.0.0') }),
    }),
  );
  const request = fc.oneof(
    rpcRequest('ping'),
    rpcRequest('tools/list'),
    rpcRequest('tools/call', toolCall),
    rpcRequest('tools/call', fc.record({ name: fc.constant('no_such_tool'), arguments: fc.constant({}) })),
    rpcRequest('resources/list'),
  );
  const notification = fc.oneof(
    fc.constant({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    fc.record({
      jsonrpc: fc.constant('2.0'),
      method: fc.constant('notifications/cancelled'),
      params: fc.record({ requestId: rpcId }),
    }),
  );
  const answer = fc.record({ jsonrpc: fc.constant('2.0'), id: rpcId, result: fc.constant({}) });
  const batch = fc.array(fc.oneof({ weight: 3, arbitrary: request }, notification, answer), {
    minLength: 1,
    maxLength: 4,
  });
  return { initialize, request, notification, batch };
}

/** The requests of POST /api/v1/mcp for one round. */
function mcpPostVariants(salt: number, run: number): Variant[] {
  const arbs = mcpArbitraries();
  const version = { 'mcp-protocol-version': pick(SUPPORTED_PROTOCOL_VERSIONS, salt) };
  const out: Variant[] = [
    { kind: 'initialize', url: MCP_PATH, json: sample(arbs.initialize, salt) },
    { kind: 'request', url: MCP_PATH, json: sample(arbs.request, salt + 1), headers: version },
    { kind: 'request', url: MCP_PATH, json: sample(arbs.request, salt + 2) },
    { kind: 'notification', url: MCP_PATH, json: sample(arbs.notification, salt + 3), expect: [202] },
    {
      kind: 'batch',
      url: MCP_PATH,
      json: sample(arbs.batch, salt + 4),
      headers: { 'mcp-protocol-version': pick(['2025-03-26', '2024-11-05'], salt) },
    },
    { kind: 'batch', url: MCP_PATH, json: sample(arbs.batch, salt + 5) },
  ];
  // Each tool, with arguments from its input schema; in the first round also with wrong ones.
  for (const [index, name] of [...tools.keys()].entries()) {
    const args = sample(toolArguments(name), salt + index) as Record<string, unknown>;
    const call = (id: number, a: unknown) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name, arguments: a },
    });
    out.push({ kind: 'tools/call', url: MCP_PATH, json: call(index, args) });
    if (run === 0) {
      const schema = tools.get(name)?.inputSchema ?? {};
      const field = pick(Object.keys(schema.properties ?? {}), index);
      const wrong = field ? { ...args, [field]: wrongTypeFor(schema.properties[field]) ?? null } : 'not an object';
      out.push({ kind: 'tools/call, wrong arguments', url: MCP_PATH, json: call(index, wrong) });
    }
  }
  const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };
  const someTool = tools.get(pick([...tools.keys()], salt));
  const someField = Object.keys(someTool?.inputSchema.properties ?? {})[0] ?? 'name';
  const wrong: Variant[] = [
    { kind: 'not JSON-RPC', url: MCP_PATH, json: pick([{}, { hello: 'world' }, [1, 2], 'ping', null], salt) },
    { kind: 'wrong JSON-RPC version', url: MCP_PATH, json: { ...ping, jsonrpc: '1.0' } },
    { kind: 'id of a wrong type', url: MCP_PATH, json: { ...ping, id: pick([{}, true, [1], 1.5], salt) } },
    { kind: 'params not an object', url: MCP_PATH, json: { ...ping, method: 'tools/call', params: 'x' } },
    { kind: 'empty batch', url: MCP_PATH, json: [], expect: [400] },
    { kind: 'nested batch', url: MCP_PATH, json: [[ping]], expect: [400] },
    {
      kind: 'batch with initialize',
      url: MCP_PATH,
      json: [sample(arbs.initialize, salt), ping],
      expect: [400],
    },
    {
      kind: 'batch under a protocol without batches',
      url: MCP_PATH,
      json: [ping],
      headers: { 'mcp-protocol-version': '2025-06-18' },
      expect: [400],
    },
    {
      kind: 'unsupported protocol version',
      url: MCP_PATH,
      json: ping,
      headers: { 'mcp-protocol-version': '1999-01-01' },
      expect: [400],
    },
    {
      kind: 'Accept of JSON only (a plain JSON-RPC client)',
      url: MCP_PATH,
      json: ping,
      headers: { accept: 'application/json' },
      expect: [200],
    },
    {
      kind: 'Accept of event streams only',
      url: MCP_PATH,
      json: ping,
      headers: { accept: 'text/event-stream' },
      expect: [200],
    },
    {
      kind: 'Accept of neither JSON nor event streams',
      url: MCP_PATH,
      json: ping,
      headers: { accept: 'text/html' },
      expect: [406],
    },
    {
      kind: 'Origin not allowed',
      url: MCP_PATH,
      json: ping,
      headers: { origin: 'http://evil.example' },
      expect: [403],
    },
    {
      kind: 'huge argument',
      url: MCP_PATH,
      json: {
        ...ping,
        method: 'tools/call',
        params: { name: someTool?.name, arguments: { [someField]: '☃'.repeat(60_000) } },
      },
    },
  ];
  out.push(...wrong);
  if (run === 0) {
    out.push({
      kind: 'batch over 100',
      url: MCP_PATH,
      json: Array.from({ length: 101 }, (_, id) => ({ ...ping, id })),
      expect: [400],
    });
    out.push({ kind: 'no Accept', url: MCP_PATH, json: ping, headers: { accept: '' }, expect: [200] });
    out.push({ kind: 'no credentials', url: MCP_PATH, json: ping, credentials: 'none', expect: [401] });
    out.push({ kind: 'wrong credentials', url: MCP_PATH, json: ping, credentials: 'wrong', expect: [401] });
    out.push({ kind: 'key of one scope', url: MCP_PATH, json: sample(arbs.request, salt + 6), credentials: 'narrow' });
  }
  for (const raw of rawBodies(salt, run)) out.push({ ...rawVariant(MCP_PATH, raw), refused: raw.refused });
  return out;
}

/** The requests of GET /api/v1/mcp (the event stream) for one round. */
function mcpGetVariants(salt: number, run: number): Variant[] {
  const stream = { accept: 'text/event-stream' };
  const out: Variant[] = [
    { kind: 'valid', url: MCP_PATH, headers: stream, expect: [200] },
    { kind: 'Origin not allowed', url: MCP_PATH, headers: { ...stream, origin: 'null' }, expect: [403] },
  ];
  if (run === 0) {
    out.push(
      { kind: 'no Accept', url: MCP_PATH, expect: [200] },
      { kind: 'no credentials', url: MCP_PATH, headers: stream, credentials: 'none', expect: [401] },
      { kind: 'wrong credentials', url: MCP_PATH, headers: stream, credentials: 'wrong', expect: [401] },
      { kind: 'key of one scope', url: MCP_PATH, headers: stream, credentials: 'narrow', expect: [200] },
    );
  }
  // A GET's body is not read: the stream opens all the same.
  for (const raw of rawBodies(salt, run).slice(0, run === 0 ? undefined : 3)) {
    out.push({ ...rawVariant(MCP_PATH, raw), headers: stream });
  }
  return out;
}

const NO_ROUTE = {
  description: 'No such route.',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
};

/**
 * A method the document does not list for a path: the router's 404 (or a 405), in the error body.
 * Not one whose URL another template of that method takes (`PUT …/rows/clear` is `PUT
 * …/rows/{external_id}`).
 */
function undocumentedMethods(ops: Op[], run: number): { op: Op; variant: Variant }[] {
  const byPath = new Map<string, Op[]>();
  for (const op of ops) byPath.set(op.path, [...(byPath.get(op.path) ?? []), op]);
  const template = (path: string) => new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`);
  const out: { op: Op; variant: Variant }[] = [];
  for (const [index, [path, documented]] of [...byPath].entries()) {
    const first = documented[0] as Op;
    const id = '0190a000-0000-7000-8000-000000000000';
    const url = path.replace(/\{[^}]+\}/g, id);
    const methods = METHODS.map((m) => m.toUpperCase()).filter(
      (m) => !ops.some((op) => op.method === m && template(op.path).test(url)),
    );
    // DELETE ends a session in MCP's transport; this server keeps none.
    const method = path === MCP_PATH ? 'DELETE' : pick(methods, index + run);
    if (method === undefined) continue;
    const op: Op = { method, path, area: first.area, spec: { responses: { 404: NO_ROUTE, 405: NO_ROUTE } } };
    out.push({ op, variant: { kind: 'undocumented method', url, json: {}, expect: [404, 405] } });
  }
  return out;
}

/** The request as it goes on the wire: credentials for its area, content type, body bytes. */
function prepare(op: Op, variant: Variant): Sent {
  const headers: Record<string, string> = {};
  const credentials = variant.credentials ?? 'valid';
  if (op.area === 'admin') {
    if (credentials === 'valid') headers.authorization = `Bearer ${ADMIN_TOKEN}`;
    if (credentials === 'wrong') headers.authorization = 'Bearer not-the-operator-token';
    if (credentials === 'api key on admin') headers['x-api-key'] = key;
  } else {
    if (credentials === 'valid') headers['x-api-key'] = key;
    if (credentials === 'wrong') headers['x-api-key'] = 'wsk_not_a_key_0123456789';
    if (credentials === 'narrow') headers['x-api-key'] = narrowKey;
  }
  if (op.area === 'mcp' && op.method === 'POST') headers.accept = MCP_ACCEPT;
  let body: Buffer | undefined;
  if (variant.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = Buffer.from(JSON.stringify(variant.json));
  } else if (variant.raw) {
    if (variant.raw.contentType !== undefined) headers['content-type'] = variant.raw.contentType;
    body = Buffer.from(variant.raw.bytes);
  }
  for (const [name, value] of Object.entries(variant.headers ?? {})) {
    if (value === '') delete headers[name.toLowerCase()];
    else headers[name.toLowerCase()] = value;
  }
  return { op, variant, method: op.method, headers, body };
}

// Judging answers against the document.

const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: true });
addFormats.default(ajv);
const validators = new Map<string, ValidateFunction>();
/** A validator for a schema of the document, its `#/components/…` references resolved there. */
function validatorFor(id: string, schema: JsonSchema): ValidateFunction {
  let validate = validators.get(id);
  if (!validate) {
    if (!ajv.getSchema('doc')) ajv.addSchema({ components: doc.components }, 'doc');
    validate = ajv.compile(JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, '"doc#/components/')));
    validators.set(id, validate);
  }
  return validate;
}

const mediaType = (headers: IncomingHttpHeaders) =>
  String(headers['content-type'] ?? '')
    .split(';')[0]
    ?.trim()
    .toLowerCase() ?? '';

/** What is wrong with an answer, by the document (and for MCP, by the protocol): nothing when empty. */
function problemsOf(sent: Sent, answer: Answer): string[] {
  const { op, variant } = sent;
  const problems: string[] = [];
  if (answer.status >= 500) return ['a server error'];
  if (variant.expect && !variant.expect.includes(answer.status))
    problems.push(`expected ${variant.expect.join(' or ')}`);
  if (variant.refused && answer.status < 400) problems.push('a wrong request was accepted');
  const response = documentedResponse(op.spec.responses, answer.status);
  if (!response) {
    return [...problems, `status not documented (${Object.keys(op.spec.responses ?? {}).join(', ')})`];
  }
  const media = mediaType(answer.headers);
  const content: Record<string, { schema?: JsonSchema }> = response.content ?? {};
  if (Object.keys(content).length === 0) {
    if (answer.text !== '') problems.push(`a body where none is documented (${media || 'no content type'})`);
  } else if (!(media in content)) {
    problems.push(`content type '${media || 'none'}' not documented (${Object.keys(content).join(', ')})`);
  } else if (media === 'application/json') {
    let body: unknown;
    try {
      body = JSON.parse(answer.text);
    } catch {
      return [...problems, 'an application/json body that is not JSON'];
    }
    const schema = content[media]?.schema;
    if (schema) {
      const validate = validatorFor(`${op.method} ${op.path} ${answer.status}`, schema);
      if (!validate(body)) problems.push(`body does not match its schema: ${ajv.errorsText(validate.errors)}`);
    }
    if (op.area === 'mcp' && answer.status === 200) problems.push(...mcpProblems(variant.json, body));
  }
  problems.push(...headerProblems(response, answer.headers));
  return problems;
}

/** Each response header the document declares must hold a value of its schema when sent; X-Request-Id always. */
// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI response object.
function headerProblems(response: any, headers: IncomingHttpHeaders): string[] {
  const problems: string[] = [];
  for (const [name, declared] of Object.entries(response.headers ?? {}) as [string, { $ref?: string }][]) {
    const header = declared.$ref ? doc.components.headers[declared.$ref.split('/').pop() as string] : declared;
    const value = headers[name.toLowerCase()];
    if (value === undefined) {
      if (name === 'X-Request-Id') problems.push('no X-Request-Id');
      continue;
    }
    const schema = header?.schema ?? {};
    const typed = schema.type === 'integer' ? (/^-?\d+$/.test(String(value)) ? Number(value) : String(value)) : value;
    const validate = validatorFor(`header ${name}`, schema);
    if (!validate(typed)) problems.push(`header ${name}: ${String(value)} ${ajv.errorsText(validate.errors)}`);
  }
  return problems;
}

const RESULT_SCHEMAS: Record<string, { safeParse(value: unknown): { success: boolean } }> = {
  initialize: InitializeResultSchema,
  ping: EmptyResultSchema,
  'tools/list': ListToolsResultSchema,
  'tools/call': CallToolResultSchema,
};

/**
 * A 200 of POST /api/v1/mcp: a batch answered with an array, a request with an object; each
 * answer to a request sent, its result of the protocol's schema for the method; a tool's result
 * of the tool's output schema, or its error the API's error body.
 */
function mcpProblems(sent: unknown, body: unknown): string[] {
  const problems: string[] = [];
  if (Array.isArray(sent) !== Array.isArray(body)) problems.push('a batch answered without an array, or the reverse');
  // biome-ignore lint/suspicious/noExplicitAny: JSON-RPC messages, read loosely.
  const requests = (Array.isArray(sent) ? sent : [sent]).filter((m: any) => m && 'method' in m && 'id' in m) as any[];
  // biome-ignore lint/suspicious/noExplicitAny: JSON-RPC answers, read loosely.
  for (const answer of (Array.isArray(body) ? body : [body]) as any[]) {
    const request = requests.find((r) => r.id === answer?.id);
    if (!request) {
      problems.push(`an answer (id ${JSON.stringify(answer?.id)}) to no request sent`);
      continue;
    }
    if (answer.error !== undefined) {
      // A tool's failure is a result (isError) the model can read. Arguments that are not an
      // object are the SDK's to refuse (as -32603, its parse error, rather than -32602).
      const args = request.params?.arguments;
      const plainArgs = args === undefined || (typeof args === 'object' && args !== null && !Array.isArray(args));
      if (request.method === 'tools/call' && tools.has(request.params?.name) && plainArgs) {
        problems.push(
          `tools/call ${request.params.name} answered a JSON-RPC error, not a tool error: ${answer.error.message}`,
        );
      }
      continue;
    }
    const schema = RESULT_SCHEMAS[request.method];
    if (!schema) {
      problems.push(`a result for ${request.method}, which the server does not offer`);
      continue;
    }
    if (!schema.safeParse(answer.result).success) problems.push(`the ${request.method} result is not MCP's`);
    if (request.method !== 'tools/call') continue;
    const tool = tools.get(request.params.name);
    if (!tool) {
      problems.push(`a result for an unknown tool ${request.params.name}`);
    } else if (answer.result.isError) {
      let error: unknown;
      try {
        error = JSON.parse(answer.result.content?.[0]?.text);
      } catch {
        problems.push(`${tool.name}: a tool error whose text is not JSON`);
        continue;
      }
      const validate = validatorFor('Error', { $ref: '#/components/schemas/Error' });
      if (!validate(error))
        problems.push(`${tool.name}: a tool error that is not the error body: ${ajv.errorsText(validate.errors)}`);
    } else if (tool.outputSchema) {
      const validate = validatorFor(`tool ${tool.name}`, tool.outputSchema);
      if (!validate(answer.result.structuredContent)) {
        problems.push(
          `${tool.name}: structuredContent does not match its outputSchema: ${ajv.errorsText(validate.errors)}`,
        );
      }
    }
  }
  return problems;
}

// The run: every operation, RUNS rounds, every failure kept.

const excerpt = (text: string, length: number) => (text.length > length ? `${text.slice(0, length)}…` : text);

interface Tally {
  sent: number;
  /** Requests and the milliseconds they took (to see where a run's time goes), by area and kind. */
  byKind: Map<string, Map<string, { n: number; ms: number }>>;
  statuses: Map<string, number>;
  /** Documented operations that got a request, by `METHOD path`. */
  reached: Set<string>;
  failures: string[];
  /** Failures by what is wrong (its start), to see at a glance which rule fails where. */
  problems: Map<string, number>;
  /** 2xx answers of operations with path parameters, by `METHOD path`: real resources reached. */
  idBearing2xx: Map<string, number>;
}

const idBearing = (op: Op) => Object.keys(paramSchemas(op, 'path')).length > 0;

async function fuzz(sent: Sent, tally: Tally): Promise<void> {
  const { op, variant } = sent;
  const area =
    variant.kind === 'undocumented method'
      ? 'methods no path documents'
      : { api: 'API', admin: 'control plane', mcp: `MCP ${op.method}` }[op.area];
  const kinds = tally.byKind.get(area) ?? new Map<string, { n: number; ms: number }>();
  tally.byKind.set(area, kinds);
  const count = kinds.get(variant.kind) ?? { n: 0, ms: 0 };
  kinds.set(variant.kind, count);
  tally.sent++;
  count.n++;
  tally.reached.add(`${op.method} ${op.path}`);
  const where = `${op.method} ${excerpt(variant.url, 120)} [${variant.kind}]`;
  let answer: Answer;
  const started = performance.now();
  try {
    answer = await request(sent.method, variant.url, sent.headers, sent.body);
    count.ms += performance.now() - started;
  } catch (error) {
    tally.failures.push(`${where} → no answer: ${(error as Error).message}\n    request: ${describeRequest(sent)}`);
    return;
  }
  const statusKey = `${answer.status} ${mediaType(answer.headers) || '-'}`;
  tally.statuses.set(statusKey, (tally.statuses.get(statusKey) ?? 0) + 1);
  if (answer.status < 300 && idBearing(op)) {
    const name = `${op.method} ${op.path}`;
    tally.idBearing2xx.set(name, (tally.idBearing2xx.get(name) ?? 0) + 1);
  }
  if (LOG_EACH) console.log(`${where} → ${answer.status}`);
  const problems = problemsOf(sent, answer);
  if (problems.length === 0) return;
  for (const problem of problems) {
    const key = `${op.area} ${answer.status}: ${excerpt(problem, 90)}`;
    tally.problems.set(key, (tally.problems.get(key) ?? 0) + 1);
  }
  tally.failures.push(
    `${where} → ${answer.status}: ${problems.join('; ')}\n    request: ${describeRequest(sent)}\n` +
      `    answer: ${answer.headers['content-type'] ?? 'no content type'} ${excerpt(answer.text, 300)}`,
  );
}

const describeRequest = ({ headers, body }: Sent) =>
  `${Object.entries(headers)
    .filter(([name]) => !['x-api-key', 'authorization'].includes(name))
    .map(([name, value]) => `${name}: ${excerpt(value, 60)}`)
    .join(', ')} ${body ? excerpt(body.toString('utf8'), 200) : '(no body)'}`;

function summary(tally: Tally, ops: Op[]): string {
  const withIds = ops.filter(idBearing).map((op) => `${op.method} ${op.path}`);
  const missed = withIds.filter((op) => !tally.idBearing2xx.has(op));
  const lines = [
    `fuzz: ${tally.sent} requests over ${ops.length} operations (seed ${SEED}, ${RUNS} rounds); ${tally.failures.length} failures`,
    ...[...tally.byKind].map(([area, kinds]) => {
      const counts = [...kinds.values()];
      const total = counts.reduce((sum, { n }) => sum + n, 0);
      const ms = counts.reduce((sum, count) => sum + count.ms, 0);
      const each = [...kinds].map(([kind, { n }]) => `${kind} ${n}`).join(', ');
      return `  ${area}: ${total} requests, ${Math.round(ms)} ms (${each})`;
    }),
    `  answers: ${[...tally.statuses]
      .sort()
      .map(([status, n]) => `${status} ${n}`)
      .join(', ')}`,
    `  id-bearing operations: ${[...tally.idBearing2xx.values()].reduce((sum, n) => sum + n, 0)} 2xx answers, ` +
      `on ${withIds.length - missed.length} of ${withIds.length}${missed.length ? ` (none on ${missed.join(', ')})` : ''}`,
    ...[...tally.problems].map(([problem, n]) => `  ${n} × ${problem}`),
    ...tally.failures.slice(0, 50).map((failure) => `  ✗ ${failure}`),
  ];
  if (tally.failures.length > 50) lines.push(`  … and ${tally.failures.length - 50} more`);
  return lines.join('\n');
}

describe('fuzzing every operation from the OpenAPI document', () => {
  it('answers only documented statuses and content types, bodies that match their schemas, and no 5xx', async () => {
    const all = operations();
    const ops = all.filter((op) => ONLY.test(`${op.method} ${op.path}`));
    if (EVERY_OPERATION) {
      expect(ops.length).toBeGreaterThan(100);
      expect(ops.filter((op) => op.area === 'admin').length).toBe(10);
      expect(ops.filter((op) => op.area === 'mcp').length).toBe(2);
    }
    const tally: Tally = {
      sent: 0,
      byKind: new Map(),
      statuses: new Map(),
      reached: new Set(),
      failures: [],
      problems: new Map(),
      idBearing2xx: new Map(),
    };
    // Deletions wait until every other request is sent, so that those find the seeded resources.
    const deletions: Sent[] = [];
    for (let run = 0; run < RUNS; run++) {
      for (const op of ops) {
        // By the operation's place in the whole document, so that FUZZ_ONLY sends the same requests.
        const salt = run * 1000 + all.indexOf(op);
        const variants =
          op.area !== 'mcp'
            ? restVariants(op, salt, run)
            : op.method === 'POST'
              ? mcpPostVariants(salt, run)
              : mcpGetVariants(salt, run);
        for (const variant of variants) {
          if (op.method === 'DELETE') deletions.push(prepare(op, variant));
          else await fuzz(prepare(op, variant), tally);
        }
      }
      for (const { op, variant } of undocumentedMethods(all, run)) {
        if (ops.some((documented) => documented.path === op.path)) await fuzz(prepare(op, variant), tally);
      }
    }
    // A resource's children first: deleting it would take them along (a dataset's test cases).
    const depth = ({ op }: Sent) => op.path.split('/').length;
    for (const sent of deletions.sort((a, b) => depth(b) - depth(a))) await fuzz(sent, tally);
    console.log(summary(tally, ops));
    expect(tally.failures).toEqual([]);
    // Every operation was sent requests, and the generator reaches past validation: some succeed,
    // and each class of answer shows up.
    expect(ops.filter((op) => !tally.reached.has(`${op.method} ${op.path}`))).toEqual([]);
    if (!EVERY_OPERATION) return;
    const seen = (status: number, media?: string) =>
      [...tally.statuses.keys()].some((k) => k.startsWith(`${status} `) && (!media || k.endsWith(media)));
    for (const status of [200, 201, 202, 400, 401, 403, 404, 406, 413, 422])
      expect(seen(status), `${status}`).toBe(true);
    expect(seen(200, 'text/event-stream')).toBe(true);
    // The seeded resources are reached: most id-bearing operations answer a 2xx at least once.
    expect(tally.idBearing2xx.size).toBeGreaterThan(ops.filter(idBearing).length / 2);
    // About 8,000 requests one after another: 15–35 s here, more on a busy machine.
  }, 300_000);

  it("after the fuzzing, no list shows another tenant's rows", async () => {
    for (const op of operations()) {
      if (op.area !== 'api' || op.method !== 'GET' || op.path === MCP_PATH) continue;
      if (Object.keys(paramSchemas(op, 'path')).length > 0) continue;
      const mine = await request('GET', op.path, { 'x-api-key': key });
      const theirs = await request('GET', op.path, { 'x-api-key': otherKey });
      const [myBody, theirBody] = [JSON.parse(mine.text), JSON.parse(theirs.text)];
      if (myBody?.object !== 'list') continue;
      const myIds = new Set((myBody.data as { id?: string }[]).map((row) => row.id).filter(Boolean));
      for (const row of theirBody.data as { id?: string }[]) {
        expect(myIds.has(row.id as string), `${op.path} leaks ${row.id}`).toBe(false);
      }
    }
  });
});
