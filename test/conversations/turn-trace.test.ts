// The trace of an agent turn (docs/agent.md, "The trace of a turn"): what the built-in and the
// `openai` provider (a scripted OpenAI-compatible server started here, reporting `usage`) leave in
// GET /messages/{id}/trace — the question as searched, the candidates with their ranks, each
// provider call with tokens and cost, function calls with their outcome, the decision, the
// latency — and the rules around it: scope and tenant isolation, deletion with the conversation,
// no secret and (unless TRACE_PROMPTS) no prompt stored, simulations and the dashboard report.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNKNOWN_ANSWER } from '../../src/domain/agent/builtin-provider.js';
import { registry } from '../../src/observability/metrics.js';
import { setTracer } from '../../src/observability/tracing.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

// biome-ignore lint/suspicious/noExplicitAny: recorded request bodies are read loosely.
type Json = any;
type Script = (req: IncomingMessage, res: ServerResponse, body: Json) => void;

const API_KEY = 'sk-trace-secret-4242';
const PRICES = JSON.stringify({ 'trace-model': { input_per_1k: 0.5, output_per_1k: 2 } });

let builtin: TestApp;
let llm: Server;
let openai: TestApp;
let openaiWithPrompts: TestApp;
const queue: Script[] = [];
/** The bodies the model server received, last last. */
const received: Json[] = [];

