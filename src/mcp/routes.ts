// The MCP endpoint (spec: Endpoints rules 10–11, Limits). POST /api/v1/mcp carries JSON-RPC over
// MCP's Streamable HTTP transport (src/mcp/exchange.ts), stateless — SDK servers that keep no
// state between requests, JSON answers (events for a client that prefers them) — so any instance
// behind a load balancer can serve any request. The key comes in X-API-Key or as a bearer token.
// GET /api/v1/mcp is an SSE stream with heartbeats and, as the spec says, no server-initiated
// messages yet.
import type { ServerResponse } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode as JsonRpcErrorCode,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import type { DatabaseOutages } from '../db/outage.js';
import { type Authenticator, isOwnHost, KEY_CACHE_TTL_MS, presentedKey } from '../http/auth.js';
import { operationBodyLimits, shapeRefusal, valueRefusal } from '../http/body-limits.js';
import { API_VERSION } from '../http/docs.js';
import { publicOrigin } from '../http/errors.js';
import { openEventStream } from '../http/negotiation.js';
import { jsonProblem, jsonText, MAX_JSON_DEPTH } from '../lib/json-body.js';
import { countedSlots, observeToolCall } from '../observability/mcp.js';
import type { AuthContext } from '../operations/context.js';
import { DomainError, errorBody, summarize } from '../operations/errors.js';
import { invoke } from '../operations/invoke.js';
import type { Operation, Services } from '../operations/registry.js';
import {
  answerExchange,
  ExchangePool,
  type ExchangeTransport,
  eventStreamOf,
  jsonRpcError,
  type ToolCall,
} from './exchange.js';
import { createLocalSlots, createRedisSlots } from './slots.js';
import { bindArguments, buildTools, type Tool, toolAllowed } from './tools.js';

const PATH = '/api/v1/mcp';
/** `Retry-After` of a stream refused at the tenant's limit: streams end when their clients go. */
const STREAM_RETRY_AFTER_S = 5;
/**
 * How often the keys of open event streams are judged again. A key's cached judgement is at most
 * KEY_CACHE_TTL_MS old, so the stream of a key revoked, locked or expired is judged afresh by
 * KEY_CACHE_TTL_MS and one tick after it, leaving the rest of the second for the lookup: it ends
 * within a second on every instance, as a request with the key is refused.
 */
const STREAM_JUDGE_MS = (1000 - KEY_CACHE_TTL_MS) / 2;
/** MCP servers kept idle for the next requests at most (exchange.ts, ExchangePool). */
const MAX_IDLE_SERVERS = 64;

/** The open event streams of one key (and Host), judged again together. */
interface StreamsOfKey {
  apiKey: string;
  host: string | undefined;
  streams: Set<ServerResponse>;
  judging: boolean;
}

/** What an MCP server's handlers are given of the request they serve. */
interface ExchangeContext {
  auth: AuthContext;
  /** The API's public origin as this request reached it, for errors' `doc_url`. */
  origin: string;
  request: FastifyRequest;
}
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

const INSTRUCTIONS =
  'Tools for one workspace of an AI support-agent platform: apps, knowledge (sources, documents, ' +
  'translations, knowledge gaps, custom and smart data sources), tasks, users, simulations, coverage, ' +
  "workflows, analytics and the agent. You see only the tools your API key's scopes allow. Errors come " +
  'back as tool errors (isError) whose text is the JSON {"error": {type, code, message, param, doc_url}}.';

const JsonRpcId = Type.Union([Type.String(), Type.Number(), Type.Null()]);
const JsonRpcErrorObject = Type.Object({
  code: Type.Integer({ description: 'JSON-RPC error code: -32700 parse error, -32600 invalid request, …' }),
  message: Type.String(),
  data: Type.Optional(Type.Unknown()),
});

/** The JSON-RPC 2.0 error shape, in which the transport's refusals are answered (not the REST error body). */
export const JsonRpcErrorSchema = Type.Object(
  { jsonrpc: Type.Literal('2.0'), error: JsonRpcErrorObject, id: JsonRpcId },
  { $id: 'JsonRpcError', title: 'JsonRpcError' },
);

const JsonRpcAnswer = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    id: JsonRpcId,
    result: Type.Optional(Type.Object({}, { additionalProperties: true })),
    error: Type.Optional(JsonRpcErrorObject),
  },
  { title: 'JsonRpcResponse' },
);

