// The `openai` provider against a scripted OpenAI-compatible chat-completions server started by
// this test (node:http): streamed text, tool call round trips (workflow, client function with
// pause and continue, handoff), an error answer, an error inside the stream, a timeout, a server
// that does not stream, and one turn at a time while the model is slow. Like api.openai.com, the
// server refuses a function name outside ^[a-zA-Z0-9_-]{1,64}$.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createParser } from 'eventsource-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatMessages } from '../../src/domain/agent/openai-provider.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

// biome-ignore lint/suspicious/noExplicitAny: recorded request bodies are read loosely.
type Json = any;
type Script = (res: ServerResponse) => void | Promise<void>;

let t: TestApp;
let llm: Server;
const queue: Script[] = [];
const requests: { headers: IncomingMessage['headers']; body: Json }[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A streamed completion: each chunk a `data:` frame, then `[DONE]`. */
const streamed =
  (chunks: object[], delayMs = 5): Script =>
  async (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const chunk of chunks) {
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      await sleep(delayMs);
    }
    res.end('data: [DONE]\n\n');
  };

const text = (...parts: string[]) =>
  streamed([
    ...parts.map((content, i) => ({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content } : { content }, finish_reason: null }],
    })),
    { id: 'chatcmpl-1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
  ]);

/** Tool calls streamed as OpenAI does: the name first, the arguments in fragments. */
const toolCalls = (...calls: { name: string; args: string }[]) =>
  streamed([
    ...calls.flatMap((call, index) => [
      {
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [
                { index, id: `model_call_${index}`, type: 'function', function: { name: call.name, arguments: '' } },
              ],
            },
          },
        ],
      },
      {
        choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: call.args.slice(0, 5) } }] } }],
      },
      { choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: call.args.slice(5) } }] } }] },
    ]),
    { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
  ]);

const failing =
  (status: number, body: object): Script =>
  (res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

beforeAll(async () => {
  llm = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw);
      requests.push({ headers: req.headers, body });
      const names: string[] = [
        ...(body.tools ?? []).map((tool: Json) => tool.function.name),
        ...body.messages.flatMap((m: Json) => (m.tool_calls ?? []).map((call: Json) => call.function.name)),
      ];
      const bad = names.find((name) => !/^[a-zA-Z0-9_-]{1,64}$/.test(name));
      if (bad !== undefined) {
        failing(400, { error: { message: `Invalid function name '${bad}'.`, type: 'invalid_request_error' } })(res);
        return;
      }
      const script = queue.shift() ?? text('default answer');
      Promise.resolve(script(res)).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => llm.listen(0, '127.0.0.1', resolve));
  const port = (llm.address() as AddressInfo).port;
  t = await startTestApp({
    LLM_BASE_URL: `http://127.0.0.1:${port}/v1`,
    LLM_API_KEY: 'sk-test-123',
    LLM_MODEL: 'test-model',
    LLM_TIMEOUT_MS: '1000',
  });
});
afterAll(async () => {
  await t.close();
  llm.closeAllConnections();
  await new Promise((resolve) => llm.close(resolve));
});

const send = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  t.call({ method: 'POST', url: '/api/v1/messages', key, body, headers });
const post = (key: string, url: string, body?: unknown) => t.call({ method: 'POST', url, key, body });

function events(payload: string) {
  const out: { event: string; data: Json }[] = [];
  const parser = createParser({
    onEvent: (e) => {
      out.push({ event: e.event ?? 'message', data: JSON.parse(e.data) });
    },
  });
  parser.feed(payload);
  return out;
}

/** Runs `act` with a clean request log and returns the requests the model server received. */
async function recording<T>(act: () => Promise<T>): Promise<{ result: T; calls: { headers: Json; body: Json }[] }> {
  requests.length = 0;
  const result = await act();
  return { result, calls: [...requests] };
}

const WEATHER = {
  name: 'get_weather',
  description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
};