/** A streamed completion whose last chunk carries `usage`, as OpenAI sends with `include_usage`. */
const streamedText =
  (content: string, usage = { prompt_tokens: 1200, completion_tokens: 300 }): Script =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: 'assistant', content } }] })}\n\n`);
    res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
    res.write(`data: ${JSON.stringify({ choices: [], usage: { ...usage, total_tokens: 0 } })}\n\n`);
    res.end('data: [DONE]\n\n');
  };

/** One JSON completion calling a tool, with `usage`. */
const toolCall =
  (name: string, args: object): Script =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        choices: [
          {
            message: {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'c1', type: 'function', function: { name, arguments: JSON.stringify(args) } }],
            },
            finish_reason: 'tool_calls',
          },
        ],
        usage: { prompt_tokens: 100, completion_tokens: 10 },
      }),
    );
  };

/** An error answer quoting the key it was sent, as a careless proxy might. */
const echoKey: Script = (req, res) => {
  res.writeHead(401, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message: `Bad key ${req.headers.authorization}` } }));
};

beforeAll(async () => {
  llm = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw);
      received.push(body);
      const script = queue.shift() ?? streamedText('default answer');
      script(req, res, body);
    });
  });
  await new Promise<void>((resolve) => llm.listen(0, '127.0.0.1', resolve));
  const llmEnv = {
    LLM_BASE_URL: `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`,
    LLM_API_KEY: API_KEY,
    LLM_MODEL: 'trace-model',
    LLM_TIMEOUT_MS: '20000',
    MODEL_PRICES: PRICES,
  };
  builtin = await startTestApp({ CLIENT_FUNCTION_TIMEOUT_MS: '20000' });
  openai = await startTestApp(llmEnv);
  openaiWithPrompts = await startTestApp({ ...llmEnv, TRACE_PROMPTS: 'true' });
}, 120_000);

afterAll(async () => {
  await Promise.all([builtin?.close(), openai?.close(), openaiWithPrompts?.close()]);
  llm?.closeAllConnections();
  await new Promise((resolve) => llm?.close(resolve));
});

const send = (app: TestApp, key: string, body: unknown) =>
  app.call({ method: 'POST', url: '/api/v1/messages', key, body });
const traceOf = (app: TestApp, key: string, messageId: string) =>
  app.call({ url: `/api/v1/messages/${messageId}/trace`, key });

async function withDocuments(app: TestApp) {
  const tenant = await app.tenant();
  for (const doc of [
    { title: 'Refund policy', content: 'Refunds are processed within 14 days of receiving the returned item.' },
    { title: 'Shipping times', content: 'Standard shipping takes 3 to 5 business days.' },
  ]) {
    expect((await app.call({ method: 'POST', url: '/api/v1/documents', key: tenant.key, body: doc })).status).toBe(201);
  }
  return tenant;
}

describe('the trace of a built-in turn', () => {
  it('records the question, the candidates with their ranks, the call, the answer and its latency', async () => {
    const { key } = await withDocuments(builtin);
    const sent = await send(builtin, key, { content: 'How long do refunds take?' });
    expect(sent.status).toBe(200);
    const trace = await traceOf(builtin, key, sent.body.id);
    expect(trace.status).toBe(200);
    const body = trace.body;
    expect(body).toMatchObject({
      object: 'message_trace',
      message_id: sent.body.id,
      conversation_id: sent.body.conversation_id,
      agent_id: sent.body.agent_id,
      status: 'COMPLETED',
      provider: 'builtin',
      model: 'builtin',
      question: 'How long do refunds take?',
      input_tokens: 0,
      output_tokens: 0,
      cost: null,
      prompts_stored: false,
    });
    expect(body.search.question).toBe('How long do refunds take?');
    expect(body.search.threshold).toBeGreaterThan(0);
    const refund = body.search.candidates.find((c: Json) => c.title === 'Refund policy');
    expect(refund).toMatchObject({ used: true, cited: true });
    expect(refund.rank).toBeGreaterThanOrEqual(body.search.threshold);
    expect(body.provider_calls).toHaveLength(1);
    expect(body.provider_calls[0]).toMatchObject({
      step: 1,
      provider: 'builtin',
      status: 'completed',
      input_tokens: 0,
      output_tokens: 0,
      usage_reported: false,
      cost: null,
      prompt: null,
    });
    expect(body.decision).toMatchObject({
      type: 'answer',
      knowledge_gap_recorded: false,
      cited_document_ids: [refund.document_id],
    });
    expect(body.latency_ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(body.ended_at)).toBeGreaterThanOrEqual(Date.parse(body.started_at));
  });

  it('records a declined question as a decline with its knowledge gap', async () => {
    const { key } = await builtin.tenant();
    const sent = await send(builtin, key, { content: 'Do you sell gift cards?' });
    expect(sent.body.content).toBe(UNKNOWN_ANSWER);
    const { body } = await traceOf(builtin, key, sent.body.id);
    expect(body.search.candidates).toEqual([]);
    expect(body.decision).toMatchObject({ type: 'decline', knowledge_gap_recorded: true, cited_document_ids: [] });
  });

  it('records a client function call across a pause and its continue, with its duration', async () => {
    const { key } = await builtin.tenant();
    const paused = await send(builtin, key, {
      content: 'get_order order=A-7',
      client_functions: [
        { name: 'get_order', parameters: { type: 'object', properties: { order: { type: 'string' } } } },
      ],
      client_functions_mode: 'pause',
    });
    expect(paused.body.status).toBe('WAITING_CLIENT');
    const callId = paused.body.function_calls[0].call_id;
    const partial = await traceOf(builtin, key, paused.body.id);
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ status: 'WAITING_CLIENT', ended_at: null });
    expect(partial.body.decision.type).toBe('waiting_client');
    expect(partial.body.function_calls).toEqual([
      expect.objectContaining({
        call_id: callId,
        name: 'get_order',
        type: 'client',
        status: 'pending',
        duration_ms: null,
      }),
    ]);
    const results = await builtin.call({
      method: 'POST',
      url: `/api/v1/messages/${paused.body.id}/function-results`,
      key,
      body: { results: [{ call_id: callId, output: { state: 'shipped' } }] },
    });
    expect(results.status).toBe(200);
    const resumed = await builtin.call({ method: 'POST', url: `/api/v1/messages/${paused.body.id}/continue`, key });
    expect(resumed.body.status).toBe('COMPLETED');
    const { body } = await traceOf(builtin, key, paused.body.id);
    expect(body.status).toBe('COMPLETED');
    expect(body.function_calls).toEqual([
      expect.objectContaining({ call_id: callId, type: 'client', status: 'completed', overridden: false }),
    ]);
    expect(body.function_calls[0].duration_ms).toBeGreaterThanOrEqual(0);
    expect(body.provider_calls.map((c: Json) => c.step)).toEqual([1, 2]);
    expect(body.provider_calls[0].tool_calls).toEqual(['get_order']);
    expect(body.decision.type).toBe('answer');
    expect(body.latency_ms).toBeGreaterThanOrEqual(partial.body.latency_ms);
  });

  it('records a workflow run and a handoff', async () => {
    const { key } = await builtin.tenant();
    const wf = await builtin.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'check_stock' } });
    await builtin.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
    const ran = await send(builtin, key, { content: 'check_stock please' });
    const workflowTrace = (await traceOf(builtin, key, ran.body.id)).body;
    expect(workflowTrace.function_calls).toEqual([
      expect.objectContaining({ name: 'check_stock', type: 'workflow', status: 'completed', error: null }),
    ]);
    expect(workflowTrace.function_calls[0].duration_ms).toBeGreaterThanOrEqual(0);

    const billing = await builtin.call({ method: 'POST', url: '/api/v1/agents', key, body: { name: 'Billing' } });
    const front = await builtin.call({
      method: 'POST',
      url: '/api/v1/agents',
      key,
      body: { name: 'Front', handoff_agent_ids: [billing.body.id] },
    });
    const handed = await send(builtin, key, { content: 'I want Billing', agent_id: front.body.id });
    const handoffTrace = (await traceOf(builtin, key, handed.body.id)).body;
    expect(handoffTrace.decision).toMatchObject({
      type: 'handoff',
      handoff: { agent_id: billing.body.id, agent_name: 'Billing', ticket_id: handed.body.handoff.ticket_id },
    });
  });
});

describe('the trace endpoint', () => {
  it('needs conversations:read, and answers 404 for another workspace, a customer message and an unknown id', async () => {
    const { tenantId, key } = await builtin.tenant();
    const sent = await send(builtin, key, { content: 'Hello' });
    const stranger = await builtin.key(tenantId, ['knowledge:read', 'agents:read']);
    expectError(await traceOf(builtin, stranger, sent.body.id), 403, 'insufficient_scope');
    const reader = await builtin.key(tenantId, ['conversations:read']);
    expect((await traceOf(builtin, reader, sent.body.id)).status).toBe(200);

    const other = await builtin.tenant();
    expectError(await traceOf(builtin, other.key, sent.body.id), 404, 'not_found');
    const customer = await traceOf(builtin, key, sent.body.in_reply_to);
    expectError(customer, 404, 'not_found');
    expect(customer.body.error.message).toMatch(/only the agent's messages/);
    expectError(await traceOf(builtin, key, '0190a0a0-0000-7000-8000-000000000001'), 404, 'not_found');
  });

  it('is the MCP tool get_message_trace, under the same scope', async () => {
    const { tenantId, key } = await builtin.tenant();
    const sent = await send(builtin, key, { content: 'Hello' });
    await builtin.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = builtin.app.server.address() as AddressInfo;
    const connect = async (apiKey: string) => {
      const client = new Client({ name: 'turn-trace-test', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/api/v1/mcp`), {
        requestInit: { headers: { 'X-API-Key': apiKey } },
      });
      await client.connect(transport);
      return client;
    };
    const reader = await connect(await builtin.key(tenantId, ['conversations:read']));
    try {
      const result = await reader.callTool({ name: 'get_message_trace', arguments: { message_id: sent.body.id } });
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({
        object: 'message_trace',
        message_id: sent.body.id,
        question: 'Hello',
        decision: { type: 'decline' },
      });
    } finally {
      await reader.close();
    }
    const stranger = await connect(await builtin.key(tenantId, ['knowledge:read']));
    try {
      const tools = await stranger.listTools();
      expect(tools.tools.map((tool) => tool.name)).not.toContain('get_message_trace');
    } finally {
      await stranger.close();
    }
  });

  it('is gone with the conversation', async () => {
    const { tenantId, key } = await builtin.tenant();
    const sent = await send(builtin, key, { content: 'Hello' });
    expect((await traceOf(builtin, key, sent.body.id)).status).toBe(200);
    const db = builtin.database.db;
    await db.deleteFrom('conversations').where('tenant_id', '=', tenantId).execute();
    const left = await db.selectFrom('message_traces').select('message_id').where('tenant_id', '=', tenantId).execute();
    expect(left).toEqual([]);
    expectError(await traceOf(builtin, key, sent.body.id), 404, 'not_found');
  });
});

