// Conversations and the built-in agent: sending messages, hidden messages, the built-in rules
// (functions and workflows, handoffs, knowledge answers, knowledge gaps), the default client
// functions mode, one turn at a time, feedback, reading conversations, tenant isolation.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNKNOWN_ANSWER } from '../../src/domain/agent/builtin-provider.js';
import { expectError, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ CLIENT_FUNCTION_TIMEOUT_MS: '4000' });
});
afterAll(() => t.close());

const send = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  t.call({ method: 'POST', url: '/api/v1/messages', key, body, headers });

const post = (key: string, url: string, body?: unknown) => t.call({ method: 'POST', url, key, body });

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 8000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const WEATHER = {
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
};

describe('sending messages', () => {
  it('starts a conversation without conversation_id and answers with the agent message record', async () => {
    const { key } = await t.tenant();
    const sent = await send(key, { content: 'Hello there' });
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({
      object: 'message',
      role: 'assistant',
      author: 'agent',
      status: 'COMPLETED',
      function_calls: [],
      citations: [],
      hidden: false,
      error: null,
    });
    expect(sent.body.content).toBe(UNKNOWN_ANSWER);
    const conversation = await t.call({ url: `/api/v1/conversations/${sent.body.conversation_id}`, key });
    expect(conversation.status).toBe(200);
    expect(conversation.body).toMatchObject({
      object: 'conversation',
      agent_id: sent.body.agent_id,
      message_count: 2,
      turn_in_progress: false,
    });
    const messages = await t.call({ url: `/api/v1/conversations/${sent.body.conversation_id}/messages`, key });
    expect(messages.body.data.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ['user', 'Hello there'],
      ['assistant', UNKNOWN_ANSWER],
    ]);
    expect(messages.body.data[1].in_reply_to).toBe(messages.body.data[0].id);
  });

  it('continues a conversation with conversation_id; an unknown one answers 404', async () => {
    const { key } = await t.tenant();
    const first = await send(key, { content: 'one' });
    const second = await send(key, { content: 'two', conversation_id: first.body.conversation_id });
    expect(second.status).toBe(200);
    expect(second.body.conversation_id).toBe(first.body.conversation_id);
    const conversation = await t.call({ url: `/api/v1/conversations/${first.body.conversation_id}`, key });
    expect(conversation.body.message_count).toBe(4);
    expectError(
      await send(key, { content: 'x', conversation_id: '0190a0a0-0000-7000-8000-000000000000' }),
      404,
      'not_found',
    );
  });

  it('uses agent_id when given; one naming no agent of the tenant answers 422 invalid_parameters', async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    await post(key, '/api/v1/agents', { name: 'First' });
    const sales = await post(key, '/api/v1/agents', { name: 'Sales' });
    const foreign = await post(other.key, '/api/v1/agents', { name: 'Foreign' });
    const sent = await send(key, { content: 'hi', agent_id: sales.body.id });
    expect(sent.body.agent_id).toBe(sales.body.id);
    expectError(await send(key, { content: 'hi', agent_id: foreign.body.id }), 422, 'invalid_parameters', 'agent_id');
    const list = await t.call({ url: '/api/v1/conversations', key });
    expect(list.body.data).toHaveLength(1);
  });

  it('validates the body: content required, unknown fields and bad modes refused', async () => {
    const { key } = await t.tenant();
    expectError(await send(key, {}), 422, 'missing_required_parameter', 'content');
    expectError(await send(key, { content: 'x', colour: 1 }), 422, 'validation_error', 'colour');
    expectError(await send(key, { content: 'x', client_functions_mode: 'later' }), 422, 'validation_error');
    expectError(await send(key, { content: 'x', hidden: 'yes' }), 422, 'validation_error', 'hidden');
  });
});

