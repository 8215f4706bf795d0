// The tools a turn offers its provider (client functions, enabled workflows, the handoff tool) and
// the calls the engine answers itself: workflows run here, overridden outputs, handoffs, unknown
// tools. Client functions are left to the client (./client-functions.ts).

import { newId } from '../../lib/ids.js';
import { argumentsSchemaProblem, compileClientSchema, schemaErrorsText } from '../../lib/json-schema.js';
import { ValidationError } from '../errors.js';
import { type EngineContext, lastInput, type Runtime } from './turn-runtime.js';
import { handOff, recordCalls, setCallResult } from './turn-store.js';
import type { ClientFunction, HandoffTarget, ToolCall, ToolSpec } from './types.js';

/** The engine's own tool for handoffs (a client function may not take its name). */
export const HANDOFF_TOOL = 'transfer_to_agent';

/** Validates client functions: unique names, not the engine's own, parameters a JSON Schema of an object. */
export function checkClientFunctions(functions: ClientFunction[] | undefined, param = 'client_functions'): void {
  const seen = new Set<string>();
  (functions ?? []).forEach((fn, i) => {
    if (fn.name === HANDOFF_TOOL) {
      throw new ValidationError(`${param}[${i}].name`, `'${HANDOFF_TOOL}' is reserved for the agent's handoffs.`);
    }
    if (seen.has(fn.name)) {
      throw new ValidationError(`${param}[${i}].name`, `Two client functions are named '${fn.name}'.`);
    }
    seen.add(fn.name);
    if (fn.parameters === undefined) return;
    const problem = argumentsSchemaProblem(fn.parameters, `${param}[${i}].parameters`);
    if (problem !== undefined) throw new ValidationError(`${param}[${i}].parameters`, problem);
  });
}

/** The turn's tools: its client functions, the enabled workflows they do not shadow, and the handoff tool. */
export async function toolsFor(ctx: EngineContext, rt: Runtime, handoffAgents: HandoffTarget[]): Promise<ToolSpec[]> {
  const clientNames = new Set(rt.clientFunctions.map((f) => f.name));
  const workflows = await ctx.db
    .selectFrom('workflows')
    .select(['name', 'description', 'input_schema'])
    .where('tenant_id', '=', rt.tenantId)
    .where('enabled', '=', true)
    .orderBy('name')
    .execute();
  const tools: ToolSpec[] = [
    ...rt.clientFunctions.map(
      (fn): ToolSpec => ({
        name: fn.name,
        description: fn.description ?? '',
        parameters: fn.parameters ?? { type: 'object', properties: {} },
        type: 'client',
      }),
    ),
    ...workflows
      .filter((wf) => !clientNames.has(wf.name))
      .map(
        (wf): ToolSpec => ({
          name: wf.name,
          description: wf.description ?? '',
          parameters: wf.input_schema ?? { type: 'object', properties: {} },
          type: 'workflow',
        }),
      ),
  ];
  if (handoffAgents.length > 0) {
    tools.push({
      name: HANDOFF_TOOL,
      description: 'Hand the conversation over to another agent.',
      parameters: {
        type: 'object',
        properties: { agent_name: { type: 'string', enum: handoffAgents.map((a) => a.name) } },
        required: ['agent_name'],
      },
      type: 'internal',
    });
  }
  return tools;
}

/** Records the step's calls of client functions and workflows, and traces and streams them. */
export async function announceCalls(ctx: EngineContext, rt: Runtime, calls: ToolCall[], byName: Map<string, ToolSpec>) {
  const recorded = calls.filter((c) => {
    const type = byName.get(c.name)?.type;
    return type === 'client' || type === 'workflow';
  });
  await recordCalls(ctx, rt, recorded, byName);
  rt.trace.called(recorded, (name) => byName.get(name)?.type);
  for (const call of recorded) {
    rt.emit('function_call', {
      call_id: call.call_id,
      name: call.name,
      arguments: call.arguments,
      type: byName.get(call.name)?.type,
    });
  }
}

/**
 * Answers the step's calls the engine can answer, in order, and returns the client function
 * calls left for the client.
 */