describe('the trace of an openai turn', () => {
  it('records each call with the tokens the server reported and their cost, and no prompt by default', async () => {
    const { key } = await withDocuments(openai);
    queue.push(streamedText('Refunds take 14 days [1].'));
    const sent = await send(openai, key, { content: 'How long do refunds take?' });
    expect(sent.body.status).toBe('COMPLETED');
    // A streamed completion carries `usage` only when asked for.
    expect(received.at(-1)).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const { body } = await traceOf(openai, key, sent.body.id);
    expect(body).toMatchObject({
      provider: 'openai',
      model: 'trace-model',
      question: 'How long do refunds take?',
      input_tokens: 1200,
      output_tokens: 300,
      // 1.2 × 0.5 + 0.3 × 2
      cost: 1.2,
      prompts_stored: false,
      decision: { type: 'answer' },
    });
    expect(body.provider_calls).toEqual([
      expect.objectContaining({
        step: 1,
        provider: 'openai',
        model: 'trace-model',
        status: 'completed',
        input_tokens: 1200,
        output_tokens: 300,
        usage_reported: true,
        cost: 1.2,
        text_chars: 'Refunds take 14 days [1].'.length,
        prompt: null,
      }),
    ]);
    expect(body.provider_calls[0].duration_ms).toBeGreaterThanOrEqual(0);
    const refund = body.search.candidates.find((c: Json) => c.title === 'Refund policy');
    expect(refund).toMatchObject({ used: true, cited: true });
    expect(refund.rank).toBeGreaterThan(0);
    const stored = await openai.database.db
      .selectFrom('message_traces')
      .select('trace')
      .where('message_id', '=', sent.body.id)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(stored.trace)).not.toContain('Refunds are processed within 14 days');
  });

  it('stores the messages sent to the model when TRACE_PROMPTS is true', async () => {
    const { key } = await withDocuments(openaiWithPrompts);
    queue.push(streamedText('Refunds take 14 days [1].'));
    const sent = await send(openaiWithPrompts, key, { content: 'How long do refunds take?' });
    const { body } = await traceOf(openaiWithPrompts, key, sent.body.id);
    expect(body.prompts_stored).toBe(true);
    const prompt = body.provider_calls[0].prompt;
    expect(prompt[0].role).toBe('system');
    expect(prompt[0].content).toContain('Refunds are processed within 14 days');
    expect(prompt.at(-1)).toEqual({ role: 'user', content: 'How long do refunds take?' });
  });

  it('records a workflow call made by the model over two calls, their tokens summed', async () => {
    const { key } = await openai.tenant();
    const wf = await openai.call({ method: 'POST', url: '/api/v1/workflows', key, body: { name: 'check_stock' } });
    await openai.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
    queue.push(
      toolCall('check_stock', { sku: 'X1' }),
      streamedText('In stock.', { prompt_tokens: 150, completion_tokens: 5 }),
    );
    const sent = await send(openai, key, { content: 'Is X1 in stock?' });
    expect(sent.body.status).toBe('COMPLETED');
    const { body } = await traceOf(openai, key, sent.body.id);
    expect(body.provider_calls.map((c: Json) => [c.input_tokens, c.output_tokens, c.tool_calls])).toEqual([
      [100, 10, ['check_stock']],
      [150, 5, []],
    ]);
    expect(body).toMatchObject({ input_tokens: 250, output_tokens: 15, cost: 0.125 + 0.03 });
    expect(body.function_calls).toEqual([
      expect.objectContaining({ name: 'check_stock', type: 'workflow', status: 'completed' }),
    ]);
  });

  it('records a failed call, and never the provider key, even where the server quoted it', async () => {
    const { key } = await openaiWithPrompts.tenant();
    queue.push(echoKey);
    const sent = await send(openaiWithPrompts, key, { content: 'Hello?' });
    expect(sent.body.status).toBe('FAILED');
    expect(sent.body.error.message).toContain(API_KEY);
    const { body, text } = await traceOf(openaiWithPrompts, key, sent.body.id);
    expect(body.provider_calls).toEqual([
      expect.objectContaining({ status: 'failed', usage_reported: false, input_tokens: null, cost: null }),
    ]);
    expect(body.provider_calls[0].error.code).toBe('provider_error');
    expect(body.provider_calls[0].error.message).toContain('[redacted]');
    expect(body.decision).toMatchObject({ type: 'failed', error: { code: 'provider_error' } });
    expect(body.decision.error.message).toContain('[redacted]');
    expect(text).not.toContain(API_KEY);
  });
});