describe('hidden messages', () => {
  it('needs conversation_id (422 missing_required_parameter) and cannot start a conversation', async () => {
    const { key } = await t.tenant();
    expectError(
      await send(key, { content: 'page_view', hidden: true }),
      422,
      'missing_required_parameter',
      'conversation_id',
    );
    expect((await t.call({ url: '/api/v1/conversations', key })).body.data).toHaveLength(0);
  });

  it('answers 404 for an unknown conversation_id', async () => {
    const { key } = await t.tenant();
    expectError(
      await send(key, { content: 'x', hidden: true, conversation_id: '0190a0a0-0000-7000-8000-000000000001' }),
      404,
      'not_found',
    );
  });

  it('gets an immediate reply whose role is system; the event is stored hidden', async () => {
    const { key } = await t.tenant();
    const first = await send(key, { content: 'hello' });
    const hidden = await send(key, {
      content: 'The customer opened the pricing page',
      hidden: true,
      conversation_id: first.body.conversation_id,
    });
    expect(hidden.status).toBe(200);
    expect(hidden.body).toMatchObject({ role: 'system', author: 'agent', status: 'COMPLETED' });
    const messages = await t.call({ url: `/api/v1/conversations/${first.body.conversation_id}/messages`, key });
    const event = messages.body.data[2];
    expect(event).toMatchObject({ role: 'system', author: 'application', hidden: true });
    expect(messages.body.data[3]).toMatchObject({ id: hidden.body.id, role: 'system', in_reply_to: event.id });
  });

  it('an application event the documents do not answer records no knowledge gap; a customer question does', async () => {
    const { key } = await t.tenant();
    const first = await send(key, { content: 'Where is my parcel?' });
    const hidden = await send(key, { content: 'app event', hidden: true, conversation_id: first.body.conversation_id });
    expect(hidden.body).toMatchObject({ status: 'COMPLETED', content: UNKNOWN_ANSWER });
    const gaps = await t.call({ url: '/api/v1/knowledge-update-requests', key });
    expect(gaps.body.data.map((gap: { question: string }) => gap.question)).toEqual(['Where is my parcel?']);
  });
});