describe('openai provider', () => {
  it('streams the model text as deltas, sends the passages and history, and cites the passages it uses', async () => {
    const { tenantId, key } = await t.tenant();
    const doc = await t.services.documents.create(tenantId, {
      title: 'Refund policy',
      content: 'Refunds are possible within 30 days of purchase.',
    });
    queue.push(text('You can get a refund ', 'within 30 days [1].'));
    const { result, calls } = await recording(() =>
      send(key, { content: 'What is the refund policy?' }, { accept: 'text/event-stream' }),
    );
    expect(result.status).toBe(200);
    const stream = events(result.text);
    expect(stream.filter((e) => e.event === 'message.delta').map((e) => e.data.delta)).toEqual([
      'You can get a refund ',
      'within 30 days [1].',
    ]);
    const done = stream.at(-1);
    expect(done?.event).toBe('done');
    expect(done?.data.status).toBe('COMPLETED');
    expect(done?.data.message.content).toBe('You can get a refund within 30 days [1].');
    expect(done?.data.message.citations).toEqual([expect.objectContaining({ document_id: doc.id })]);
    expect(stream.some((e) => e.event === 'citation' && e.data.citation.document_id === doc.id)).toBe(true);

    expect(calls).toHaveLength(1);
    const request = calls[0] as { headers: Json; body: Json };
    expect(request.headers.authorization).toBe('Bearer sk-test-123');
    expect(request.body).toMatchObject({ model: 'test-model', stream: true });
    expect(request.body.tools).toBeUndefined();
    expect(request.body.messages[0].role).toBe('system');
    expect(request.body.messages[0].content).toContain('[1] Refund policy');
    expect(request.body.messages.at(-1)).toEqual({ role: 'user', content: 'What is the refund policy?' });

    // The next turn sees the conversation so far.
    const next = await recording(() =>
      send(key, { content: 'And after 30 days?', conversation_id: done?.data.conversation_id }),
    );
    expect(next.result.body.status).toBe('COMPLETED');
    const messages = (next.calls[0] as { body: Json }).body.messages.slice(1);
    expect(messages).toEqual([
      { role: 'user', content: 'What is the refund policy?' },
      { role: 'assistant', content: 'You can get a refund within 30 days [1].' },
      { role: 'user', content: 'And after 30 days?' },
    ]);
  });

  it('round-trips a workflow tool call: the model calls it, the server runs it, the model gets its output', async () => {
    const { tenantId, key } = await t.tenant();
    const wf = await post(key, '/api/v1/workflows', {
      name: 'lookup_order',
      description: 'Finds an order',
      input_schema: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
    });
    await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
    queue.push(toolCalls({ name: 'lookup_order', args: '{"order":"A-7"}' }), text('Your order A-7 is on its way.'));
    const { result, calls } = await recording(() => send(key, { content: 'Where is my order A-7?' }));
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ status: 'COMPLETED', content: 'Your order A-7 is on its way.' });
    expect(result.body.function_calls).toEqual([
      expect.objectContaining({
        name: 'lookup_order',
        type: 'workflow',
        arguments: { order: 'A-7' },
        status: 'completed',
      }),
    ]);
    const callId = result.body.function_calls[0].call_id;

    expect(calls).toHaveLength(2);
    const [first, second] = calls as { body: Json }[];
    expect(first?.body.tools).toEqual([
      {
        type: 'function',
        function: { name: 'lookup_order', description: 'Finds an order', parameters: wf.body.input_schema },
      },
    ]);
    const tail = second?.body.messages.slice(-2);
    expect(tail[0]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: callId, type: 'function', function: { name: 'lookup_order', arguments: '{"order":"A-7"}' } }],
    });
    expect(tail[1].role).toBe('tool');
    expect(tail[1].tool_call_id).toBe(callId);
    expect(JSON.parse(tail[1].content)).toMatchObject({ workflow: 'lookup_order', arguments: { order: 'A-7' } });

    const runs = await t.database.db
      .selectFrom('workflow_runs')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(runs.map((r) => [r.workflow_name, r.call_id, r.arguments])).toEqual([
      ['lookup_order', callId, { order: 'A-7' }],
    ]);
  });

  it('offers workflows by names the API accepts and maps the calls back to the workflow', async () => {
    const { tenantId, key } = await t.tenant();
    const long = `Look up ${'the order '.repeat(8)}now`;
    for (const name of ['Refund order', 'Refund_order', long]) {
      const wf = await post(key, '/api/v1/workflows', { name });
      await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
    }
    // A name the API accepts is kept; another becomes one, with a suffix when that is taken.
    queue.push(toolCalls({ name: 'Refund_order_2', args: '{"order":"A-7"}' }), text('Refunded.'));
    const { result, calls } = await recording(() => send(key, { content: 'Refund A-7 please' }));
    expect(result.body).toMatchObject({ status: 'COMPLETED', content: 'Refunded.' });
    expect(result.body.function_calls).toEqual([
      expect.objectContaining({ name: 'Refund order', type: 'workflow', arguments: { order: 'A-7' } }),
    ]);
    const callId = result.body.function_calls[0].call_id;
    const [first, second] = calls as { body: Json }[];
    expect(first?.body.tools.map((tool: Json) => tool.function.name).sort()).toEqual([
      `Look_up_${'the_order_'.repeat(5)}the_or`,
      'Refund_order',
      'Refund_order_2',
    ]);
    expect(second?.body.messages.at(-2).tool_calls).toEqual([
      { id: callId, type: 'function', function: { name: 'Refund_order_2', arguments: '{"order":"A-7"}' } },
    ]);
    const runs = await t.database.db
      .selectFrom('workflow_runs')
      .select(['workflow_name', 'call_id'])
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(runs).toEqual([{ workflow_name: 'Refund order', call_id: callId }]);
  });

  it('pauses on a client function call and continues with the results, functions and context sent with continue', async () => {
    const { key } = await t.tenant();
    queue.push(toolCalls({ name: 'get_weather', args: '{"city":"Oslo"}' }));
    const paused = await send(key, {
      content: 'Weather in Oslo?',
      client_functions: [WEATHER],
      client_functions_mode: 'pause',
      context: { page: '/a' },
    });
    expect(paused.body.status).toBe('WAITING_CLIENT');
    expect(paused.body.function_calls).toEqual([
      expect.objectContaining({ name: 'get_weather', type: 'client', arguments: { city: 'Oslo' }, status: 'pending' }),
    ]);
    const callId = paused.body.function_calls[0].call_id;
    await post(key, `/api/v1/messages/${paused.body.id}/function-results`, {
      results: [{ call_id: callId, output: 'snow' }],
    });
    queue.push(text('It is snowing in Oslo.'));
    const OPEN_CART = { name: 'open_cart', description: 'Opens the cart', parameters: { type: 'object' } };
    const { result, calls } = await recording(() =>
      post(key, `/api/v1/messages/${paused.body.id}/continue`, {
        client_functions: [WEATHER, OPEN_CART],
        context: { page: '/b' },
      }),
    );
    expect(result.body).toMatchObject({ status: 'COMPLETED', content: 'It is snowing in Oslo.' });
    const body = (calls[0] as { body: Json }).body;
    expect(body.tools.map((tool: Json) => tool.function.name)).toEqual(['get_weather', 'open_cart']);
    expect(body.messages[0].content).toContain('{"page":"/b"}');
    expect(body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: callId, content: '"snow"' });
  });

  it('a turn paused twice refuses a new result for a call its first step already used (409)', async () => {
    const { key } = await t.tenant();
    const TIME = { name: 'get_time', description: 'Local time', parameters: { type: 'object' } };
    queue.push(toolCalls({ name: 'get_weather', args: '{"city":"Oslo"}' }));
    const paused = await send(key, {
      content: 'Weather and time in Oslo?',
      client_functions: [WEATHER, TIME],
      client_functions_mode: 'pause',
    });
    const weather = paused.body.function_calls[0].call_id;
    const results = (results: object[]) =>
      post(key, `/api/v1/messages/${paused.body.id}/function-results`, { results });
    expect((await results([{ call_id: weather, output: 'snow' }])).status).toBe(200);
    // Until the turn uses it, a result may be replaced.
    expect((await results([{ call_id: weather, output: 'heavy snow' }])).status).toBe(200);
    queue.push(toolCalls({ name: 'get_time', args: '{"zone":"CET"}' }));
    const second = await post(key, `/api/v1/messages/${paused.body.id}/continue`, {});
    expect(second.body.status).toBe('WAITING_CLIENT');
    const time = second.body.function_calls[1].call_id;

    expectError(await results([{ call_id: weather, output: 'TAMPERED' }]), 409, 'conflict', 'results[0].call_id');
    expect((await results([{ call_id: time, output: '14:05' }])).status).toBe(200);
    queue.push(text('Snowy, and it is 14:05.'));
    const { result, calls } = await recording(() => post(key, `/api/v1/messages/${paused.body.id}/continue`, {}));
    expect(result.body.status).toBe('COMPLETED');
    expect(result.body.function_calls.map((c: Json) => c.output)).toEqual(['heavy snow', '14:05']);
    const toolMessages = (calls[0] as { body: Json }).body.messages.filter((m: Json) => m.role === 'tool');
    expect(toolMessages.map((m: Json) => m.content)).toEqual(['"heavy snow"', '"14:05"']);
  });

  it('a model answer the database cannot store (a NUL character) ends the turn FAILED, not in progress', async () => {
    const { key } = await t.tenant();
    queue.push(text('half \u0000 written'));
    const sent = await send(key, { content: 'hello' });
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({ status: 'FAILED', error: { code: 'internal_error' } });
    expect(sent.body.error.message).toMatch(/could not be stored; it was logged \(event [0-9a-f-]{36}\)/);
    const conversation = await t.call({ url: `/api/v1/conversations/${sent.body.conversation_id}`, key });
    expect(conversation.body.turn_in_progress).toBe(false);
    queue.push(text('Fine now.'));
    const next = await send(key, { content: 'again', conversation_id: sent.body.conversation_id });
    expect(next.body).toMatchObject({ status: 'COMPLETED', content: 'Fine now.' });
  });

  it('hands off through the transfer_to_agent tool and records a ticket', async () => {
    const { tenantId, key } = await t.tenant();
    const billing = await post(key, '/api/v1/agents', { name: 'Billing' });
    const front = await post(key, '/api/v1/agents', { name: 'Front', handoff_agent_ids: [billing.body.id] });
    queue.push(
      toolCalls({ name: 'transfer_to_agent', args: '{"agent_name":"Billing"}' }),
      text('Billing will help you.'),
    );
    const { result, calls } = await recording(() => send(key, { content: 'invoice problem', agent_id: front.body.id }));
    expect(result.body).toMatchObject({ status: 'COMPLETED', content: 'Billing will help you.', function_calls: [] });
    expect(result.body.handoff).toMatchObject({ agent_id: billing.body.id, agent_name: 'Billing' });
    const tool = (calls[0] as { body: Json }).body.tools.find((x: Json) => x.function.name === 'transfer_to_agent');
    expect(tool.function.parameters.properties.agent_name.enum).toEqual(['Billing']);
    const tickets = await t.database.db.selectFrom('tickets').selectAll().where('tenant_id', '=', tenantId).execute();
    expect(tickets).toHaveLength(1);
    expect(tickets[0]?.to_agent_id).toBe(billing.body.id);
  });

  it('an error answer ends the turn FAILED with the reason (never a 500), and frees the conversation', async () => {
    const { key } = await t.tenant();
    queue.push(failing(503, { error: { message: 'model overloaded', type: 'server_error' } }));
    const sent = await send(key, { content: 'hello' });
    expect(sent.status).toBe(200);
    expect(sent.body.status).toBe('FAILED');
    expect(sent.body.error).toEqual({
      code: 'provider_error',
      message: 'The language model server answered 503: model overloaded',
    });

    queue.push(failing(401, { error: { message: 'invalid api key' } }));
    const streamedFailure = await send(
      key,
      { content: 'again', conversation_id: sent.body.conversation_id },
      { accept: 'text/event-stream' },
    );
    expect(streamedFailure.status).toBe(200);
    const done = events(streamedFailure.text).at(-1);
    expect(done?.event).toBe('done');
    expect(done?.data).toMatchObject({ status: 'FAILED', error: { code: 'provider_error' } });
    expect(done?.data.error.message).toContain('invalid api key');

    const stored = await t.call({ url: `/api/v1/messages/${sent.body.id}`, key });
    expect(stored.body.status).toBe('FAILED');
    const after = await send(key, { content: 'third', conversation_id: sent.body.conversation_id });
    expect(after.body.status).toBe('COMPLETED');
  });

  it('an error inside the stream ends the turn FAILED', async () => {
    const { key } = await t.tenant();
    queue.push(
      streamed([{ choices: [{ index: 0, delta: { content: 'Hal' } }] }, { error: { message: 'stream broke' } }]),
    );
    const sent = await send(key, { content: 'hello' });
    expect(sent.body.status).toBe('FAILED');
    expect(sent.body.error.message).toContain('stream broke');
  });

  it('a model that does not answer in LLM_TIMEOUT_MS ends the turn FAILED with provider_timeout', async () => {
    const { key } = await t.tenant();
    queue.push(() => {
      /* never answers */
    });
    const started = Date.now();
    const sent = await send(key, { content: 'hello' });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(sent.body.status).toBe('FAILED');
    expect(sent.body.error).toEqual({
      code: 'provider_timeout',
      message: 'The language model did not answer within 1000 ms.',
    });
  });

  it('accepts a server that answers with one JSON completion instead of a stream', async () => {
    const { key } = await t.tenant();
    queue.push((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'plain answer' } }] }));
    });
    const sent = await send(key, { content: 'hello' });
    expect(sent.body).toMatchObject({ status: 'COMPLETED', content: 'plain answer' });
  });

  it('while the model is slow, a second message to the conversation is refused with 409', async () => {
    const { key } = await t.tenant();
    const first = await send(key, { content: 'start' });
    queue.push(
      streamed(
        [
          { choices: [{ index: 0, delta: { content: 'slow ' } }] },
          { choices: [{ index: 0, delta: { content: 'answer' } }] },
        ],
        400,
      ),
    );
    const [a, b] = await Promise.all([
      send(key, { content: 'one', conversation_id: first.body.conversation_id }),
      (async () => {
        await sleep(100);
        return send(key, { content: 'two', conversation_id: first.body.conversation_id });
      })(),
    ]);
    expect(a.body).toMatchObject({ status: 'COMPLETED', content: 'slow answer' });
    expectError(b, 409, 'conflict');
  });
});

describe('tool names in the history sent', () => {
  it('an earlier call of a tool no longer offered never takes the name of one offered now', () => {
    const offered = { description: 'd', parameters: { type: 'object' }, type: 'client' as const };
    const messages = chatMessages({
      instructions: null,
      agentName: 'Agent',
      history: [],
      items: [
        { type: 'input', author: 'customer', content: 'Refund me.' },
        { type: 'assistant', text: '', calls: [{ call_id: 'c1', name: 'Refund order', arguments: {} }] },
        { type: 'result', call_id: 'c1', name: 'Refund order', output: 'done' },
      ],
      // The workflow `Refund order` is gone; a client function now goes by its safe name.
      tools: [{ name: 'Refund_order', ...offered }],
      passages: [],
      handoffAgents: [],
      context: null,
      language: null,
      onDelta: () => {},
      signal: new AbortController().signal,
    });
    const called = messages.flatMap((m) => m.tool_calls ?? []).map((c) => c.function.name);
    expect(called).toEqual(['Refund_order_2']);
  });
});
