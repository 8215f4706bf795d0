// Fuzzing from the OpenAPI document (issue 10): for every operation, requests generated from its
// own schemas — valid ones and the mistakes clients make (missing fields, wrong types, nulls,
// extra fields, huge and unicode strings, bad UUIDs, malformed JSON, wrong content types) — sent
// to the running app. Every answer must be documented for the operation, match its schema, and
// never be a 5xx. Seeded and bounded: FUZZ_SEED and FUZZ_RUNS (per operation and variant).
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';
import { arbitraryFor, type JsonSchema, wrongTypeFor } from './support/schema-arbitrary.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const RUNS = Number(process.env.FUZZ_RUNS ?? 3);

let t: TestApp;
let key: string;
let otherKey: string;
// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is read loosely.
let doc: any;

interface Op {
  method: string;
  path: string;
  // biome-ignore lint/suspicious/noExplicitAny: an OpenAPI operation object.
  spec: any;
}

beforeAll(async () => {
  t = await startTestApp();
  ({ key } = await t.tenant());
  ({ key: otherKey } = await t.tenant());
  doc = (await t.call({ url: '/api/v1/openapi.json' })).body;
});
afterAll(() => t.close());

function operations(): Op[] {
  const out: Op[] = [];
  for (const [path, item] of Object.entries(doc.paths) as [string, Record<string, unknown>][]) {
    if (!path.startsWith('/api/v1/') || path === '/api/v1/mcp') continue;
    for (const [method, spec] of Object.entries(item)) {
      if (['get', 'post', 'put', 'patch', 'delete'].includes(method))
        out.push({ method: method.toUpperCase(), path, spec });
    }
  }
  return out;
}

const sample = <T>(arb: fc.Arbitrary<T>, salt: number): T => fc.sample(arb, { numRuns: 1, seed: SEED + salt })[0] as T;

function paramSchemas(op: Op, where: 'path' | 'query'): Record<string, JsonSchema> {
  const out: Record<string, JsonSchema> = {};
  for (const p of op.spec.parameters ?? []) if (p.in === where) out[p.name] = { ...p.schema, required: p.required };
  return out;
}

function bodySchema(op: Op): JsonSchema | undefined {
  return op.spec.requestBody?.content?.['application/json']?.schema;
}

function buildUrl(op: Op, pathValues: Record<string, unknown>, query: Record<string, unknown>): string {
  let url = op.path.replace(/\{([^}]+)\}/g, (_, name) => encodeURIComponent(String(pathValues[name])));
  const qs = Object.entries(query)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  if (qs) url += `?${qs}`;
  return url;
}

interface Variant {
  name: string;
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
}

function variants(op: Op, salt: number): Variant[] {
  const pathSchemas = paramSchemas(op, 'path');
  const querySchemas = paramSchemas(op, 'query');
  const pathValues: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(pathSchemas))
    pathValues[name] = sample(arbitraryFor(schema), salt + name.length);
  const query: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(querySchemas)) {
    if (schema.required || sample(fc.boolean(), salt + 7))
      query[name] = sample(arbitraryFor(schema), salt + name.length * 3);
  }
  if ('cursor' in query) delete query.cursor; // cursors are opaque: only the API issues them
  const url = buildUrl(op, pathValues, query);
  const schema = bodySchema(op);
  const out: Variant[] = [];
  const body = schema ? (sample(arbitraryFor(schema), salt) as Record<string, unknown>) : undefined;
  out.push({ name: 'valid', url, ...(body !== undefined ? { body } : {}) });

  if (Object.keys(pathSchemas).length > 0) {
    const bad = Object.fromEntries(Object.keys(pathSchemas).map((k) => [k, 'not-a-uuid-☃']));
    out.push({ name: 'bad path id', url: buildUrl(op, bad, query), ...(body !== undefined ? { body } : {}) });
  }
  if (Object.keys(querySchemas).length > 0) {
    const first = Object.keys(querySchemas)[0] as string;
    out.push({
      name: 'wrong query type',
      url: buildUrl(op, pathValues, { ...query, [first]: '%%%' }),
      ...(body ? { body } : {}),
    });
  }
  if (schema && body && typeof body === 'object') {
    const props = Object.keys(schema.properties ?? {});
    const required: string[] = schema.required ?? [];
    if (required[0]) {
      const { [required[0]]: _dropped, ...rest } = body;
      out.push({ name: `missing ${required[0]}`, url, body: rest });
    }
    const field = props[salt % Math.max(1, props.length)];
    if (field) {
      out.push({
        name: `wrong type ${field}`,
        url,
        body: { ...body, [field]: wrongTypeFor(schema.properties[field]) },
      });
      out.push({ name: `null ${field}`, url, body: { ...body, [field]: null } });
      out.push({ name: `huge ${field}`, url, body: { ...body, [field]: 'x'.repeat(200_000) } });
    }
    out.push({ name: 'extra field', url, body: { ...body, unexpected_field: 'surprise' } });
    out.push({ name: 'malformed JSON', url, body: '{"broken": ', headers: { 'content-type': 'application/json' } });
    out.push({ name: 'wrong content type', url, body: 'a=b', headers: { 'content-type': 'text/plain' } });
    out.push({ name: 'array body', url, body: [body] });
  }
  return out;
}