describe('built-in rule 1: client functions and workflows named in the message', () => {
  it('calls a client function named in the message with key=value arguments typed by its schema', async () => {
    const { key } = await t.tenant();
    const sent = await send(key, {
      content: 'Please get weather city="New York" days=3 unit=c toString=evil constructor=x',
      client_functions: [WEATHER],
    });
    expect(sent.status).toBe(200);
    expect(sent.body.status).toBe('WAITING_CLIENT');
    expect(sent.body.function_calls).toEqual([
      {
        call_id: expect.stringMatching(/^call_/),
        name: 'get_weather',
        type: 'client',
        arguments: { city: 'New York', days: 3 },
        status: 'pending',
        output: null,
      },
    ]);
    // Default mode: the turn resumes by itself once the result arrives.
    const call = sent.body.function_calls[0].call_id;
    const ack = await post(key, `/api/v1/messages/${sent.body.id}/function-results`, {
      results: [{ call_id: call, output: { temperature: 21 } }],
    });
    expect(ack.status).toBe(200);
    expect(ack.body).toMatchObject({
      object: 'function_results',
      received_call_ids: [call],
      pending_call_ids: [],
      ready: true,
    });
    const done = await until(
      () => t.call({ url: `/api/v1/messages/${sent.body.id}`, key }),
      (r) => r.body.status !== 'WAITING_CLIENT' && r.body.status !== 'IN_PROGRESS',
    );
    expect(done.body.status).toBe('COMPLETED');
    expect(done.body.content).toBe('get_weather returned {"temperature":21}.');
    expect(done.body.function_calls[0]).toMatchObject({ status: 'completed', output: { temperature: 21 } });
  });

  it('does not call a function that is not named; a plain message goes to knowledge', async () => {
    const { key } = await t.tenant();
    const sent = await send(key, { content: 'what is the weather like', client_functions: [WEATHER] });
    expect(sent.body.status).toBe('COMPLETED');
    expect(sent.body.function_calls).toEqual([]);
  });

  it('runs an enabled workflow server-side (a workflow_runs row with the arguments) and never a disabled one', async () => {
    const { tenantId, key } = await t.tenant();
    const refund = await post(key, '/api/v1/workflows', {
      name: 'issue_refund',
      input_schema: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
    });
    const off = await post(key, '/api/v1/workflows', { name: 'cancel_order' });

    const disabled = await send(key, { content: 'issue refund order=A-1' });
    expect(disabled.body.function_calls).toEqual([]);
    expect(disabled.body.content).toBe(UNKNOWN_ANSWER);

    await t.call({ method: 'PUT', url: `/api/v1/workflows/${refund.body.id}/enabled`, key, body: { enabled: true } });
    const sent = await send(key, { content: 'Issue_Refund order=A-1 and cancel order please' });
    expect(sent.body.status).toBe('COMPLETED');
    expect(sent.body.function_calls).toHaveLength(1);
    const call = sent.body.function_calls[0];
    expect(call).toMatchObject({
      name: 'issue_refund',
      type: 'workflow',
      arguments: { order: 'A-1' },
      status: 'completed',
    });
    expect(call.output).toMatchObject({ workflow: 'issue_refund', status: 'completed', arguments: { order: 'A-1' } });
    expect(sent.body.content).toContain('issue_refund returned');

    const runs = await t.database.db
      .selectFrom('workflow_runs')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({
      workflow_id: refund.body.id,
      call_id: call.call_id,
      message_id: sent.body.id,
      arguments: { order: 'A-1' },
      status: 'completed',
      overridden: false,
    });
    expect(runs.some((r) => r.workflow_id === off.body.id)).toBe(false);
  });

  it("validates each workflow's arguments against its own schema, whatever $id another schema of any tenant has", async () => {
    const $id = 'https://example.com/args.json';
    const tenants = [await t.tenant(), await t.tenant()];
    for (const [i, { key }] of tenants.entries()) {
      for (const name of ['alpha', 'beta']) {
        const field = `${name}_${i}`;
        const wf = await post(key, '/api/v1/workflows', {
          name,
          input_schema: { $id, type: 'object', properties: { [field]: { type: 'string' } }, required: [field] },
        });
        await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
      }
    }
    for (const [i, { key }] of tenants.entries()) {
      for (const name of ['alpha', 'beta']) {
        const sent = await send(key, { content: `please run ${name} ${name}_${i}=1` });
        expect(sent.body.function_calls).toHaveLength(1);
        expect(sent.body.function_calls[0]).toMatchObject({ name, status: 'completed' });
      }
    }
  });

  it('records a failed workflow run when the arguments break its input schema', async () => {
    const { key } = await t.tenant();
    const wf = await post(key, '/api/v1/workflows', {
      name: 'reset_password',
      input_schema: { type: 'object', properties: { email: { type: 'string' } }, required: ['email'] },
    });
    await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
    const sent = await send(key, { content: 'reset password please' });
    expect(sent.body.function_calls[0]).toMatchObject({ name: 'reset_password', status: 'failed' });
    expect(sent.body.function_calls[0].output.error).toMatch(/email/);
  });

  it('refuses client function parameters that are not a JSON Schema (422 naming client_functions[i].parameters)', async () => {
    const { key } = await t.tenant();
    expectError(
      await send(key, {
        content: 'x',
        client_functions: [WEATHER, { name: 'bad', parameters: { type: 'objekt' } }],
      }),
      422,
      'validation_error',
      'client_functions[1].parameters',
    );
    // Ajv throws rather than answers for these (a dialect it has not loaded, a $schema that is no
    // string, a $ref to nothing): 422 all the same, never 500.
    for (const parameters of [
      { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' },
      { $schema: 5 },
      { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } },
    ]) {
      expectError(
        await send(key, { content: 'x', client_functions: [{ name: 'odd', parameters }] }),
        422,
        'validation_error',
        'client_functions[0].parameters',
      );
    }
    expectError(
      await send(key, { content: 'x', client_functions: [WEATHER, WEATHER] }),
      422,
      'validation_error',
      'client_functions[1].name',
    );
    expectError(
      await send(key, { content: 'x', client_functions: [{ name: 'has space' }] }),
      422,
      'validation_error',
      'client_functions[0].name',
    );
    expect((await t.call({ url: '/api/v1/conversations', key })).body.data).toHaveLength(0);
  });
});