export async function answerCalls(
  ctx: EngineContext,
  rt: Runtime,
  calls: ToolCall[],
  byName: Map<string, ToolSpec>,
  handoffAgents: HandoffTarget[],
): Promise<ToolCall[]> {
  const inline = rt.state.inline_results;
  const clientPending: ToolCall[] = [];
  for (const call of calls) {
    const tool = byName.get(call.name);
    const overrides = rt.state.tool_overrides;
    if (!tool) {
      inline[call.call_id] = { error: `There is no tool named '${call.name}'.` };
    } else if (tool.type === 'internal') {
      const target = handoffAgents.find((a) => a.name === call.arguments.agent_name);
      if (!target) {
        inline[call.call_id] = { error: 'agent_name must name one of the handoff agents.' };
      } else {
        await handOff(ctx, rt, target, lastInput(rt));
        inline[call.call_id] = { transferred: true, agent_name: target.name };
      }
    } else if (tool.type === 'workflow') {
      const { status, output } = await runWorkflow(ctx, rt, call);
      await answered(ctx, rt, call, status, output, Object.hasOwn(overrides ?? {}, call.name));
    } else if (overrides && Object.hasOwn(overrides, call.name)) {
      await answered(ctx, rt, call, 'completed', overrides[call.name], true);
    } else {
      clientPending.push(call);
    }
  }
  return clientPending;
}

/** A call answered here: traced, its result stored, and streamed. */
async function answered(
  ctx: EngineContext,
  rt: Runtime,
  call: ToolCall,
  status: 'completed' | 'failed',
  output: unknown,
  overridden: boolean,
) {
  rt.trace.answered(call.call_id, status, output, overridden);
  await setCallResult(ctx, rt, call.call_id, status, output);
  rt.emit('function_result', { call_id: call.call_id, name: call.name, status, output });
}

/** Runs an enabled workflow server-side: records a run and answers with its outcome. */
async function runWorkflow(
  ctx: EngineContext,
  rt: Runtime,
  call: ToolCall,
): Promise<{ status: 'completed' | 'failed'; output: unknown }> {
  const workflow = await ctx.db
    .selectFrom('workflows')
    .select(['id', 'name', 'input_schema'])
    .where('tenant_id', '=', rt.tenantId)
    .where('name', '=', call.name)
    .where('enabled', '=', true)
    .executeTakeFirst();
  if (!workflow) return { status: 'failed', output: { error: `The workflow '${call.name}' is not enabled.` } };
  const overrides = rt.state.tool_overrides;
  const overridden = overrides !== null && Object.hasOwn(overrides, call.name);
  const runId = newId();
  let status: 'completed' | 'failed' = 'completed';
  let output: unknown;
  if (overridden) {
    output = overrides[call.name];
  } else {
    const problem = argumentsProblem(workflow.input_schema, call.arguments);
    if (problem !== undefined) {
      status = 'failed';
      output = { error: `Invalid arguments for workflow '${workflow.name}': ${problem}` };
    } else {
      output = { workflow_run_id: runId, workflow: workflow.name, status: 'completed', arguments: call.arguments };
    }
  }
  await ctx.db
    .insertInto('workflow_runs')
    .values({
      id: runId,
      tenant_id: rt.tenantId,
      workflow_id: workflow.id,
      workflow_name: workflow.name,
      conversation_id: rt.conversationId,
      message_id: rt.messageId,
      call_id: call.call_id,
      arguments: JSON.stringify(call.arguments),
      status,
      output: JSON.stringify(output ?? null),
      overridden,
    })
    .execute();
  return { status, output };
}

/** Why the arguments do not fit the workflow's input schema, or undefined when they do (or it has none). */
function argumentsProblem(schema: Parameters<typeof compileClientSchema>[0] | null, args: unknown): string | undefined {
  if (!schema) return undefined;
  try {
    const validate = compileClientSchema(schema);
    if (!validate(args)) return schemaErrorsText(validate.errors);
  } catch (error) {
    return `its input schema cannot be used (${error instanceof Error ? error.message : String(error)})`;
  }
  return undefined;
}
