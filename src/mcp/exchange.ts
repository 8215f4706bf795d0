// One POST of MCP's Streamable HTTP transport, stateless and answered as JSON: the rules of the
// SDK's WebStandardStreamableHTTPServerTransport in that mode (its `handlePostRequest`), applied to
// the body Fastify has parsed, and an in-process transport that hands the messages to the MCP
// server and collects its answers. The SDK's own transport does the same through Fetch API objects
// (a Request with its Headers, a Response read back through a ReadableStream, an AbortSignal),
// built for every call, with its server closed after each: nearly half of a tool call's server CPU
// (bench/README.md), for nothing a JSON answer needs. A plain tool call is answered without a
// server at all (`plainToolCall`, below).
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type CallToolResult,
  ErrorCode,
  isInitializeRequest,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type MessageExtraInfo,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';

/** The SDK's bound on a batch (server/requestBody.js). */
const MAX_BATCH_SIZE = 100;

export interface ExchangeAnswer {
  status: number;
  /** The JSON answer; undefined for 202 (notifications and responses only). */
  body?: unknown;
  /** A 200's answer goes as Server-Sent Events (`eventStreamOf`), for a client that prefers them. */
  eventStream?: boolean;
}

/**
 * How a POST's answer may be sent, from its Accept header (media ranges, their `q`, case
 * ignored): `json` unless the client ranks an event stream (`text/event-stream`, `text/*`) above
 * JSON (`application/json`, `application/*`; `*\/*` counts for both), `event-stream` then, or
 * undefined when it takes neither (406). No Accept takes anything: JSON. The SDK's clients send
 * both at the same rank, and get JSON; a plain JSON-RPC client sending `application/json`,
 * `*\/*` or nothing gets JSON too (the SDK's own transport would refuse it with 406).
 */
export function answerFormat(accept: string | undefined): 'json' | 'event-stream' | undefined {
  if (accept === undefined || accept.trim() === '') return 'json';
  let json = 0;
  let stream = 0;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = params.find((param) => /^q\s*=/.test(param));
    const quality = q === undefined ? 1 : Number(q.slice(q.indexOf('=') + 1).trim());
    if (!(quality >= 0 && quality <= 1)) continue; // not a quality: the range is ignored
    if (type === 'application/json' || type === 'application/*' || type === '*/*') json = Math.max(json, quality);
    if (type === 'text/event-stream' || type === 'text/*' || type === '*/*') stream = Math.max(stream, quality);
  }
  if (json === 0 && stream === 0) return undefined;
  return stream > json ? 'event-stream' : 'json';
}

/** A 200's answer as Server-Sent Events, as the SDK's transport streams it: one `message` event per answer. */
export function eventStreamOf(body: unknown): string {
  const messages = Array.isArray(body) ? body : [body];
  return messages.map((message) => `event: message\ndata: ${JSON.stringify(message)}\n\n`).join('');
}

/** A JSON-RPC error that answers no request in particular (`id: null`). */
export const jsonRpcError = (code: number, message: string) => ({ jsonrpc: '2.0', error: { code, message }, id: null });

const refusal = (status: number, code: number, message: string): ExchangeAnswer => ({
  status,
  body: jsonRpcError(code, message),
});

/** What a `tools/call` request names, as the SDK's server hands it to its handler. */
export interface ToolCall {
  name: string;
  arguments?: Record<string, unknown> | undefined;
}

/**
 * Runs a tool for an exchange's context: its result, in the order of the SDK's CallToolResultSchema
 * (`content`, then `structuredContent` or `isError`), or undefined for a tool it does not know.
 * It does not reject: a tool's failure is a result (`isError`).
 */
export type ToolRunner<Context> = (call: ToolCall, context: Context) => Promise<CallToolResult> | undefined;

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const REQUEST_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);

/**
 * A message that is certainly a `tools/call` request the SDK's server would take as it is: the
 * keys of a JSON-RPC request and no others (its schema is strict), an integer or string id, and
 * params of a name and, if any, an object of arguments (no `__proto__` key among them) — no
 * `_meta`, no `task`, nothing else. Its answer is then the tool's result in `{ result, jsonrpc,
 * id }`, what the server would send, and the message is answered without one. Seven zod passes
 * over it and its result (the exchange's own parse below, the SDK's three schema guards, the
 * request parsed twice, the result once), an AbortController and a promise chain: without them a
 * tool call takes a quarter to nearly half less of the server's CPU (measured with bench/run.ts).
 * Anything else is left to a server.
 */