describe('the dashboard report', () => {
  it('sums the tokens and cost of the traces per day and per agent, with the report filters', async () => {
    const { key } = await openai.tenant();
    const agent = (name: string) => openai.call({ method: 'POST', url: '/api/v1/agents', key, body: { name } });
    const alpha = (await agent('Alpha')).body;
    const beta = (await agent('Beta')).body;
    queue.push(
      streamedText('One.', { prompt_tokens: 1000, completion_tokens: 100 }),
      streamedText('Two.', { prompt_tokens: 2000, completion_tokens: 200 }),
      streamedText('Three.', { prompt_tokens: 4000, completion_tokens: 400 }),
    );
    await send(openai, key, { content: 'first', agent_id: alpha.id });
    await send(openai, key, { content: 'second', agent_id: alpha.id });
    await send(openai, key, { content: 'third', agent_id: beta.id });
    const report = await openai.call({
      method: 'POST',
      url: '/api/v1/analytics/dashboard',
      key,
      body: { report_type: 'last_7_days' },
    });
    expect(report.status).toBe(200);
    const { usage } = report.body;
    // 7 000 input tokens at 0.5 per 1 000, 700 output at 2 per 1 000.
    expect(usage).toMatchObject({ turns: 3, input_tokens: 7000, output_tokens: 700, cost: 4.9 });
    expect(usage.series).toHaveLength(7);
    expect(usage.series.at(-1)).toEqual({
      date: report.body.end_date,
      turns: 3,
      input_tokens: 7000,
      output_tokens: 700,
      cost: 4.9,
    });
    expect(usage.series[0]).toMatchObject({ turns: 0, input_tokens: 0, cost: null });
    expect(usage.by_agent).toEqual([
      { agent_id: beta.id, agent_name: 'Beta', turns: 1, input_tokens: 4000, output_tokens: 400, cost: 2.8 },
      { agent_id: alpha.id, agent_name: 'Alpha', turns: 2, input_tokens: 3000, output_tokens: 300, cost: 2.1 },
    ]);

    const filtered = await openai.call({
      method: 'POST',
      url: '/api/v1/analytics/dashboard',
      key,
      body: { report_type: 'last_7_days', agent_name: 'alpha' },
    });
    expect(filtered.body.usage).toMatchObject({ turns: 2, input_tokens: 3000, output_tokens: 300, cost: 2.1 });
    const stranger = await openai.tenant();
    const theirs = await openai.call({
      method: 'POST',
      url: '/api/v1/analytics/dashboard',
      key: stranger.key,
      body: { report_type: 'last_7_days' },
    });
    expect(theirs.body.usage).toMatchObject({ turns: 0, input_tokens: 0, cost: null, by_agent: [] });
  });
});

