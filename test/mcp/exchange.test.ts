// MCP servers kept between requests (src/mcp/exchange.ts, ExchangePool): an exchange takes an idle
// server or connects a new one, its handlers see that exchange's context and no other's, and a
// server is kept for the next exchange only when nothing of this one can still reach it. A plain
// tool call is answered without a server, as a server would answer it.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  LATEST_PROTOCOL_VERSION,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { answerExchange, ExchangePool, type ExchangeTransport, type ToolRunner } from '../../src/mcp/exchange.js';

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

/**
 * Tools as the API's are run (routes.ts, callTool): `echo` answers its arguments and the exchange's
 * tenant as structured content, `refuse` a tool error; `fail` rejects, which a runner should not;
 * any other name is not a tool.
 */
const runTool: ToolRunner<Context> = (call, { tenant }) => {
  if (call.name === 'echo') {
    const structuredContent = { tenant, arguments: call.arguments ?? null };
    return Promise.resolve({ content: [{ type: 'text', text: JSON.stringify(structuredContent) }], structuredContent });
  }
  if (call.name === 'refuse') {
    return Promise.resolve<CallToolResult>({ content: [{ type: 'text', text: '{"error":{}}' }], isError: true });
  }
  if (call.name === 'fail') return Promise.reject(Object.assign(new Error('boom'), { data: { at: 'fail' } }));
  return undefined;
};

/** `runTool`, counting the calls it answered (not those it left to a server: an unknown tool). */
function counted() {
  let answered = 0;
  const runner: ToolRunner<Context> = (call, context) => {
    const result = runTool(call, context);
    if (result !== undefined) answered++;
    return result;
  };
  return { runner, answered: () => answered };
}

/** A pool of SDK servers whose tools/call handler runs `runTool`, as routes.ts's servers do. */
function toolServers() {
  let connected = 0;
  const servers = new ExchangePool<Context>(async (transport: ExchangeTransport<Context>) => {
    connected++;
    const server = new Server({ name: 'test', version: '1' }, { capabilities: { tools: {} } });
    server.setRequestHandler(CallToolRequestSchema, async (call) => {
      const result = runTool(call.params, transport.context as Context);
      if (result === undefined) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${call.params.name}`);
      return result;
    });
    await server.connect(transport);
  }, 8);
  return { servers, connected: () => connected };
}

describe('A plain tool call answered without a server', () => {
  it('runs the tool and answers as the server would; any other message goes to a server', async () => {
    const { servers, connected } = toolServers();
    const { runner, answered } = counted();
    const plain = { jsonrpc: '2.0', id: 'a-1', method: 'tools/call', params: { name: 'echo', arguments: { x: 1 } } };
    const answer = await answerExchange(plain, HEADERS, servers, { tenant: 'a' }, runner);
    expect(answer).toEqual({
      status: 200,
      body: {
        result: {
          content: [{ type: 'text', text: '{"tenant":"a","arguments":{"x":1}}' }],
          structuredContent: { tenant: 'a', arguments: { x: 1 } },
        },
        jsonrpc: '2.0',
        id: 'a-1',
      },
    });
    expect(answered()).toBe(1);
    expect(connected()).toBe(0);
    // What the SDK would refuse, read otherwise, or that names no tool: a server answers it.
    const others = [
      { ...plain, params: { ...plain.params, _meta: { progressToken: 1 } } },
      { ...plain, params: { ...plain.params, task: { ttl: 1000 } } },
      { ...plain, params: { name: 'echo', arguments: null } },
      { ...plain, params: { name: 'echo', arguments: [1] } },
      { ...plain, params: { name: 'nothing' } },
      { ...plain, params: { name: 'echo', arguments: JSON.parse('{"__proto__": {"x": 1}, "a": 1}') } },
      { ...plain, id: 1.5 },
      { ...plain, extra: true },
      [plain],
    ];
    for (const message of others) {
      await answerExchange(message, HEADERS, servers, { tenant: 'a' }, runner);
      expect(answered(), JSON.stringify(message)).toBe(1);
    }
    expect(connected()).toBe(1);
    // The protocol version is checked as for any request.
    const version = { ...HEADERS, 'mcp-protocol-version': '1999-01-01' };
    const direct = await answerExchange(plain, version, servers, { tenant: 'a' }, runner);
    expect(direct.status).toBe(400);
    expect(direct).toEqual(await answerExchange(plain, version, servers, { tenant: 'a' }));
    expect(answered()).toBe(1);
  });

  it('answers every message, to the byte, as the SDK server answers it (property, fixed seed)', async () => {
    const direct = toolServers();
    const viaServer = toolServers();
    const { runner, answered } = counted();
    const key = fc.oneof(fc.string({ maxLength: 6 }), fc.constant('__proto__'));
    const json = fc.jsonValue({ maxDepth: 2 });
    const args = fc.oneof(fc.dictionary(key, json, { maxKeys: 4 }), fc.constantFrom(undefined, null, [], 'text', 7));
    const params = fc.oneof(
      fc.record(
        {
          name: fc.constantFrom('echo', 'refuse', 'fail', 'nothing', 42),
          arguments: args,
          _meta: fc.constantFrom({}, { progressToken: 'p' }, 5),
          task: fc.constant({ ttl: 1000 }),
          other: json,
        },
        { requiredKeys: ['name'] },
      ),
      fc.constantFrom(undefined, null, [], 'params'),
    );
    const anyMessage = fc.record(
      {
        jsonrpc: fc.constantFrom('2.0', '2.0', '2.0', '1.0'),
        id: fc.oneof(fc.integer(), fc.string({ maxLength: 4 }), fc.double(), fc.constantFrom(null, true, 2 ** 60)),
        method: fc.constantFrom('tools/call', 'tools/call', 'tools/call', 'ping', 'tools/list'),
        params,
        extra: json,
      },
      { requiredKeys: ['jsonrpc', 'method'] },
    );
    const plainCall = fc.record(
      {
        jsonrpc: fc.constant('2.0'),
        id: fc.oneof(fc.integer(), fc.string({ maxLength: 4 })),
        method: fc.constant('tools/call'),
        params: fc.record(
          {
            name: fc.constantFrom('echo', 'refuse', 'fail', 'nothing'),
            arguments: fc.dictionary(key, json, { maxKeys: 4 }),
          },
          { requiredKeys: ['name'] },
        ),
      },
      { noNullPrototype: true },
    );
    const message = fc.oneof(plainCall, anyMessage);
    await fc.assert(
      fc.asyncProperty(message, async (generated) => {
        // As the route hands it over: parsed from JSON text.
        const sent = JSON.parse(JSON.stringify(generated));
        const a = await answerExchange(sent, HEADERS, direct.servers, { tenant: 't' }, runner);
        const b = await answerExchange(sent, HEADERS, viaServer.servers, { tenant: 't' });
        expect(a.status).toBe(b.status);
        expect(JSON.stringify(a.body)).toBe(JSON.stringify(b.body));
      }),
      { seed: 20261127, numRuns: 400 },
    );
    // Both kinds were met: calls answered without a server, and others.
    expect(answered()).toBeGreaterThan(20);
    expect(direct.connected()).toBeGreaterThan(0);
  });
});
