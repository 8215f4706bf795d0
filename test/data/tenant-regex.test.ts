// Regular expressions that clients write into JSON Schemas (a workflow's input_schema, a client
// function's parameters) run on a linear-time engine: a message written to hold the event loop
// with a backtracking pattern does not, and a pattern that engine cannot run is refused when the
// schema is sent (docs/agent.md, "Patterns in schemas").
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
let key: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ key } = await t.tenant());
});
afterAll(() => t.close());

/** A backtracking engine takes time doubling with each `a` before the `!` for this pattern. */
const CATASTROPHIC = '^(a+)+$';
// Some 20 s of V8's backtracking (a pattern's first run is interpreted): decisive on a fast
// machine, yet finite.
const ATTACK = `${'a'.repeat(28)}!`;
/** The longest the event loop may stall during one request here. */
const MAX_BLOCK_MS = 500;

/** Runs `request`, answering its result and the longest stall of the event loop meanwhile. */
async function timed<T>(request: () => Promise<T>): Promise<{ result: T; blockedMs: number }> {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  try {
    const result = await request();
    return { result, blockedMs: delay.max / 1e6 };
  } finally {
    delay.disable();
  }
}

async function enabledWorkflow(name: string, input_schema: Record<string, unknown>): Promise<void> {
  const created = await t.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name, input_schema } });
  expect(created.status).toBe(201);
  const on = await t.call({
    method: 'PUT',
    url: `/api/v1/workflows/${created.body.id}/enabled`,
    key,
    body: { enabled: true },
  });
  expect(on.status).toBe(200);
}

const send = (body: Record<string, unknown>) => t.call({ method: 'POST', url: '/api/v1/messages', key, body });

describe('patterns in client schemas', () => {
  it("a workflow's backtracking pattern cannot hold the event loop: the call fails its check at once", async () => {
    await enabledWorkflow('redos_flow', {
      type: 'object',
      properties: { a: { type: 'string', pattern: CATASTROPHIC } },
    });
    const { result, blockedMs } = await timed(() => send({ content: `please run redos flow a='${ATTACK}'` }));
    expect(result.status).toBe(200);
    expect(result.body.function_calls[0]).toMatchObject({ name: 'redos_flow', type: 'workflow', status: 'failed' });
    expect(result.body.function_calls[0].output.error).toMatch(/must match pattern/);
    expect(blockedMs).toBeLessThan(MAX_BLOCK_MS);
  }, 120_000);

  it('patternProperties run on the same engine: a backtracking key pattern cannot hold the event loop', async () => {
    // Its own pattern: V8 would share the one above, already compiled to native code, and faster.
    await enabledWorkflow('redos_keys', {
      type: 'object',
      patternProperties: { '^(b+)+$': { type: 'string' } },
      additionalProperties: { type: 'number' },
    });
    const attackKey = `${'b'.repeat(28)}-`;
    const { result, blockedMs } = await timed(() => send({ content: `run redos keys ${attackKey}=x` }));
    expect(result.status).toBe(200);
    // The key does not match the pattern, so additionalProperties applies: "x" is no number.
    expect(result.body.function_calls[0]).toMatchObject({ name: 'redos_keys', status: 'failed' });
    expect(blockedMs).toBeLessThan(MAX_BLOCK_MS);
  }, 120_000);

  it('each pattern is its own, and searches anywhere in the value (JSON Schema patterns are not anchored)', async () => {
    await enabledWorkflow('find_order', {
      type: 'object',
      properties: { ref: { type: 'string', pattern: '[0-9]{3}' } },
    });
    const found = await send({ content: 'find order ref=A-123-B' });
    expect(found.body.function_calls[0]).toMatchObject({ name: 'find_order', status: 'completed' });
    const missed = await send({ content: 'find order ref=A-12-B' });
    expect(missed.body.function_calls[0]).toMatchObject({ name: 'find_order', status: 'failed' });
  });

  it('a pattern the linear-time engine cannot run as written (backreference, lookaround, half a character) is refused with 422 naming the field', async () => {
    for (const pattern of ['(a)\\1', '(?<x>a)\\k<x>', '(?=a)a', '(?<!a)b', '^\\uD83D\\uDE00$']) {
      const workflow = await t.call({
        method: 'POST',
        url: '/api/v1/workflows',
        key,
        body: { name: 'backref', input_schema: { type: 'object', properties: { a: { type: 'string', pattern } } } },
      });
      const error = expectError(workflow, 422, 'validation_error', 'input_schema');
      expect(error.message).toMatch(/is not supported: patterns run on a linear-time engine/);
      expect(error.message).toMatch(/no backreferences or lookaround/);

      const message = await send({
        content: 'hello',
        client_functions: [
          { name: 'backref', parameters: { type: 'object', patternProperties: { [pattern]: { type: 'string' } } } },
        ],
      });
      expectError(message, 422, 'validation_error', 'client_functions[0].parameters');
    }
    const list = await t.call({ url: '/api/v1/workflows', key });
    expect(list.body.data.map((w: { name: string }) => w.name)).not.toContain('backref');
  });

  it('a schema whose patterns would compile to too large a program is refused, without holding the loop', async () => {
    const pattern = 'a{1000}'.repeat(25);
    const { result, blockedMs } = await timed(() =>
      t.call({
        method: 'POST',
        url: '/api/v1/workflows',
        key,
        body: { name: 'huge', input_schema: { type: 'object', properties: { a: { type: 'string', pattern } } } },
      }),
    );
    const error = expectError(result, 422, 'validation_error', 'input_schema');
    expect(error.message).toMatch(/is not supported: .*expands to about 25000 instructions, more than the 20000/);
    expect(blockedMs).toBeLessThan(MAX_BLOCK_MS);
  });
});