describe('simulation results', () => {
  it("keep each case's turn traces, linked from the transcript by message id, once the case's conversation is gone", async () => {
    const { tenantId, key } = await withDocuments(builtin);
    const call = (url: string, body?: unknown) => builtin.call({ method: 'POST', url, key, body });
    const dataset = await call('/api/v1/simulation/datasets', { name: 'traces' });
    expect(dataset.status).toBe(201);
    const added = await call(`/api/v1/simulation/datasets/${dataset.body.id}/test-cases`, {
      question: 'How long do refunds take?',
      expected_type: 'answer',
      expected_answer: 'Refunds are processed within 14 days of receiving the returned item.',
    });
    expect(added.status).toBe(201);
    const run = await call(`/api/v1/simulation/datasets/${dataset.body.id}/runs`);
    await builtin.jobs.runUntilIdle();
    const results = await builtin.call({ url: `/api/v1/simulation/runs/${run.body.id}/results`, key });
    expect(results.status).toBe(200);
    const [result] = results.body.data;
    expect(result.status).toBe('passed');
    const agentTurn = result.outcome.transcript.find((entry: Json) => entry.author === 'agent');
    expect(agentTurn.message_id).toEqual(expect.any(String));
    expect(result.outcome.traces).toHaveLength(1);
    expect(result.outcome.traces[0]).toMatchObject({
      object: 'message_trace',
      message_id: agentTurn.message_id,
      status: 'COMPLETED',
      question: 'How long do refunds take?',
      decision: { type: 'answer' },
    });
    expect(result.outcome.traces[0].search.candidates[0]).toMatchObject({ title: 'Refund policy', cited: true });
    // The played conversation is deleted with the verdict, and its traces with it.
    const left = await builtin.database.db
      .selectFrom('message_traces')
      .select('message_id')
      .where('tenant_id', '=', tenantId)
      .where('message_id', '=', agentTurn.message_id)
      .execute();
    expect(left).toEqual([]);
    expectError(await traceOf(builtin, key, agentTurn.message_id), 404, 'not_found');
  });
});