describe('built-in rule 2: handoffs', () => {
  it('hands the conversation to a handoff agent named in the message and records a ticket', async () => {
    const { tenantId, key } = await t.tenant();
    const billing = await post(key, '/api/v1/agents', { name: 'Billing team' });
    const front = await post(key, '/api/v1/agents', { name: 'Front', handoff_agent_ids: [billing.body.id] });
    const sent = await send(key, { content: 'Can I talk to the billing_team?', agent_id: front.body.id });
    expect(sent.body.status).toBe('COMPLETED');
    expect(sent.body.content).toBe("I'm handing you over to Billing team.");
    expect(sent.body.handoff).toMatchObject({ agent_id: billing.body.id, agent_name: 'Billing team' });
    const conversation = await t.call({ url: `/api/v1/conversations/${sent.body.conversation_id}`, key });
    expect(conversation.body.agent_id).toBe(billing.body.id);
    const tickets = await t.database.db.selectFrom('tickets').selectAll().where('tenant_id', '=', tenantId).execute();
    expect(tickets).toHaveLength(1);
    expect(tickets[0]).toMatchObject({
      id: sent.body.handoff.ticket_id,
      conversation_id: sent.body.conversation_id,
      from_agent_id: front.body.id,
      to_agent_id: billing.body.id,
      status: 'open',
    });
    // The next message is answered by the new agent.
    const next = await send(key, { content: 'hello', conversation_id: sent.body.conversation_id });
    expect(next.body.agent_id).toBe(billing.body.id);
  });

  it('does not hand off to an agent that is not one of its handoff agents', async () => {
    const { key } = await t.tenant();
    await post(key, '/api/v1/agents', { name: 'Front' });
    await post(key, '/api/v1/agents', { name: 'Billing' });
    const sent = await send(key, { content: 'billing please' });
    expect(sent.body.handoff).toBeNull();
  });
});

describe('built-in rules 3 and 4: knowledge', () => {
  it("answers with the best-ranked passage, citing its document, in the conversation's language", async () => {
    const { tenantId, key } = await t.tenant();
    const doc = await t.services.documents.create(tenantId, {
      title: 'Refund policy',
      content: 'You can get a refund within 30 days of purchase. Contact support with your order number.',
      language: 'en',
    });
    await t.services.documents.create(tenantId, {
      title: 'Shipping times',
      content: 'Orders ship within two business days.',
      language: 'en',
    });
    await t.services.documents.addTranslation(tenantId, doc.id, {
      language: 'fr',
      title: 'Politique de remboursement',
      content: 'Vous pouvez obtenir un remboursement sous 30 jours après votre achat.',
    });
    const en = await send(key, { content: 'What is your refund policy?' });
    expect(en.body.status).toBe('COMPLETED');
    expect(en.body.content).toBe(doc.content);
    expect(en.body.citations).toEqual([
      expect.objectContaining({ document_id: doc.id, title: 'Refund policy', language: 'en' }),
    ]);

    const fr = await send(key, { content: 'refund policy', language: 'fr' });
    expect(fr.body.content).toBe('Vous pouvez obtenir un remboursement sous 30 jours après votre achat.');
    expect(fr.body.citations[0]).toMatchObject({ document_id: doc.id, language: 'fr' });
    const conversation = await t.call({ url: `/api/v1/conversations/${fr.body.conversation_id}`, key });
    expect(conversation.body.language).toBe('fr');
  });

  it('reads words written with combining marks (Devanagari, decomposed accents) as whole words', async () => {
    const { tenantId, key } = await t.tenant();
    const hindi = await t.services.documents.create(tenantId, {
      title: 'रिफंड नीति',
      content: 'रिफंड नीति: रिफंड चौदह दिनों में मिलता है।',
      language: 'hi',
    });
    const sent = await send(key, { content: 'रिफंड नीति क्या है?' });
    expect(sent.body.citations).toEqual([expect.objectContaining({ document_id: hindi.id })]);
    // "café" typed as e + U+0301: the accent belongs to the word.
    const cafe = await t.services.documents.create(tenantId, {
      title: 'Cafe\u0301 opening hours',
      content: 'The cafe\u0301 opens at eight every morning.',
    });
    const asked = await send(key, { content: 'When does the cafe\u0301 open?' });
    expect(asked.body.citations).toEqual([expect.objectContaining({ document_id: cafe.id })]);
  });

  it('below the rank threshold says it does not know and records a knowledge gap', async () => {
    const { tenantId, key } = await t.tenant();
    await t.services.documents.create(tenantId, {
      title: 'Shipping times',
      content: 'Orders ship within two business days. Refunds are rare.',
    });
    const sent = await send(key, { content: 'How do I calibrate the flux capacitor?' });
    expect(sent.body.content).toBe(UNKNOWN_ANSWER);
    expect(sent.body.citations).toEqual([]);
    const gaps = await t.call({ url: '/api/v1/knowledge-update-requests', key });
    expect(gaps.status).toBe(200);
    expect(gaps.body.data).toHaveLength(1);
    expect(gaps.body.data[0]).toMatchObject({
      question: 'How do I calibrate the flux capacitor?',
      conversation_id: sent.body.conversation_id,
      status: 'open',
    });
    expect(gaps.body.data[0].message_id).toBe(sent.body.in_reply_to);
  });

  it('exposes retrieval without a turn (services.agent.retrieve) with the threshold applied', async () => {
    const { tenantId } = await t.tenant();
    await t.services.documents.create(tenantId, { title: 'Password reset', content: 'Use the reset link.' });
    const found = await t.services.agent.retrieve(tenantId, 'password reset');
    expect(found.answerable).toBe(true);
    expect(found.passages[0]?.title).toBe('Password reset');
    expect(found.passages.every((p) => p.rank >= found.threshold)).toBe(true);
    const none = await t.services.agent.retrieve(tenantId, 'unrelated words entirely');
    expect(none).toMatchObject({ answerable: false, passages: [] });
  });
});

