// The one pipeline every call of an operation goes through, whichever way it comes: the scope
// check, validation of each part of its input (one Ajv setup, src/operations/validation.ts), the
// handler, and the normalisation of a failure (src/operations/errors.ts). REST routes
// (src/http/operation-routes.ts) run the steps at their places in an HTTP exchange — the scope
// before the body is read, validation as Fastify parses each part — and MCP tools
// (src/mcp/tool-calls.ts) run them in one call, `invoke`.
import type { Services } from '../domain/services.js';
import { type AuthContext, authorize } from './context.js';
import { DomainError, type Failure, type FailureContext, failureOf, fromValidation } from './errors.js';
import type { Operation, OperationContext, OperatorContext, OperatorOperation } from './registry.js';
import { STREAMED, WithStatus } from './registry.js';
import type { Validator } from './validation.js';

export type InputPart = 'params' | 'query' | 'body';

/** An operation's answer: its status (the operation's, or the one its handler chose) and body. */
export interface Outcome {
  status: number;
  body: unknown;
}

/** Step 1: the key must hold the operation's scope (403 `insufficient_scope`). */
export function checkScope(operation: Operation, auth: AuthContext): void {
  authorize(auth, operation.scope);
}

/**
 * Step 2: `value` checked against `validate`, in place (defaults filled in, ids lower-cased); the
 * first violation refused as the error catalogue says (a malformed path id is `not_found`).
 */
export function validatePart(validate: Validator, part: InputPart, value: unknown): void {
  if (validate(value)) return;
  const first = validate.errors?.[0];
  if (!first) return;
  // A path parameter left out (an MCP tool's argument; over HTTP a path always holds one) is
  // missing, as a required body field is.
  if (part === 'params' && first.keyword === 'required') {
    const param = String(first.params.missingProperty);
    throw new DomainError('missing_required_parameter', `Missing required parameter: ${param}.`, param);
  }
  const mapped = fromValidation(part === 'query' ? 'querystring' : part, first);
  throw new DomainError(mapped.code, mapped.message, mapped.param);
}

/** Step 3: the handler, its answer with its status. */
export async function run(
  operation: Operation | OperatorOperation,
  context: OperationContext<unknown, unknown, unknown> | OperatorContext<unknown, unknown, unknown>,
): Promise<Outcome> {
  const result = await (operation.handler as (ctx: typeof context) => Promise<unknown>)(context);
  if (result instanceof WithStatus) return { status: result.status, body: result.body };
  if (result === STREAMED) return { status: 200, body: undefined };
  return { status: operation.status ?? 200, body: result };
}

/** A call whose input the caller splits into the operation's parts once its scope is allowed. */
export interface Call {
  auth: AuthContext;
  services: Services;
  /** The input as parts (refusing what the caller's protocol refuses), after the scope check. */
  bind: () => Record<InputPart, unknown>;
  validators: Partial<Record<InputPart, Validator>>;
  /** Step 4: how a failure is reported (`failureOf`: logged under an `event_id` when unexpected). */
  failure: Omit<FailureContext, 'operation'>;
}

/** The whole pipeline in one call: the outcome, or the failure to answer. */
export async function invoke(operation: Operation, call: Call): Promise<Outcome | { failure: Failure }> {
  let input: Record<InputPart, unknown> | undefined;
  try {
    checkScope(operation, call.auth);
    input = call.bind();
    for (const part of ['params', 'query', 'body'] as const) {
      const validate = call.validators[part];
      if (validate) validatePart(validate, part, input[part]);
    }
    return await run(operation, { tenantId: call.auth.tenantId, auth: call.auth, ...input, services: call.services });
  } catch (error) {
    const places = call.failure.places ?? (input ? [input.params, input.body] : []);
    return { failure: failureOf(error, { ...call.failure, operation, places }) };
  }
}