function responseSchema(op: Op, status: number): JsonSchema | undefined {
  let response = op.spec.responses?.[String(status)];
  // A response declared once for many operations (`#/components/responses/Error404`).
  if (typeof response?.$ref === 'string') response = doc.components.responses[response.$ref.split('/').pop()];
  return response?.content?.['application/json']?.schema;
}

describe('fuzzing every operation from the OpenAPI document', () => {
  it('answers only documented statuses, bodies that match their schemas, and no 5xx', async () => {
    const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: true });
    addFormats.default(ajv);
    ajv.addSchema({ components: doc.components }, 'doc');
    const resolveRefs = (schema: JsonSchema) =>
      JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, '"doc#/components/'));
    const validators = new Map<string, ReturnType<Ajv['compile']>>();

    const ops = operations();
    expect(ops.length).toBeGreaterThan(10);
    let sent = 0;
    const statuses = new Map<number, number>();
    const failures: string[] = [];
    for (let run = 0; run < RUNS; run++) {
      for (const [index, op] of ops.entries()) {
        for (const variant of variants(op, run * 1000 + index)) {
          const r = await t.call({
            method: op.method as 'GET',
            url: variant.url,
            key,
            ...(variant.body !== undefined ? { body: variant.body } : {}),
            ...(variant.headers ? { headers: variant.headers } : {}),
          });
          sent++;
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          const where = `${op.method} ${variant.url.slice(0, 120)} [${variant.name}] → ${r.status}`;
          if (r.status >= 500) {
            failures.push(`${where}: server error ${r.text.slice(0, 200)}`);
            continue;
          }
          if (!op.spec.responses?.[String(r.status)]) {
            failures.push(
              `${where}: status not documented (${Object.keys(op.spec.responses ?? {}).join(',')}) ${r.text.slice(0, 160)}`,
            );
            continue;
          }
          const schema = responseSchema(op, r.status);
          if (schema && String(r.headers['content-type'] ?? '').includes('application/json')) {
            const id = `${op.method} ${op.path} ${r.status}`;
            let validate = validators.get(id);
            if (!validate) {
              validate = ajv.compile(resolveRefs(schema));
              validators.set(id, validate);
            }
            if (!validate(r.body)) {
              failures.push(`${where}: body does not match its schema: ${ajv.errorsText(validate.errors)}`);
            }
          }
        }
      }
    }
    console.log(
      `fuzz: ${sent} requests over ${ops.length} operations (seed ${SEED}, runs ${RUNS}); ${failures.length} failures; statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    for (const failure of failures.slice(0, 40)) console.log(`  ${failure}`);
    expect(failures).toEqual([]);
    // The generator reaches past validation: some requests succeed, and each error class shows up.
    expect([...statuses.keys()].filter((s) => s < 300).length).toBeGreaterThan(0);
    for (const status of [400, 404, 422]) expect(statuses.get(status) ?? 0).toBeGreaterThan(0);
  });

  it("after the fuzzing, no list shows another tenant's rows", async () => {
    for (const op of operations()) {
      if (op.method !== 'GET' || Object.keys(paramSchemas(op, 'path')).length > 0) continue;
      const mine = await t.call({ url: op.path, key });
      const theirs = await t.call({ url: op.path, key: otherKey });
      if (mine.body?.object !== 'list') continue;
      const myIds = new Set((mine.body.data as { id?: string }[]).map((row) => row.id).filter(Boolean));
      for (const row of theirs.body.data as { id?: string }[]) {
        expect(myIds.has(row.id as string), `${op.path} leaks ${row.id}`).toBe(false);
      }
    }
  });
});