describe('one turn at a time per conversation', () => {
  it('refuses a message while a turn runs in the conversation (409 conflict), then accepts it', async () => {
    const { key } = await t.tenant();
    const first = await send(key, { content: 'get_weather city=Paris', client_functions: [WEATHER] });
    expect(first.body.status).toBe('WAITING_CLIENT');
    const conversationId = first.body.conversation_id;
    const busy = await t.call({ url: `/api/v1/conversations/${conversationId}`, key });
    expect(busy.body.turn_in_progress).toBe(true);

    const [a, b] = await Promise.all([
      send(key, { content: 'second', conversation_id: conversationId }),
      send(key, { content: 'third', conversation_id: conversationId }),
    ]);
    expectError(a, 409, 'conflict');
    expectError(b, 409, 'conflict');

    await post(key, `/api/v1/messages/${first.body.id}/function-results`, {
      results: [{ call_id: first.body.function_calls[0].call_id, output: 'sunny' }],
    });
    await until(
      () => t.call({ url: `/api/v1/messages/${first.body.id}`, key }),
      (r) => r.body.status === 'COMPLETED',
    );
    const after = await send(key, { content: 'fourth', conversation_id: conversationId });
    expect(after.status).toBe(200);
    const messages = await t.call({ url: `/api/v1/conversations/${conversationId}/messages`, key });
    expect(messages.body.data.map((m: { role: string; content: string }) => m.role)).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
    ]);
    expect(messages.body.data[2].content).toBe('fourth');
  });

  it('two messages sent at once never interleave: one turn runs, the other is refused or runs after', async () => {
    const { key } = await t.tenant();
    const first = await send(key, { content: 'start' });
    const conversationId = first.body.conversation_id;
    const results = await Promise.all(
      ['a', 'b', 'c'].map((content) => send(key, { content, conversation_id: conversationId })),
    );
    for (const r of results) expect([200, 409]).toContain(r.status);
    const accepted = results.filter((r) => r.status === 200).length;
    const messages = await t.call({ url: `/api/v1/conversations/${conversationId}/messages?limit=100`, key });
    const roles = messages.body.data.map((m: { role: string }) => m.role);
    expect(roles).toHaveLength(2 + accepted * 2);
    roles.forEach((role: string, i: number) => {
      expect(role).toBe(i % 2 === 0 ? 'user' : 'assistant');
    });
    for (let i = 1; i < messages.body.data.length; i += 2) {
      expect(messages.body.data[i].in_reply_to).toBe(messages.body.data[i - 1].id);
    }
  });

  it('a turn whose lease lapsed (its server died) no longer blocks the conversation and is marked FAILED', async () => {
    const { tenantId, key } = await t.tenant();
    const first = await send(key, { content: 'get_weather', client_functions: [WEATHER] });
    expect(first.body.status).toBe('WAITING_CLIENT');
    // Simulate a dead process: its turn holds the claim but the lease is over.
    await t.database.db
      .updateTable('conversations')
      .set({ active_turn_expires_at: sql`now() - interval '1 second'` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', first.body.conversation_id)
      .execute();
    const next = await send(key, { content: 'hello again', conversation_id: first.body.conversation_id });
    expect(next.status).toBe(200);
    const old = await t.call({ url: `/api/v1/messages/${first.body.id}`, key });
    expect(old.body.status).toBe('FAILED');
    expect(old.body.error).toMatchObject({ code: 'turn_interrupted' });
  });
});

