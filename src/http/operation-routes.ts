// The REST adapter of the operation registry: each operation a Fastify route whose lifecycle runs
// the pipeline's steps (src/operations/invoke.ts) at their places: the scope as the key is judged,
// before the body is read (src/http/authentication.ts), each part validated as Fastify parses it,
// then the handler; its errors are answered by the error handler (src/http/errors.ts). The
// control plane's operations mount the same way, behind the operator token.
import { type TSchema, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { BadRequestError, ValidationError } from '../domain/errors.js';
import type { Services } from '../domain/services.js';
import type { AuthContext } from '../operations/context.js';
import { run } from '../operations/invoke.js';
import { type ControlPlane, errorStatuses, type Operation, type OperatorOperation } from '../operations/registry.js';
import { type BodyLimits, operationBodyLimits, otherBodyLimits } from './body-limits.js';
import { asksForEventStream, eventSink } from './negotiation.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    operation?: Operation;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

/**
 * No body at all reads as an empty object: bodiless calls to operations whose fields are all
 * optional work, and a missing required field is named as such. A JSON `null` is a body, and not
 * an object: validation refuses it (400).
 */
async function emptyBodyAsObject(request: FastifyRequest) {
  if (request.body === undefined) request.body = {};
}

/**
 * An operation that takes no body takes none, or `{}` (which some clients send with every POST);
 * anything else would be silently ignored, so it is refused as an unknown field or a non-object.
 */
async function refuseBody(request: FastifyRequest) {
  const body = request.body;
  if (body === undefined) return;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestError('This operation takes no request body.');
  }
  const [field] = Object.keys(body);
  if (field !== undefined)
    throw new ValidationError(field, `Unknown parameter: ${field}; this operation takes no body.`);
}

/** The documented answers of an operation: its success record, and the error body per status. */
function responsesOf(op: Operation | OperatorOperation, operator: boolean): Record<number, TSchema> {
  const ErrorRef = Type.Ref('Error');
  const response: Record<number, TSchema> = { [op.status ?? 200]: op.response };
  for (const status of op.alsoStatus ?? []) response[status] = op.response;
  for (const status of errorStatuses(op, operator)) response[status] = ErrorRef;
  return response;
}

/** The route's options every operation shares: its body, its schema's parts, and its answers. */
function routeBase(op: Operation | OperatorOperation, bodyLimits: BodyLimits, operator: boolean) {
  return {
    method: op.method,
    url: op.path,
    bodyLimit: bodyLimits.bytes,
    // Fastify reads no body for GET: nothing to refuse, and no hook on the hottest reads.
    ...(op.method === 'GET' ? {} : { preValidation: op.body ? emptyBodyAsObject : refuseBody }),
    schema: {
      operationId: op.id,
      summary: op.summary,
      ...(op.params ? { params: op.params } : {}),
      ...(op.query ? { querystring: op.query } : {}),
      ...(op.body ? { body: op.body } : {}),
      response: responsesOf(op, operator),
    },
  };
}

/** Sends an outcome; a handler that streamed its answer (Server-Sent Events) has sent it already. */
function answer(reply: FastifyReply, outcome: { status: number; body: unknown }) {
  if (reply.sent) return reply;
  reply.code(outcome.status);
  return outcome.body;
}

export function mountOperations(
  app: FastifyInstance,
  operations: Operation[],
  services: Services,
  maxBodyBytes: number,
): void {
  for (const op of operations) {
    const bodyLimits = operationBodyLimits(op.largeBody, maxBodyBytes);
    const base = routeBase(op, bodyLimits, false);
    app.route({
      ...base,
      config: { operation: op, bodyLimits, ...(op.secretAnswer ? { secretAnswer: true } : {}) },
      schema: {
        ...base.schema,
        tags: [op.tag],
        description: `${op.description}\n\nRequires scope \`${op.scope}\`.`,
        security: [{ ScopedAPIKeyAuth: [op.scope] }],
        'x-required-scope': op.scope,
      },
      handler: async (request, reply) => {
        const auth = request.auth as AuthContext;
        const outcome = await run(op, {
          tenantId: auth.tenantId,
          auth,
          params: request.params,
          query: request.query,
          body: request.body,
          services,
          ...(op.eventStream && asksForEventStream(request.headers.accept)
            ? { events: eventSink(request, reply) }
            : {}),
        });
        return answer(reply, outcome);
      },
    });
  }
}

/**
 * The control plane (/admin/v1): its operations behind `operatorOnly`, a route hook after the rate
 * limit's (which is one too and runs first), so a wrong token is counted and cannot be guessed
 * without end. Their bodies are small: the limits of what is not an operation of the API.
 */
export function mountControlPlane(
  app: FastifyInstance,
  operations: OperatorOperation[],
  deps: { services: Services; controlPlane: ControlPlane; operatorOnly: onRequestHookHandler; maxBodyBytes: number },
): void {
  const bodyLimits = otherBodyLimits(deps.maxBodyBytes);
  for (const op of operations) {
    const base = routeBase(op, bodyLimits, true);
    app.route({
      ...base,
      config: { operator: true },
      onRequest: deps.operatorOnly,
      schema: {
        ...base.schema,
        tags: ['Control plane'],
        description: op.description,
        security: [{ OperatorToken: [] }],
      },
      handler: async (request, reply) => {
        const outcome = await run(op, {
          params: request.params,
          query: request.query,
          body: request.body,
          services: deps.services,
          controlPlane: deps.controlPlane,
        });
        return answer(reply, outcome);
      },
    });
  }
}