// What the endpoint answers, for the document: the transport's JSON-RPC answers and refusals, and
// the REST error body for what is refused before JSON-RPC is read (src/http/docs.ts adds headers).
const ErrorRef = Type.Ref('Error');
const JsonRpcErrorRef = Type.Ref('JsonRpcError');
const POST_RESPONSES = {
  200: {
    description:
      "The request's JSON-RPC answer, or the array of a batch's answers; for a client whose Accept ranks " +
      '`text/event-stream` above JSON, the same as Server-Sent Events, one `message` event per answer.',
    content: {
      'application/json': { schema: Type.Union([JsonRpcAnswer, Type.Array(JsonRpcAnswer)]) },
      'text/event-stream': { schema: { type: 'string' } },
    },
  },
  202: Type.Null({ description: 'Only notifications or responses were sent: accepted, no body.' }),
  400: Type.Union([JsonRpcErrorRef, ErrorRef], {
    description:
      'A JSON-RPC error (`id: null`): -32700 a body that is not JSON or not UTF-8, or a message that is not JSON-RPC; ' +
      '-32600 an invalid request (not JSON-RPC 2.0, an empty batch, a batch over 100 or under protocol 2025-06-18 ' +
      'or later, an initialize in a batch); -32000 an unsupported MCP-Protocol-Version. A content type other than ' +
      'JSON: the error body, `bad_request`.',
  }),
  401: ErrorRef,
  403: ErrorRef,
  406: Type.Ref('JsonRpcError', {
    description: 'Accept takes neither application/json nor text/event-stream: a JSON-RPC error, -32000.',
  }),
  413: ErrorRef,
  429: ErrorRef,
  500: ErrorRef,
  503: ErrorRef,
};
const GET_RESPONSES = {
  200: {
    description: 'The stream: a heartbeat comment every SSE_HEARTBEAT_MS, and as yet no messages.',
    content: { 'text/event-stream': { schema: { type: 'string' } } },
  },
  401: ErrorRef,
  403: ErrorRef,
  413: ErrorRef,
  429: ErrorRef,
  500: ErrorRef,
  503: ErrorRef,
};

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