describe('default client functions mode', () => {
  it('ends FAILED with a readable reason when the results do not arrive in time', async () => {
    const { key } = await t.tenant();
    const sent = await send(key, { content: 'get_weather', client_functions: [WEATHER] });
    expect(sent.body.status).toBe('WAITING_CLIENT');
    const done = await until(
      () => t.call({ url: `/api/v1/messages/${sent.body.id}`, key }),
      (r) => r.body.status === 'FAILED',
      10_000,
    );
    expect(done.body.status).toBe('FAILED');
    expect(done.body.error.code).toBe('client_timeout');
    expect(done.body.error.message).toContain(sent.body.function_calls[0].call_id);
    // The conversation is free again.
    expect((await send(key, { content: 'hi', conversation_id: sent.body.conversation_id })).status).toBe(200);
  });

  it('is not a paused turn: continue answers 409; unknown call ids answer 422 invalid_parameters', async () => {
    const { key } = await t.tenant();
    const sent = await send(key, { content: 'get_weather', client_functions: [WEATHER] });
    expectError(await post(key, `/api/v1/messages/${sent.body.id}/continue`, {}), 409, 'conflict');
    expectError(
      await post(key, `/api/v1/messages/${sent.body.id}/function-results`, {
        results: [{ call_id: 'call_nope', output: 1 }],
      }),
      422,
      'invalid_parameters',
      'results[0].call_id',
    );
    expectError(
      await post(key, `/api/v1/messages/${sent.body.id}/function-results`, { results: [] }),
      422,
      'empty_items',
      'results',
    );
    expectError(
      await post(key, `/api/v1/messages/${sent.body.id}/function-results`, { results: [{ call_id: 'x' }] }),
      422,
      'missing_required_parameter',
      'results[0].output',
    );
    await post(key, `/api/v1/messages/${sent.body.id}/function-results`, {
      results: [{ call_id: sent.body.function_calls[0].call_id, output: null }],
    });
    const done = await until(
      () => t.call({ url: `/api/v1/messages/${sent.body.id}`, key }),
      (r) => r.body.status === 'COMPLETED',
    );
    expect(done.body.content).toBe('get_weather returned null.');
    expectError(
      await post(key, `/api/v1/messages/${sent.body.id}/function-results`, {
        results: [{ call_id: sent.body.function_calls[0].call_id, output: 2 }],
      }),
      409,
      'conflict',
    );
  });
});

describe('the engine without HTTP (simulations, coverage)', () => {
  it('runTurn returns the finished agent message; tool overrides replace tool outputs and are recorded', async () => {
    const { tenantId, key } = await t.tenant();
    const wf = await post(key, '/api/v1/workflows', { name: 'check_stock' });
    await t.call({ method: 'PUT', url: `/api/v1/workflows/${wf.body.id}/enabled`, key, body: { enabled: true } });
    const message = await t.services.agent.runTurn(
      tenantId,
      { content: 'check stock sku=42 then get_weather city=Oslo', client_functions: [WEATHER] },
      { toolOverrides: { check_stock: { in_stock: 3 }, get_weather: 'fog' } },
    );
    expect(message.status).toBe('COMPLETED');
    expect(message.function_calls.map((c) => [c.name, c.arguments, c.output])).toEqual([
      ['check_stock', { sku: '42', city: 'Oslo' }, { in_stock: 3 }],
      ['get_weather', { city: 'Oslo' }, 'fog'],
    ]);
    expect(message.content).toBe('check_stock returned {"in_stock":3}.\nget_weather returned "fog".');
    const runs = await t.database.db
      .selectFrom('workflow_runs')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(runs.map((r) => [r.workflow_name, r.overridden, r.output])).toEqual([
      ['check_stock', true, { in_stock: 3 }],
    ]);
  });
});