function plainToolCall(message: unknown): { id: RequestId; params: ToolCall } | undefined {
  if (!isPlainObject(message) || message.jsonrpc !== '2.0' || message.method !== 'tools/call') return undefined;
  const { id, params } = message;
  if (typeof id !== 'string' && !Number.isSafeInteger(id)) return undefined;
  for (const key in message) if (!REQUEST_KEYS.has(key)) return undefined;
  if (!isPlainObject(params) || typeof params.name !== 'string') return undefined;
  for (const key in params) if (key !== 'name' && key !== 'arguments') return undefined;
  const args = params.arguments;
  // The SDK's copy of the arguments leaves out an own `__proto__` key, which its handler would not
  // see (the route refuses one before any exchange, src/lib/json-body.ts).
  if (args !== undefined && (!isPlainObject(args) || Object.hasOwn(args, '__proto__'))) return undefined;
  return { id: id as RequestId, params: params as unknown as ToolCall };
}

/**
 * A request's answer, as the SDK's server sends it (Protocol._onrequest, its key order too): the
 * result, or, should the handler reject (a runner does not), the error it rejected with.
 */
async function answerOf(id: RequestId, result: Promise<CallToolResult>): Promise<JSONRPCMessage> {
  try {
    return { result: await result, jsonrpc: '2.0', id };
  } catch (error) {
    const { code, message, data } = error as { code?: unknown; message?: string; data?: unknown };
    return {
      jsonrpc: '2.0',
      id,
      error: {
        code: Number.isSafeInteger(code) ? (code as number) : ErrorCode.InternalError,
        message: message ?? 'Internal error',
        ...(data !== undefined && { data }),
      },
    };
  }
}

