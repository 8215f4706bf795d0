// Workflows (spec: States, workflow enabled flag): created disabled, toggled with PUT .../enabled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let key: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ key } = await t.tenant(['workflows:write']));
});
afterAll(() => t.close());

describe('workflows', () => {
  it('are created disabled (201) with their fields', async () => {
    const r = await t.call({
      method: 'POST',
      url: '/api/v1/workflows',
      key,
      body: {
        name: 'refund_order',
        description: 'Refund an order',
        trigger_phrases: ['refund'],
        input_schema: { type: 'object', properties: { order_id: { type: 'string' } } },
      },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      object: 'workflow',
      name: 'refund_order',
      enabled: false,
      trigger_phrases: ['refund'],
    });
    expect(r.body.input_schema.properties.order_id.type).toBe('string');
  });

  it('PUT /workflows/{id}/enabled sets the flag to the sent boolean, and reading it shows the change', async () => {
    const wf = (await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'toggle' } })).body;
    const on = await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.id}/enabled`, key, body: { enabled: true } });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ id: wf.id, object: 'workflow', enabled: true });
    expect((await t.call({ url: `/api/v1/workflows/${wf.id}`, key })).body.enabled).toBe(true);
    const again = await t.call({
      method: 'PUT',
      url: `/api/v1/workflows/${wf.id}/enabled`,
      key,
      body: { enabled: true },
    });
    expect(again.body.enabled).toBe(true);
    // The current value again changes nothing, not even updated_at.
    expect(again.body.updated_at).toBe(on.body.updated_at);
    await new Promise((r) => setTimeout(r, 5));
    const off = await t.call({
      method: 'PUT',
      url: `/api/v1/workflows/${wf.id}/enabled`,
      key,
      body: { enabled: false },
    });
    expect(off.body.enabled).toBe(false);
    expect(off.body.updated_at > on.body.updated_at).toBe(true);
    const enabledOnly = await t.call({ url: '/api/v1/workflows?enabled=true', key });
    expect(enabledOnly.body.data.map((w: { id: string }) => w.id)).not.toContain(wf.id);
  });

  it('enabled is required and must be a boolean', async () => {
    const wf = (await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'strict' } })).body;
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.id}/enabled`, key, body: {} }),
      422,
      'missing_required_parameter',
      'enabled',
    );
    expectError(
      await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.id}/enabled`, key, body: { enabled: 1 } }),
      422,
      'validation_error',
      'enabled',
    );
  });

  it('an unknown workflow answers 404; a duplicate name 409; an invalid input_schema 422', async () => {
    expectError(
      await t.call({
        method: 'PUT',
        url: '/api/v1/workflows/00000000-0000-7000-8000-000000000000/enabled',
        key,
        body: { enabled: true },
      }),
      404,
      'not_found',
    );
    await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'dup' } });
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'dup' } }),
      409,
      'conflict',
      'name',
    );
    expectError(
      await t.call({
        method: 'POST',
        url: '/api/v1/workflows',
        key,
        body: { name: 'bad', input_schema: { type: 'nonsense' } },
      }),
      422,
      'validation_error',
      'input_schema',
    );
    // Ajv throws rather than answers for these: 422 all the same, never 500.
    for (const schema of [
      { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' },
      { $schema: 5 },
      { $id: 5 },
      { $ref: '#/definitions/missing' },
      // Ajv would compile it to a validator answering a promise, which passes anything.
      { $async: true, type: 'object', required: ['order'] },
    ]) {
      const r = await t.call({
        method: 'POST',
        url: '/api/v1/workflows',
        key,
        body: { name: 'odd', input_schema: schema },
      });
      expectError(r, 422, 'validation_error', 'input_schema');
      expect(r.body.error.message).toMatch(/^input_schema is not a JSON Schema \(draft-07\) this API can use: ./);
    }
    // The same $id twice is fine: a checked schema leaves nothing behind.
    for (const name of ['first-with-id', 'second-with-id']) {
      const r = await t.call({
        method: 'POST',
        url: '/api/v1/workflows',
        key,
        body: { name, input_schema: { $id: 'https://example.com/order', type: 'object' } },
      });
      expect(r.status).toBe(201);
    }
  });

  it("a schema's $id is its own: naming Ajv's meta-schema or another's $id changes no other check", async () => {
    const create = (name: string, input_schema: unknown) =>
      t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name, input_schema } });
    // The id of JSON Schema draft-07 itself: the check must not drop the meta-schema it relies on.
    const meta = await create('meta-id', { $id: 'http://json-schema.org/draft-07/schema#', type: 'object' });
    expect(meta.status).toBe(201);
    expect((await create('after-meta-id', { type: 'object' })).status).toBe(201);
    expectError(await create('after-meta-id-bad', { type: 'nonsense' }), 422, 'validation_error', 'input_schema');
  });

  it('an input_schema must describe an object: the arguments of a call always are one', async () => {
    const r = await t.call({
      method: 'POST',
      url: '/api/v1/workflows',
      key,
      body: { name: 'stringly', input_schema: { type: 'string' } },
    });
    expectError(r, 422, 'validation_error', 'input_schema');
    expect(r.body.error.message).toBe('input_schema must describe an object.');
  });

  it('delete answers the deleted acknowledgement, then 404', async () => {
    const wf = (await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'gone' } })).body;
    const r = await t.call({ method: 'DELETE', url: `/api/v1/workflows/${wf.id}`, key });
    expect(r.body).toEqual({ id: wf.id, object: 'deleted', deleted: true });
    expectError(await t.call({ url: `/api/v1/workflows/${wf.id}`, key }), 404, 'not_found');
  });
});