describe('feedback', () => {
  it('stores feedback on an agent message (201) in message_feedback', async () => {
    const { tenantId, key } = await t.tenant();
    const sent = await send(key, { content: 'hello' });
    const feedback = await post(key, `/api/v1/messages/${sent.body.id}/feedback`, {
      rating: 'negative',
      comment: 'Not helpful',
    });
    expect(feedback.status).toBe(201);
    expect(feedback.body).toMatchObject({
      object: 'message_feedback',
      message_id: sent.body.id,
      conversation_id: sent.body.conversation_id,
      rating: 'negative',
      comment: 'Not helpful',
    });
    const rows = await t.database.db
      .selectFrom('message_feedback')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(rows.map((r) => [r.id, r.rating])).toEqual([[feedback.body.id, 'negative']]);
  });

  it('refuses a bad rating (422), feedback on a customer message (409) and an unknown message (404)', async () => {
    const { key } = await t.tenant();
    const sent = await send(key, { content: 'hello' });
    expectError(
      await post(key, `/api/v1/messages/${sent.body.id}/feedback`, { rating: 'meh' }),
      422,
      'validation_error',
      'rating',
    );
    expectError(
      await post(key, `/api/v1/messages/${sent.body.id}/feedback`, {}),
      422,
      'missing_required_parameter',
      'rating',
    );
    expectError(
      await post(key, `/api/v1/messages/${sent.body.in_reply_to}/feedback`, { rating: 'positive' }),
      409,
      'conflict',
    );
    expectError(
      await post(key, '/api/v1/messages/0190a0a0-0000-7000-8000-000000000002/feedback', { rating: 'positive' }),
      404,
      'not_found',
    );
  });
});

describe('reading conversations', () => {
  it('lists conversations newest first and messages oldest first, both paginated', async () => {
    const { key } = await t.tenant();
    const a = await send(key, { content: 'a1' });
    const b = await send(key, { content: 'b1' });
    await send(key, { content: 'a2', conversation_id: a.body.conversation_id });
    const list = await t.call({ url: '/api/v1/conversations?limit=1', key });
    expect(list.body.data.map((c: { id: string }) => c.id)).toEqual([b.body.conversation_id]);
    expect(list.body.has_more).toBe(true);
    const rest = await t.call({ url: `/api/v1/conversations?limit=1&cursor=${list.body.next_cursor}`, key });
    expect(rest.body.data.map((c: { id: string }) => c.id)).toEqual([a.body.conversation_id]);

    const page1 = await t.call({ url: `/api/v1/conversations/${a.body.conversation_id}/messages?limit=3`, key });
    expect(page1.body.data.map((m: { content: string }) => m.content).slice(0, 1)).toEqual(['a1']);
    expect(page1.body.data[2].content).toBe('a2');
    expect(page1.body.has_more).toBe(true);
    const page2 = await t.call({
      url: `/api/v1/conversations/${a.body.conversation_id}/messages?limit=3&cursor=${page1.body.next_cursor}`,
      key,
    });
    expect(page2.body.data).toHaveLength(1);
    expect(page2.body.data[0].role).toBe('assistant');
    expect(page2.body.has_more).toBe(false);

    const byAgent = await t.call({ url: `/api/v1/conversations?agent_id=${a.body.agent_id}`, key });
    expect(byAgent.body.data).toHaveLength(2);
  });
});

describe('tenant isolation and scopes', () => {
  it("answers 404 to another tenant's key on every id-bearing route", async () => {
    const { key } = await t.tenant();
    const other = await t.tenant();
    const sent = await send(key, {
      content: 'get_weather',
      client_functions: [WEATHER],
      client_functions_mode: 'pause',
    });
    expect(sent.body.status).toBe('WAITING_CLIENT');
    const conversationId = sent.body.conversation_id;
    const id = sent.body.id;
    const k = other.key;
    expectError(await t.call({ url: `/api/v1/conversations/${conversationId}`, key: k }), 404, 'not_found');
    expectError(await t.call({ url: `/api/v1/conversations/${conversationId}/messages`, key: k }), 404, 'not_found');
    expectError(await t.call({ url: `/api/v1/messages/${id}`, key: k }), 404, 'not_found');
    expectError(
      await post(k, `/api/v1/messages/${id}/function-results`, {
        results: [{ call_id: sent.body.function_calls[0].call_id, output: 1 }],
      }),
      404,
      'not_found',
    );
    expectError(await post(k, `/api/v1/messages/${id}/continue`, {}), 404, 'not_found');
    expectError(await post(k, `/api/v1/messages/${id}/feedback`, { rating: 'positive' }), 404, 'not_found');
    expectError(await send(k, { content: 'x', conversation_id: conversationId }), 404, 'not_found');
    expectError(await send(k, { content: 'x', hidden: true, conversation_id: conversationId }), 404, 'not_found');
    expect((await t.call({ url: '/api/v1/conversations', key: k })).body.data).toEqual([]);
    // Nothing of the first tenant changed.
    const mine = await t.call({ url: `/api/v1/messages/${id}`, key });
    expect(mine.body).toMatchObject({ status: 'WAITING_CLIENT', function_calls: [{ status: 'pending' }] });
  });

  it('needs conversations:write to send and conversations:read to read', async () => {
    const { tenantId, key } = await t.tenant(['conversations:read']);
    expectError(await send(key, { content: 'hi' }), 403, 'insufficient_scope');
    expect((await t.call({ url: '/api/v1/conversations', key })).status).toBe(200);
    const none = await t.key(tenantId, ['agents:write']);
    expectError(await t.call({ url: '/api/v1/conversations', key: none }), 403, 'insufficient_scope');
  });
});

