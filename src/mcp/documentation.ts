// What the MCP endpoint answers, for the OpenAPI document: the transport's JSON-RPC answers and
// refusals, and the REST error body for what is refused before JSON-RPC is read (src/http/docs.ts
// adds the headers).
import { Type } from '@sinclair/typebox';

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

const ErrorRef = Type.Ref('Error');
const JsonRpcErrorRef = Type.Ref('JsonRpcError');
export const POST_RESPONSES = {
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
export const GET_RESPONSES = {
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
