// MCP servers kept between requests (src/mcp/exchange.ts, ExchangePool): an exchange takes an idle
// server or connects a new one, its handlers see that exchange's context and no other's, and a
// server is kept for the next exchange only when nothing of this one can still reach it.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { answerExchange, ExchangePool, type ExchangeTransport } from '../src/mcp/exchange.js';

type Context = { tenant: string };
const HEADERS = { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-03-26' };

/**
 * A pool of real SDK servers whose one tool, `whose`, waits `wait` ms (or until `release` is called
 * for `hold`) and answers the tenant of the exchange it serves; `connected` counts servers made.
 */
function pool() {
  let connected = 0;
  const holds = new Map<string, () => void>();
  const servers = new ExchangePool<Context>(async (transport: ExchangeTransport<Context>) => {
    connected++;
    const server = new Server({ name: 'test', version: '1' }, { capabilities: { tools: {} } });
    server.setRequestHandler(CallToolRequestSchema, async (call) => {
      const { tenant } = transport.context as Context;
      const args = (call.params.arguments ?? {}) as { wait?: number; hold?: string };
      if (args.hold) await new Promise<void>((resolve) => holds.set(args.hold as string, resolve));
      else await new Promise((resolve) => setTimeout(resolve, args.wait ?? 0));
      return { content: [{ type: 'text', text: tenant }] };
    });
    await server.connect(transport);
  }, 8);
  return { servers, connected: () => connected, release: (hold: string) => holds.get(hold)?.() };
}

const call = (id: number, args: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'whose', arguments: args },
});
const textOf = (answer: { body?: unknown }) =>
  (answer.body as { result: { content: { text: string }[] } }).result.content[0]?.text;

describe('MCP servers kept between requests', () => {
  it('serves one exchange after another with one server', async () => {
    const { servers, connected } = pool();
    expect(textOf(await answerExchange(call(1), HEADERS, servers, { tenant: 'a' }))).toBe('a');
    expect(textOf(await answerExchange(call(1), HEADERS, servers, { tenant: 'b' }))).toBe('b');
    expect(connected()).toBe(1);
  });

  it('gives exchanges at once servers of their own, each handler seeing its own context, the same request ids too', async () => {
    const { servers, connected } = pool();
    const answers = await Promise.all(
      ['a', 'b', 'c'].map((tenant, i) => answerExchange(call(1, { wait: 30 - 10 * i }), HEADERS, servers, { tenant })),
    );
    expect(answers.map(textOf)).toEqual(['a', 'b', 'c']);
    expect(connected()).toBe(3);
    // All three are kept: the next three exchanges make no server.
    await Promise.all(['d', 'e', 'f'].map((tenant) => answerExchange(call(7), HEADERS, servers, { tenant })));
    expect(connected()).toBe(3);
  });

  it('does not keep a server whose request its batch cancelled: its late answer reaches no later exchange', async () => {
    const { servers, connected, release } = pool();
    const batch = [
      call(1, { hold: 'cancelled' }),
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } },
      call(2),
    ];
    const first = await answerExchange(batch, HEADERS, servers, { tenant: 'a' });
    expect((first.body as unknown[]).length).toBe(1);
    const next = answerExchange(call(1, { wait: 20 }), HEADERS, servers, { tenant: 'b' });
    release('cancelled');
    expect(textOf(await next)).toBe('b');
    expect(connected()).toBe(2);
  });

  it('does not keep a server still running a request behind an answer to the same id', async () => {
    const { servers, connected, release } = pool();
    const batch = [call(1), call(1, { hold: 'twin' })];
    const first = await answerExchange(batch, HEADERS, servers, { tenant: 'a' });
    expect(first.status).toBe(200);
    const next = answerExchange(call(1, { wait: 20 }), HEADERS, servers, { tenant: 'b' });
    release('twin');
    expect(textOf(await next)).toBe('b');
    expect(connected()).toBe(2);
  });

  it('does not keep the server of an initialize, which holds the client capabilities it was told', async () => {
    const { servers, connected } = pool();
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'c', version: '1' } },
    };
    expect((await answerExchange(initialize, HEADERS, servers, { tenant: 'a' })).status).toBe(200);
    await answerExchange(call(2), HEADERS, servers, { tenant: 'b' });
    expect(connected()).toBe(2);
    // A notification alone is answered 202, and its server is kept.
    const note = await answerExchange({ jsonrpc: '2.0', method: 'notifications/initialized' }, HEADERS, servers, {
      tenant: 'b',
    });
    expect(note.status).toBe(202);
    await answerExchange(call(3), HEADERS, servers, { tenant: 'b' });
    expect(connected()).toBe(2);
  });
});
