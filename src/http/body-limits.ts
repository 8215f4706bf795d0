// How much body each route takes. Every operation has the limits its job needs: most take a few
// fields (a message, a row, a tool call), and only the few that carry files, documents or batches
// of rows take up to BODY_LIMIT_BYTES. The limits are judged before a body is parsed: bytes by
// Fastify as the body arrives, values and depth on the bytes (src/lib/json-shape.ts), so a body
// over them costs its sender a refusal, never the event loop seconds of parsing.
import type { FastifyRequest } from 'fastify';
import { BadRequestError, DomainError, ValidationError } from '../domain/errors.js';
import { MAX_JSON_DEPTH } from '../lib/json-body.js';
import { type JsonShapeLimits, jsonShapeProblem } from '../lib/json-shape.js';

export interface BodyLimits extends JsonShapeLimits {
  bytes: number;
}

/** An operation's body: a few fields, a message, a row, a tool call's arguments. */
const ORDINARY = { bytes: 1024 * 1024, maxValues: 10_000 };
/** Files of a commit, a document's text, a batch of 100 rows: up to BODY_LIMIT_BYTES. */
const LARGE_VALUES = 100_000;
/** Whatever is not an operation (the control plane, the settings pages' JSON): a few fields. */
const OTHER = { bytes: 64 * 1024, maxValues: 1_000 };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's body limits; `OTHER` when absent. */
    bodyLimits?: BodyLimits;
  }
}

/** The limits of an operation's body; never above BODY_LIMIT_BYTES. */
export function operationBodyLimits(largeBody: boolean | undefined, maxBytes: number): BodyLimits {
  const limits = largeBody ? { bytes: maxBytes, maxValues: LARGE_VALUES } : ORDINARY;
  return { bytes: Math.min(limits.bytes, maxBytes), maxValues: limits.maxValues, maxDepth: MAX_JSON_DEPTH };
}

/** The limits of a route that is not an operation. */
export function otherBodyLimits(maxBytes: number): BodyLimits {
  return { bytes: Math.min(OTHER.bytes, maxBytes), maxValues: OTHER.maxValues, maxDepth: MAX_JSON_DEPTH };
}

/** The limits of the route `request` reached. */
export function routeBodyLimits(request: FastifyRequest, maxBytes: number): BodyLimits {
  return request.routeOptions.config.bodyLimits ?? otherBodyLimits(maxBytes);
}

/**
 * The refusal of a JSON body whose bytes cross `limits`' values or depth, or undefined: 413
 * `request_too_large` for too many values, as for too many bytes; 422 for nesting (400 when the
 * body itself is the array that nests), as a parsed body's nesting is refused.
 */
export function shapeRefusal(bytes: Buffer, limits: JsonShapeLimits): DomainError | undefined {
  const problem = jsonShapeProblem(bytes, limits);
  if (problem === undefined) return undefined;
  const where = problem.param || 'The body';
  if (problem.limit === 'values') {
    return new DomainError(
      'request_too_large',
      `${where} holds more than ${limits.maxValues} values, the most this operation takes.`,
      problem.param || undefined,
    );
  }
  const message = `${where} nests more than ${limits.maxDepth} levels deep.`;
  return problem.param ? new ValidationError(problem.param, message) : new BadRequestError(message);
}

/**
 * The refusal of a parsed value (an MCP tool call's arguments) that would cross `limits` had it
 * been sent as the operation's body over REST, or undefined.
 */
export function valueRefusal(value: unknown, limits: BodyLimits): DomainError | undefined {
  const bytes = Buffer.from(JSON.stringify(value) ?? 'null');
  if (bytes.length > limits.bytes) {
    return new DomainError(
      'request_too_large',
      `The arguments exceed ${limits.bytes} bytes, the most this tool takes.`,
    );
  }
  return shapeRefusal(bytes, limits);
}