describe('metrics and spans', () => {
  /** The value of a sample of a metric, 0 when it has none yet. */
  async function sample(metric: string, labels: Record<string, string> = {}): Promise<number> {
    const found = (await registry.getMetricsAsJSON()).find((m) => m.name === metric);
    const values = (found?.values ?? []) as { value: number; labels: Record<string, unknown>; metricName?: string }[];
    const match = values.find(
      (v) =>
        (v.metricName === undefined || v.metricName === metric || v.metricName === `${metric}_count`) &&
        Object.entries(labels).every(([k, value]) => v.labels[k] === value),
    );
    return match?.value ?? 0;
  }

  it('count each turn and knowledge search, and make spans of the search and each provider call', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    setTracer(provider.getTracer('turn-trace-test'));
    try {
      const { key } = await withDocuments(openai);
      const turns = await sample('agent_turns_total', { provider: 'openai', status: 'COMPLETED' });
      const searches = await sample('knowledge_search_duration_seconds');
      queue.push(streamedText('Refunds take 14 days [1].'));
      const sent = await send(openai, key, { content: 'How long do refunds take?' });
      expect(sent.body.status).toBe('COMPLETED');
      expect(await sample('agent_turns_total', { provider: 'openai', status: 'COMPLETED' })).toBe(turns + 1);
      expect(await sample('knowledge_search_duration_seconds')).toBe(searches + 1);
      const spans = exporter.getFinishedSpans().map((span) => [span.name, span.attributes]);
      expect(spans).toContainEqual(['knowledge.search', { 'search.language': '' }]);
      expect(spans).toContainEqual(['agent.provider_call', { 'llm.provider': 'openai', 'llm.model': 'trace-model' }]);
    } finally {
      setTracer(undefined);
      await provider.shutdown();
    }
  });
});
