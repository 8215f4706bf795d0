// The MCP endpoint (spec: Endpoints rules 10–11, Limits). POST /api/v1/mcp carries JSON-RPC over
// MCP's Streamable HTTP transport (src/mcp/exchange.ts), stateless — SDK servers that keep no
// state between requests, JSON answers (events for a client that prefers them) — so any instance
// behind a load balancer can serve any request. The key comes in X-API-Key or as a bearer token.
// GET /api/v1/mcp is an SSE stream with heartbeats and, as the spec says, no server-initiated
// messages yet.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import type { DatabaseOutages } from '../db/index.js';
import { type Authenticator, isOwnHost } from '../http/auth.js';
import { operationBodyLimits, shapeRefusal } from '../http/body-limits.js';
import { publicOrigin } from '../http/errors.js';
import { jsonProblem, jsonText, MAX_JSON_DEPTH } from '../lib/json-body.js';
import type { AuthContext } from '../operations/context.js';
import { DomainError } from '../operations/errors.js';
import type { Operation, Services } from '../operations/registry.js';
import { GET_RESPONSES, JsonRpcErrorSchema, POST_RESPONSES } from './documentation.js';
import { eventStreamHandler } from './event-stream.js';
import { answerExchange, ExchangePool, eventStreamOf, jsonRpcError } from './exchange.js';
import { countedSlots } from './observability.js';
import { createLocalSlots, createRedisSlots } from './slots.js';
import { type ExchangeContext, serverFactory, toolCaller } from './tool-calls.js';
import { buildTools } from './tools.js';

const PATH = '/api/v1/mcp';
/** MCP servers kept idle for the next requests at most (exchange.ts, ExchangePool). */
const MAX_IDLE_SERVERS = 64;

/** JSON-RPC batches were removed from MCP in protocol version 2025-06-18. */
const FIRST_VERSION_WITHOUT_BATCHES = '2025-06-18';
/** A message, or each of a batch, with its tool arguments (if any) left empty. */
function withoutArguments(message: unknown): unknown {
  if (Array.isArray(message)) return message.map(withoutArguments);
  if (typeof message !== 'object' || message === null || !('params' in message)) return message;
  const { params } = message;
  if (typeof params !== 'object' || params === null || !('arguments' in params)) return message;
  return { ...message, params: { ...params, arguments: {} } };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Authenticate the API key without a scope of its own (the MCP endpoint checks per tool). */
    authenticated?: boolean;
  }
}

/**
 * Whether parsed JSON has the shape of a JSON-RPC 2.0 message (a request or notification with a
 * `method`, or a response with a `result` or an `error`), or of a batch of at least one. JSON that
 * is not is an Invalid Request (-32600), not a parse error; the SDK checks the messages' details.
 */
function isJsonRpcShaped(value: unknown): boolean {
  if (Array.isArray(value))
    return value.length > 0 && value.every((item) => !Array.isArray(item) && isJsonRpcShaped(item));
  if (typeof value !== 'object' || value === null) return false;
  const message = value as Record<string, unknown>;
  return message.jsonrpc === '2.0' && (typeof message.method === 'string' || 'result' in message || 'error' in message);
}

/**
 * A POST's body as one JSON-RPC message or batch, or the JSON-RPC refusal to answer (400). Nesting
 * is bounded everywhere here (the SDK walks the message). A value that cannot be stored is refused
 * here outside tools' arguments; inside them it is that tool's validation error, as over REST.
 */
function readMessage(
  bytes: Buffer,
  headers: FastifyRequest['headers'],
): { message: unknown } | { refusal: ReturnType<typeof jsonRpcError> } {
  const decoded = jsonText(bytes, headers['content-type']);
  if ('problem' in decoded) return { refusal: jsonRpcError(-32700, `Parse error: ${decoded.problem}`) };
  let message: unknown;
  try {
    message = JSON.parse(decoded.text);
  } catch {
    return { refusal: jsonRpcError(-32700, 'Parse error: the body is not valid JSON.') };
  }
  const problem = jsonProblem(withoutArguments(message)) ?? jsonProblem(message, MAX_JSON_DEPTH, true);
  if (problem !== undefined) return { refusal: jsonRpcError(-32600, `Invalid Request: ${problem.message}`) };
  if (!isJsonRpcShaped(message)) {
    return {
      refusal: jsonRpcError(-32600, 'Invalid Request: not a JSON-RPC 2.0 message, nor a batch of at least one.'),
    };
  }
  const version = headers['mcp-protocol-version'];
  if (Array.isArray(message) && typeof version === 'string' && version >= FIRST_VERSION_WITHOUT_BATCHES) {
    return {
      refusal: jsonRpcError(-32600, `Invalid Request: protocol version ${version} does not allow JSON-RPC batches.`),
    };
  }
  return { message };
}

/**
 * DNS-rebinding protection: a browser Origin must be an allowed one, or the API's own: the host
 * the request was sent to, when that is a name of this API (a rebound name is the attacker's,
 * sent as both Origin and Host).
 */
function originCheck(config: Pick<Config, 'mcpAllowedOrigins' | 'baseDomain' | 'publicUrl'>) {
  return (request: FastifyRequest): void => {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    if (config.mcpAllowedOrigins.includes(origin)) return;
    try {
      if (new URL(origin).host === request.host && isOwnHost(request.host, config.baseDomain, config.publicUrl)) return;
    } catch {
      /* not a URL: refused below */
    }
    throw new DomainError('forbidden_origin', `Origin '${origin}' may not use this endpoint.`);
  };
}