export function registerMcpRoutes(
  app: FastifyInstance,
  deps: {
    operations: Operation[];
    services: Services;
    /** Judges an open stream's key again every STREAM_JUDGE_MS. */
    authenticator: Pick<Authenticator, 'authenticate'>;
    config: Config;
    redis?: Redis | undefined;
    namespace: string;
    /** Told of a tool that failed for want of the database (logged once per outage). */
    outages?: Pick<DatabaseOutages, 'failed'>;
  },
): void {
  const { config, services } = deps;
  app.addSchema(JsonRpcErrorSchema);
  const tools = buildTools(deps.operations);
  // One validator for every per-request server: the SDK would otherwise build an Ajv instance for
  // each (a quarter of a tool call's CPU), though it validates nothing here (no elicitation).
  const jsonSchemaValidator = new AjvJsonSchemaValidator();
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
  const streams = new Set<ServerResponse>();
  /** Open event streams per tenant, on this process. */
  const streamsOf = new Map<string, number>();
  /**
   * Open event streams by the key and Host they were opened with. Every STREAM_JUDGE_MS each key
   * is judged again, once for all its streams, while any stream is open; a stream of a key no
   * longer valid ends. A database that does not answer ends none, and a key has one judgement
   * under way at most (a slow database is asked once, not per tick). The judgement is no use of
   * the key: `last_used_at` is not moved by an open stream.
   */
  const streamsByKey = new Map<string, StreamsOfKey>();
  let judgeTimer: NodeJS.Timeout | undefined;
  async function judgeKey(group: StreamsOfKey): Promise<void> {
    if (group.judging) return;
    group.judging = true;
    try {
      await deps.authenticator.authenticate(group.apiKey, group.host, { touch: false });
    } catch (error) {
      if (!(error instanceof DomainError)) return;
      for (const raw of group.streams) {
        if (!raw.writableEnded && !raw.destroyed) raw.end(': closed: the API key is no longer valid\n\n');
      }
    } finally {
      group.judging = false;
    }
  }
  function watchKey(raw: ServerResponse, apiKey: string, host: string | undefined): () => void {
    const id = `${host ?? ''}\n${apiKey}`;
    let group = streamsByKey.get(id);
    if (!group) {
      group = { apiKey, host, streams: new Set(), judging: false };
      streamsByKey.set(id, group);
    }
    group.streams.add(raw);
    judgeTimer ??= setInterval(() => {
      for (const each of streamsByKey.values()) void judgeKey(each);
    }, STREAM_JUDGE_MS).unref();
    const watched = group;
    return () => {
      watched.streams.delete(raw);
      if (watched.streams.size === 0) streamsByKey.delete(id);
      if (streamsByKey.size === 0 && judgeTimer) {
        clearInterval(judgeTimer);
        judgeTimer = undefined;
      }
    };
  }

  // Closing: open streams end, and a stream asked for now (its key judged while the server began
  // to close) is refused, or it would hold the close up with no judge left to end it.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    for (const stream of streams) stream.end();
    streams.clear();
    clearInterval(judgeTimer);
    judgeTimer = undefined;
  });

  /**
   * DNS-rebinding protection: a browser Origin must be an allowed one, or the API's own: the host
   * the request was sent to, when that is a name of this API (a rebound name is the attacker's,
   * sent as both Origin and Host).
   */
  function checkOrigin(request: FastifyRequest): void {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    if (config.mcpAllowedOrigins.includes(origin)) return;
    try {
      if (new URL(origin).host === request.host && isOwnHost(request.host, config.baseDomain, config.publicUrl)) return;
    } catch {
      /* not a URL: refused below */
    }
    throw new DomainError('forbidden_origin', `Origin '${origin}' may not use this endpoint.`);
  }

  const toolError = (
    origin: string,
    code: Parameters<typeof errorBody>[1],
    message: string,
    param?: string,
    eventId?: string,
  ): CallToolResult => {
    const { body } = errorBody(origin, code, message, param, eventId);
    // The error as JSON text only: `structuredContent` must match the tool's `outputSchema` (its
    // success record), and the SDK's client refuses a result whose structured content does not,
    // error or not, so the caller would never see the error.
    return { content: [{ type: 'text', text: JSON.stringify(body) }], isError: true };
  };

  /**
   * Runs a tool for an exchange (exchange.ts, ToolRunner): a plain call's, answered without a
   * server, and the servers' tools/call handler's. Undefined for a tool that does not exist.
   */
  function callTool(call: ToolCall, context: ExchangeContext): Promise<CallToolResult> | undefined {
    const tool = tools.get(call.name);
    return tool === undefined
      ? undefined
      : observeToolCall(tool.operation.id, () => runTool(tool, call.arguments, context), context.request);
  }

  async function runTool(
    tool: Tool,
    args: Record<string, unknown> | undefined,
    { auth, request, origin }: ExchangeContext,
  ): Promise<CallToolResult> {
    const given = args ?? {};
    const outcome = await invoke(tool.operation, {
      auth,
      services,
      // Past the scope check: the arguments within the tool's limits, storable, and split into parts.
      bind: () => {
        const overLimit = valueRefusal(given, operationBodyLimits(tool.operation.largeBody, config.bodyLimitBytes));
        if (overLimit) throw overLimit;
        const problem = jsonProblem(given);
        if (problem !== undefined) throw new DomainError('validation_error', problem.message, problem.param);
        return bindArguments(tool, given);
      },
      validators: tool.validators,
      failure: {
        places: [args],
        outages: deps.outages,
        logUnexpected: (eventId, error) =>
          request.log.error({ event_id: eventId, tool: tool.definition.name, err: summarize(error) }, 'tool failed'),
      },
    });
    if ('failure' in outcome) {
      const { code, message, param, eventId } = outcome.failure;
      return toolError(origin, code, message, param, eventId);
    }
    const result = outcome.body as Record<string, unknown>;
    return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
  }

  /** A server for `transport`; each handler serves the exchange the transport has now (its context). */
  function createServer(transport: ExchangeTransport<ExchangeContext>): Server {
    // Read when a request arrives and kept for its whole handling.
    const exchange = () => transport.context as ExchangeContext;
    const server = new Server(
      { name: 'workspace-api', version: API_VERSION },
      { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS, jsonSchemaValidator },
    );
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      const { auth } = exchange();
      return { tools: [...tools.values()].filter((tool) => toolAllowed(tool, auth)).map((tool) => tool.definition) };
    });
    server.setRequestHandler(CallToolRequestSchema, async (call) => {
      const result = callTool(call.params, exchange());
      if (result === undefined) throw new McpError(JsonRpcErrorCode.InvalidParams, `Unknown tool: ${call.params.name}`);
      return result;
    });
    return server;
  }

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
      async (request: FastifyRequest, reply: FastifyReply) => {
        const auth = request.auth as AuthContext;
        checkOrigin(request);
        const bytes = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
        const overShape = shapeRefusal(bytes, mcpBodyLimits);
        if (overShape?.code === 'request_too_large') throw overShape;
        if (overShape) return reply.code(400).send(jsonRpcError(-32600, `Invalid Request: ${overShape.message}`));
        const decoded = jsonText(bytes, request.headers['content-type']);
        if ('problem' in decoded) return reply.code(400).send(jsonRpcError(-32700, `Parse error: ${decoded.problem}`));
        let message: unknown;
        try {
          message = JSON.parse(decoded.text);
        } catch {
          return reply.code(400).send(jsonRpcError(-32700, 'Parse error: the body is not valid JSON.'));
        }
        // Nesting is bounded everywhere here (the SDK walks the message). A value that cannot be
        // stored is refused here outside tools' arguments; inside them it is that tool's
        // validation error, as over REST (below, per call).
        const problem = jsonProblem(withoutArguments(message)) ?? jsonProblem(message, MAX_JSON_DEPTH, true);
        if (problem !== undefined) {
          return reply.code(400).send(jsonRpcError(-32600, `Invalid Request: ${problem.message}`));
        }
        if (!isJsonRpcShaped(message)) {
          return reply
            .code(400)
            .send(jsonRpcError(-32600, 'Invalid Request: not a JSON-RPC 2.0 message, nor a batch of at least one.'));
        }
        const version = request.headers['mcp-protocol-version'];
        if (Array.isArray(message) && typeof version === 'string' && version >= FIRST_VERSION_WITHOUT_BATCHES) {
          return reply
            .code(400)
            .send(
              jsonRpcError(-32600, `Invalid Request: protocol version ${version} does not allow JSON-RPC batches.`),
            );
        }
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
            message,
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
      },
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
      async (request: FastifyRequest, reply: FastifyReply) => {
        const { tenantId } = request.auth as AuthContext;
        checkOrigin(request);
        // A stream holds a socket and a timer for as long as the client keeps it: a tenant's are
        // counted, so one tenant cannot hold the process's sockets.
        const open = streamsOf.get(tenantId) ?? 0;
        if (open >= config.mcpMaxStreamsPerTenant) {
          reply.header('retry-after', STREAM_RETRY_AFTER_S);
          throw new DomainError(
            'concurrency_limit_exceeded',
            `This workspace has ${open} MCP event streams open on this server, its limit (MCP_MAX_STREAMS_PER_TENANT); close one first.`,
          );
        }
        if (closing) {
          throw new DomainError('service_unavailable', 'This server is shutting down: open the stream again.');
        }
        const raw = openEventStream(reply);
        // The client left before this ran (while it was authenticated): its 'close' has been
        // emitted already and would never free the place, nor stop the heartbeat.
        if (raw.destroyed || request.raw.destroyed || raw.socket === null || raw.socket.destroyed) {
          raw.destroy();
          return;
        }
        streamsOf.set(tenantId, open + 1);
        raw.write(': connected\n\n');
        // A string: the request was authenticated with it.
        const unwatch = watchKey(raw, presentedKey(request.headers, true) as string, request.headers.host);
        const timer = setInterval(() => {
          if (raw.writableEnded || raw.destroyed) return;
          raw.write(`: heartbeat ${new Date().toISOString()}\n\n`);
        }, config.sseHeartbeatMs);
        streams.add(raw);
        let ended = false;
        const end = () => {
          if (ended) return;
          ended = true;
          clearInterval(timer);
          unwatch();
          streams.delete(raw);
          const left = (streamsOf.get(tenantId) ?? 1) - 1;
          if (left === 0) streamsOf.delete(tenantId);
          else streamsOf.set(tenantId, left);
        };
        raw.on('close', end);
        request.raw.on('close', end);
      },
    );
  });
}