describe('edge cases', () => {
  it('a message of only spaces is answered, not failed (no knowledge gap is recorded for it)', async () => {
    const { tenantId, key } = await t.tenant();
    const sent = await send(key, { content: '   ' });
    expect(sent.status, sent.text).toBe(200);
    expect(sent.body.status).toBe('COMPLETED');
    const gaps = await t.database.db
      .selectFrom('knowledge_update_requests')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(gaps).toEqual([]);
  });

  it('a streamed send keeps its Idempotency-Key: a repeat answers 409 once the stream ends, never runs again', async () => {
    const { tenantId, key } = await t.tenant();
    // Media types ignore case: this Accept asks for a stream as surely as a lower-case one.
    for (const accept of ['text/event-stream', 'Text/Event-Stream']) {
      const headers = { accept, 'idempotency-key': `stream-${accept}` };
      const first = await send(key, { content: 'Hello' }, headers);
      expect(first.status).toBe(200);
      expect(first.text).toContain('event: done');
      // The key is recorded once the stream has closed, just after the client read its end.
      const second = await until(
        () => send(key, { content: 'Hello' }, headers),
        (answer) => !/still being processed/.test(answer.body?.error?.message ?? ''),
      );
      expectError(second, 409, 'conflict', 'Idempotency-Key');
      expect(second.body.error.message).toMatch(/stream, which cannot be replayed/);
      // Sent as JSON, the repeat is refused the same way.
      expectError(await send(key, { content: 'Hello' }, { 'idempotency-key': `stream-${accept}` }), 409, 'conflict');
    }
    const conversations = await t.database.db
      .selectFrom('conversations')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .execute();
    expect(conversations).toHaveLength(2);
  });

  it('streams only when Accept prefers a stream; a stream carries the rate limit headers of any answer', async () => {
    const { key } = await t.tenant();
    for (const [accept, streamed] of [
      ['text/event-stream', true],
      ['application/json, text/event-stream', true],
      ['text/event-stream;q=0.5, */*;q=0.1', true],
      ['text/event-stream;q=0', false],
      ['application/json, text/event-stream;q=0.1', false],
      ['application/json;q=0.9, text/event-stream;q=0.1', false],
      ['text/event-stream;q=oops, application/json', false],
    ] as const) {
      const answer = await send(key, { content: 'Hello' }, { accept });
      expect(answer.status, accept).toBe(200);
      expect(String(answer.headers['content-type']).startsWith('text/event-stream'), accept).toBe(streamed);
      expect(answer.headers['ratelimit-limit'], accept).toBeDefined();
      expect(answer.headers['x-request-id'], accept).toBeDefined();
    }
  });

  it('a streamed send refused before its stream opens stores that answer for a repeat', async () => {
    const { key } = await t.tenant();
    const headers = { accept: 'text/event-stream', 'idempotency-key': 'stream-refused' };
    const missing = '00000000-0000-4000-8000-000000000000';
    const first = await send(key, { content: 'Hello', conversation_id: missing }, headers);
    expectError(first, 404, 'not_found');
    const again = await send(key, { content: 'Hello', conversation_id: missing }, headers);
    expectError(again, 404, 'not_found');
    expect(again.headers['idempotent-replayed']).toBe('true');
  });
});
