// MCP tool calls and slots in the metrics and traces: each tool call is counted and timed under
// its operation id (transport `mcp`), in a span of its own; the slots this process holds are counted.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyRequest } from 'fastify';
import { requestSpan } from '../http/observability.js';
import { countMcpSlot, recordRefusal, requestRecorder } from '../observability/metrics.js';
import { withSpan } from '../observability/tracing.js';
import { ERROR_CATALOGUE, type ErrorCode } from '../operations/errors.js';
import type { SlotPool } from './slots.js';

const recorders = new Map<string, (status: number, seconds: number) => void>();

/** The code of a tool's error result (its text is the API's error body), or internal_error. */
function errorCode(result: CallToolResult): ErrorCode {
  const first = result.content[0];
  try {
    const code = first?.type === 'text' ? (JSON.parse(first.text) as { error?: { code?: unknown } }).error?.code : null;
    if (typeof code === 'string' && code in ERROR_CATALOGUE) return code as ErrorCode;
  } catch {
    /* not the API's error body */
  }
  return 'internal_error';
}

/**
 * Runs a tool call (`run`) counted, timed and traced under its operation's id, its span a child of
 * `request`'s (and of its steps' spans, for an operation that traces them).
 */
export async function observeToolCall(
  operation: { id: string; tracesSteps?: boolean | undefined },
  run: () => Promise<CallToolResult>,
  request?: FastifyRequest,
): Promise<CallToolResult> {
  const operationId = operation.id;
  let record = recorders.get(operationId);
  if (record === undefined) {
    record = requestRecorder(operationId, 'tools/call', 'mcp');
    recorders.set(operationId, record);
  }
  const started = performance.now();
  const result = await withSpan(
    `tool ${operationId}`,
    { 'workspace.operation_id': operationId },
    (span) =>
      run().then((answer) => {
        if (answer.isError) span?.setAttribute('workspace.error_code', errorCode(answer));
        return answer;
      }),
    { parent: request && requestSpan(request), ambient: operation.tracesSteps === true },
  );
  let status = 200;
  if (result.isError) {
    const code = errorCode(result);
    status = ERROR_CATALOGUE[code].status;
    recordRefusal(code, 'mcp');
  }
  record(status, (performance.now() - started) / 1000);
  return result;
}

/** `pool`, its slots taken and given back by this process counted (mcp_slots_in_use). */
export function countedSlots(pool: SlotPool): SlotPool {
  return {
    async acquire(tenantId, waitMs) {
      const release = await pool.acquire(tenantId, waitMs);
      if (release === null) return null;
      countMcpSlot(1);
      let released = false;
      return async () => {
        if (!released) {
          released = true;
          countMcpSlot(-1);
        }
        await release();
      };
    },
  };
}