/** The SDK transport's refusal of an MCP-Protocol-Version it does not support (not for an initialize). */
function unsupportedVersion(version: string | string[] | undefined): ExchangeAnswer | undefined {
  if (typeof version !== 'string' || SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return undefined;
  return refusal(
    400,
    -32000,
    `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
  );
}

// Told apart by shape: each message has passed JSONRPCMessageSchema already.
const isRequest = (message: JSONRPCMessage): message is JSONRPCMessage & { id: RequestId; method: string } =>
  'method' in message && 'id' in message;
const isAnswer = (message: JSONRPCMessage): message is JSONRPCMessage & { id: RequestId } =>
  'id' in message && ('result' in message || 'error' in message);

/**
 * The in-process transport of an MCP server: `dispatch` gives the server one exchange's messages
 * and resolves with the answers to the requests awaited, in their order. It serves one exchange at
 * a time, and `context` is that exchange's (the caller's key, say), for the server's handlers.
 */
export class ExchangeTransport<Context = unknown> implements Transport {
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  context: Context | undefined;
  private answers = new Map<RequestId, JSONRPCMessage>();
  private awaited: RequestId[] = [];
  private settle: ((answers: JSONRPCMessage[]) => void) | undefined;
  /** Requests given to the server and not yet answered: while any is, the server is not idle. */
  private unanswered = 0;

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.onclose?.();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    // A stateless exchange has no stream for the server's own requests or notifications (this
    // server sends none: no sampling, elicitation or progress); only answers are kept.
    if (!isAnswer(message)) return;
    this.unanswered--;
    this.answers.set(message.id, message);
    if (this.settle && this.awaited.every((id) => this.answers.has(id))) {
      this.settle(this.awaited.map((id) => this.answers.get(id) as JSONRPCMessage));
    }
  }

  dispatch(messages: JSONRPCMessage[], awaited: RequestId[], extra: MessageExtraInfo): Promise<JSONRPCMessage[]> {
    this.awaited = awaited;
    const answered = new Promise<JSONRPCMessage[]>((resolve) => {
      this.settle = resolve;
    });
    for (const message of messages) {
      if (isRequest(message)) this.unanswered++;
      this.onmessage?.(message, extra);
    }
    return answered;
  }

  /**
   * Ready for another exchange when the server has answered every request it was given (none
   * cancelled, none still running behind an answer to the same id), so that no late answer can
   * reach the next exchange: then cleared for it.
   */
  reset(): boolean {
    if (this.unanswered !== 0) return false;
    this.answers = new Map();
    this.awaited = [];
    this.settle = undefined;
    this.context = undefined;
    return true;
  }
}

/**
 * MCP servers kept for reuse, each connected to its own transport (building one and its handlers
 * for every request was about a tenth of a tool call's CPU, bench/README.md). A transport is taken
 * for one exchange and given back after it, and kept only when its server is idle (`reset`).
 */
export class ExchangePool<Context> {
  private readonly idle: ExchangeTransport<Context>[] = [];

  constructor(
    /** Connects a new server to `transport`; its handlers read the exchange's `transport.context`. */
    private readonly connect: (transport: ExchangeTransport<Context>) => Promise<void>,
    private readonly maxIdle: number,
  ) {}

  async take(context: Context): Promise<ExchangeTransport<Context>> {
    let transport = this.idle.pop();
    if (transport === undefined) {
      transport = new ExchangeTransport<Context>();
      await this.connect(transport);
    }
    transport.context = context;
    return transport;
  }

  give(transport: ExchangeTransport<Context>): void {
    if (transport.reset() && this.idle.length < this.maxIdle) this.idle.push(transport);
  }
}

/**
 * Answers one POST: `body` is its parsed JSON, `headers` its request headers, `context` what the
 * server's handlers are given of it (through a transport of `pool`); `runTool`, if given, answers a
 * plain tool call (`plainToolCall`) without a server, and must be what the servers' own tools/call
 * handler runs. As the SDK's transport in
 * stateless JSON mode, but for Accept (`answerFormat`: 406 only when it takes neither JSON nor an
 * event stream, and the answer as events when it prefers them); 400 for a batch over 100, a
 * message that is not JSON-RPC, an initialize in a batch, or an unsupported MCP-Protocol-Version;
 * 202 with no body when nothing needs an answer (notifications, answers, requests the batch itself
 * cancels); else 200 with the answer, or the array of the batch's answers.
 */
export async function answerExchange<Context>(
  body: unknown,
  headers: { accept?: string | undefined; 'mcp-protocol-version'?: string | string[] | undefined },
  pool: ExchangePool<Context>,
  context: Context,
  runTool?: ToolRunner<Context>,
): Promise<ExchangeAnswer> {
  const format = answerFormat(headers.accept);
  if (format === undefined) {
    return refusal(406, -32000, 'Not Acceptable: Client must accept application/json or text/event-stream');
  }
  const answer = await answerMessages(body, headers, pool, context, runTool);
  return format === 'event-stream' && answer.status === 200 ? { ...answer, eventStream: true } : answer;
}

/** The exchange's messages answered (`answerExchange`, its Accept aside). */
async function answerMessages<Context>(
  body: unknown,
  headers: { 'mcp-protocol-version'?: string | string[] | undefined },
  pool: ExchangePool<Context>,
  context: Context,
  runTool?: ToolRunner<Context>,
): Promise<ExchangeAnswer> {
  if (Array.isArray(body) && body.length > MAX_BATCH_SIZE) {
    return refusal(400, -32600, `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages`);
  }
  const call = runTool && plainToolCall(body);
  if (runTool && call) {
    const refused = unsupportedVersion(headers['mcp-protocol-version']);
    if (refused !== undefined) return refused;
    const result = runTool(call.params, context);
    if (result !== undefined) return { status: 200, body: await answerOf(call.id, result) };
  }
  let messages: JSONRPCMessage[];
  try {
    messages = (Array.isArray(body) ? body : [body]).map((message) => JSONRPCMessageSchema.parse(message));
  } catch {
    return refusal(400, -32700, 'Parse error: Invalid JSON-RPC message');
  }
  const initializing = messages.some(
    (message) => isRequest(message) && message.method === 'initialize' && isInitializeRequest(message),
  );
  // In a batch of any size (JSON-RPC batches carry no initialize: MCP 2025-03-26).
  if (initializing && Array.isArray(body)) {
    return refusal(400, -32600, 'Invalid Request: an initialize request cannot be sent in a batch');
  }
  const refused = initializing ? undefined : unsupportedVersion(headers['mcp-protocol-version']);
  if (refused !== undefined) return refused;
  // A request its own batch cancels gets no answer (the SDK drops it): it is not waited for.
  const cancelled = new Set(
    messages.flatMap((message) =>
      'method' in message && message.method === 'notifications/cancelled' && !('id' in message)
        ? [(message.params as { requestId?: RequestId } | undefined)?.requestId]
        : [],
    ),
  );
  const awaited = messages
    .filter(isRequest)
    .map((message) => message.id)
    .filter((id) => !cancelled.has(id));
  const transport = await pool.take(context);
  // An initialize leaves the client's capabilities on its server, which no other exchange may see:
  // that server is not given back.
  const giveBack = () => {
    if (!initializing) pool.give(transport);
  };
  if (awaited.length === 0) {
    // Given back at once: it is kept only if no request was sent (a request cancelled here may still run).
    void transport.dispatch(messages, awaited, {});
    giveBack();
    return { status: 202 };
  }
  const answers = await transport.dispatch(messages, awaited, {});
  giveBack();
  // A batch is answered with an array (JSON-RPC 2.0 §6), however few of its requests are answered.
  return { status: 200, body: Array.isArray(body) ? answers : answers[0] };
}
