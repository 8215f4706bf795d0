// Tool calls: each runs its operation through the one pipeline (src/operations/invoke.ts), under the
// calling key's scopes, and a failure comes back as a tool error whose text is the spec's error body.
// And the MCP servers that answer tools/list and tools/call for an exchange (src/mcp/exchange.ts).
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode as JsonRpcErrorCode,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import type { DatabaseOutages } from '../db/index.js';
import { operationBodyLimits, valueRefusal } from '../http/body-limits.js';
import { API_VERSION } from '../http/docs.js';
import { jsonProblem } from '../lib/json-body.js';
import type { AuthContext } from '../operations/context.js';
import { DomainError, errorBody, summarize } from '../operations/errors.js';
import { invoke } from '../operations/invoke.js';
import type { Services } from '../operations/registry.js';
import type { ExchangeTransport, ToolCall } from './exchange.js';
import { observeToolCall } from './observability.js';
import { bindArguments, type Tool, toolAllowed } from './tools.js';

/** What an MCP server's handlers are given of the request they serve. */
export interface ExchangeContext {
  auth: AuthContext;
  /** The API's public origin as this request reached it, for errors' `doc_url`. */
  origin: string;
  request: FastifyRequest;
}

const INSTRUCTIONS =
  'Tools for one workspace of an AI support-agent platform: apps, knowledge (sources, documents, ' +
  'translations, knowledge gaps, custom and smart data sources), tasks, users, simulations, coverage, ' +
  "workflows, analytics and the agent. You see only the tools your API key's scopes allow. Errors come " +
  'back as tool errors (isError) whose text is the JSON {"error": {type, code, message, param, doc_url}}.';

function toolError(
  origin: string,
  code: Parameters<typeof errorBody>[1],
  message: string,
  param?: string,
  eventId?: string,
): CallToolResult {
  const { body } = errorBody(origin, code, message, param, eventId);
  // The error as JSON text only: `structuredContent` must match the tool's `outputSchema` (its
  // success record), and the SDK's client refuses a result whose structured content does not,
  // error or not, so the caller would never see the error.
  return { content: [{ type: 'text', text: JSON.stringify(body) }], isError: true };
}

export interface ToolCallDeps {
  tools: Map<string, Tool>;
  services: Services;
  config: Pick<Config, 'bodyLimitBytes'>;
  /** Told of a tool that failed for want of the database (logged once per outage). */
  outages?: Pick<DatabaseOutages, 'failed'> | undefined;
}

async function runTool(
  { services, config, outages }: ToolCallDeps,
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
      outages,
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

/**
 * Runs a tool for an exchange (exchange.ts, ToolRunner): a plain call's, answered without a
 * server, and the servers' tools/call handler's. Undefined for a tool that does not exist.
 */
export function toolCaller(deps: ToolCallDeps) {
  return (call: ToolCall, context: ExchangeContext): Promise<CallToolResult> | undefined => {
    const tool = deps.tools.get(call.name);
    return tool === undefined
      ? undefined
      : observeToolCall(tool.operation, () => runTool(deps, tool, call.arguments, context), context.request);
  };
}

/** Builds MCP servers whose handlers serve the exchange their transport has at the time. */
export function serverFactory(tools: Map<string, Tool>, callTool: ReturnType<typeof toolCaller>) {
  // One validator for every server: the SDK would otherwise build an Ajv instance for each (a
  // quarter of a tool call's CPU), though it validates nothing here (no elicitation).
  const jsonSchemaValidator = new AjvJsonSchemaValidator();
  return (transport: ExchangeTransport<ExchangeContext>): Server => {
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
  };
}