export interface McpDeps {
  operations: Operation[];
  services: Services;
  /** Judges an open stream's key again (src/mcp/event-stream.ts). */
  authenticator: Pick<Authenticator, 'authenticate'>;
  config: Config;
  redis?: Redis | undefined;
  namespace: string;
  /** Told of a tool that failed for want of the database (logged once per outage). */
  outages?: Pick<DatabaseOutages, 'failed'>;
}

/** The POST route's handler: one JSON-RPC exchange, in one of the tenant's slots. */
function exchangeHandler(deps: McpDeps, checkOrigin: (request: FastifyRequest) => void) {
  const { config } = deps;
  const tools = buildTools(deps.operations);
  const callTool = toolCaller({ tools, services: deps.services, config, outages: deps.outages });
  const createServer = serverFactory(tools, callTool);
  const slots = countedSlots(
    deps.redis
      ? createRedisSlots(deps.redis, config.mcpMaxConcurrent, `${deps.namespace}mcp-slots`)
      : createLocalSlots(config.mcpMaxConcurrent),
  );
  // Servers are kept between requests and never closed: closing one that has nothing pending only
  // builds a "Connection closed" error, stack and all.
  const servers = new ExchangePool<ExchangeContext>(
    (transport) => createServer(transport).connect(transport),
    Math.min(config.mcpMaxConcurrent, MAX_IDLE_SERVERS),
  );
  const bodyLimits = operationBodyLimits(true, config.bodyLimitBytes);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const auth = request.auth as AuthContext;
    checkOrigin(request);
    const bytes = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
    const overShape = shapeRefusal(bytes, bodyLimits);
    if (overShape?.code === 'request_too_large') throw overShape;
    if (overShape) return reply.code(400).send(jsonRpcError(-32600, `Invalid Request: ${overShape.message}`));
    const read = readMessage(bytes, request.headers);
    if ('refusal' in read) return reply.code(400).send(read.refusal);
    const release = await slots.acquire(auth.tenantId, config.mcpSlotWaitMs);
    if (!release) {
      reply.header('retry-after', Math.max(1, Math.ceil(config.mcpSlotWaitMs / 1000)));
      throw new DomainError(
        'concurrency_limit_exceeded',
        'The MCP endpoint is at its limit of simultaneous requests; retry shortly.',
      );
    }
    try {
      const answer = await answerExchange(
        read.message,
        request.headers,
        servers,
        { auth, origin: publicOrigin(request, config.publicUrl), request },
        callTool,
      );
      reply.code(answer.status);
      if (answer.body === undefined) return reply.send();
      if (answer.eventStream) {
        return reply.type('text/event-stream').header('cache-control', 'no-cache').send(eventStreamOf(answer.body));
      }
      return reply.type('application/json').send(JSON.stringify(answer.body));
    } finally {
      await release();
    }
  };
}

export function registerMcpRoutes(app: FastifyInstance, deps: McpDeps): void {
  const { config } = deps;
  app.addSchema(JsonRpcErrorSchema);
  const checkOrigin = originCheck(config);
  const postHandler = exchangeHandler(deps, checkOrigin);
  const getHandler = eventStreamHandler(app, { config, authenticator: deps.authenticator, checkOrigin });
  const mcpBodyLimits = operationBodyLimits(true, config.bodyLimitBytes);
  app.register(async (scope) => {
    // JSON-RPC parse errors are answered in JSON-RPC terms, so the raw text reaches the handler.
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

    scope.post(
      PATH,
      {
        // A tool's answer may show a secret once (a webhook signing secret). A call may carry a
        // commit's files: the largest of the tools' limits, each tool's own judged per call.
        bodyLimit: mcpBodyLimits.bytes,
        config: { authenticated: true, bearerKey: true, secretAnswer: true, bodyLimits: mcpBodyLimits },
        schema: {
          tags: ['MCP'],
          operationId: 'mcpPost',
          summary: 'MCP JSON-RPC (Streamable HTTP)',
          description:
            'MCP JSON-RPC requests, notifications and (protocol 2025-03-26) batches: initialize, ping, tools/list, ' +
            'tools/call. Stateless; answers are JSON (Server-Sent Events for a client whose Accept prefers them). ' +
            'The key goes in X-API-Key or as `Authorization: Bearer <key>`; tools run under its scopes.',
          security: [{ ScopedAPIKeyAuth: [] }],
          response: POST_RESPONSES,
        },
      },
      postHandler,
    );

    scope.get(
      PATH,
      {
        config: { authenticated: true, bearerKey: true },
        schema: {
          tags: ['MCP'],
          operationId: 'mcpStream',
          summary: 'MCP server-to-client stream (SSE)',
          description: `Server-Sent Events for server-initiated messages: a heartbeat comment every SSE_HEARTBEAT_MS (${config.sseHeartbeatMs} ms here) and, as yet, no other messages. Works with or without an Mcp-Session-Id. A workspace holds at most ${config.mcpMaxStreamsPerTenant} open on one server (MCP_MAX_STREAMS_PER_TENANT); one more answers 429 concurrency_limit_exceeded. A stream whose API key is revoked, locked or expires ends within a second, with a comment saying so.`,
          security: [{ ScopedAPIKeyAuth: [] }],
          response: GET_RESPONSES,
        },
      },
      getHandler,
    );
  });
}
