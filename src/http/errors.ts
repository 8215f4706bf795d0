// Errors as HTTP answers (spec: Errors; DESIGN.md §4): the status, headers and body of the error
// catalogue's answer (src/operations/errors.ts), for what fails in an operation and for what HTTP
// refuses before one runs (validation, content types, malformed requests, paths with no route).
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorObject } from 'ajv';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { DatabaseOutages } from '../db/index.js';
import { recordRefusal } from '../observability/metrics.js';
import {
  ERROR_CATALOGUE,
  type ErrorCode,
  errorBody,
  failureOf,
  fromValidation,
  summarize,
} from '../operations/errors.js';
import { authChallenge } from './auth.js';

/** Public origin for `doc_url`: PUBLIC_URL, else the scheme and host the request came in on. */
export function publicOrigin(request: FastifyRequest, configured: string | undefined): string {
  if (configured) return configured;
  const host = /^[A-Za-z0-9.:[\]-]+$/.test(request.host) ? request.host : 'localhost';
  return `${request.protocol}://${host}`;
}

/** Fastify's own errors (content type, JSON, body size) in the spec's terms. */
function fromFastify(error: FastifyError): { code: ErrorCode; message: string } | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: 'request_too_large', message: 'The request body exceeds the maximum size.' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { code: 'bad_request', message: 'Unsupported content type: request bodies must be application/json.' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: 'bad_request', message: 'The Content-Length header does not match the body.' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { code: 'bad_request', message: 'The request body is not valid JSON.' };
    default:
      if (error.statusCode === 400 && error instanceof SyntaxError) {
        return { code: 'bad_request', message: 'The request body is not valid JSON.' };
      }
      return undefined;
  }
}

/**
 * Requests Node's HTTP parser refuses (a malformed request line or header, headers over the size
 * limit, a request that does not arrive in time) never reach Fastify's routes or error handler;
 * this answers them in the spec's error shape too, then closes the connection. Their Host is not
 * known, so `doc_url` uses PUBLIC_URL or `http://localhost`, as `publicOrigin` falls back to.
 * They carry an X-Request-Id as every answer does (the document says so): the request's id when
 * it has one (a body past its deadline, src/http/body-deadline.ts), else a new UUID.
 */
export function clientErrorHandler(publicUrl: string | undefined) {
  return (error: Error & { code?: string }, socket: Duplex, requestId: string = randomUUID()): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const [code, message]: [ErrorCode, string] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? ['request_too_large', 'The request headers are too large.']
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? ['bad_request', 'The request did not arrive in time.']
          : ['bad_request', 'The request is not valid HTTP.'];
    const { status, body } = errorBody(publicUrl ?? 'http://localhost', code, message);
    recordRefusal(code);
    const text = JSON.stringify(body);
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
          `X-Request-Id: ${requestId}\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
    }
    socket.destroy(error);
  };
}

/**
 * Node's error for a request whose client closed the connection before its body arrived (the
 * request stream's `aborted`). Its code is a socket's, as a lost database connection's is.
 */
const isClientAbort = (error: FastifyError) => error.code === 'ECONNRESET' && error.message === 'aborted';

/** An error as the spec's answer: the error body, its status and its content type. */
function sender(publicUrl: string | undefined) {
  return (
    request: FastifyRequest,
    reply: FastifyReply,
    code: ErrorCode,
    message: string,
    param?: string,
    eventId?: string,
  ) => {
    const { status, body } = errorBody(publicOrigin(request, publicUrl), code, message, param, eventId);
    recordRefusal(code);
    const { retryAfterS } = ERROR_CATALOGUE[code];
    if (retryAfterS !== undefined && !reply.hasHeader('retry-after')) reply.header('retry-after', retryAfterS);
    if (status === 401) reply.header('www-authenticate', authChallenge(request.routeOptions?.config, code));
    return reply.code(status).type('application/json; charset=utf-8').send(body);
  };
}

/**
 * Answers any error in the spec's terms: the app's error handler, and the answer to the URLs the
 * router refuses before any hook runs (src/app.ts, `frameworkErrors`), whose request and reply are
 * Fastify's undecorated ones (this uses only what those have).
 */
export function errorAnswerer(
  publicUrl: string | undefined,
  outages?: Pick<DatabaseOutages, 'failed'>,
): (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => FastifyReply {
  const send = sender(publicUrl);
  return (error, request, reply) => {
    if (error.validation && error.validation.length > 0) {
      const first = error.validation[0] as ErrorObject;
      const mapped = fromValidation(error.validationContext ?? 'body', first);
      return send(request, reply, mapped.code, mapped.message, mapped.param);
    }
    const fastifyMapped = fromFastify(error);
    if (fastifyMapped) return send(request, reply, fastifyMapped.code, fastifyMapped.message);
    if (isClientAbort(error)) {
      // The client went away while sending its body: no one reads this answer, and nothing failed here.
      request.log.info('the client closed the connection before its body arrived');
      return send(request, reply, 'bad_request', 'The request body did not arrive whole.');
    }
    const failure = failureOf(error, {
      operation: request.routeOptions?.config?.operation,
      places: [request.params, request.body],
      // Once per outage, not a stack per request (src/db/outage.ts).
      outages: outages ?? {
        failed: (cause) =>
          request.log.warn({ error: { message: (cause as Error).message, code: error.code } }, 'database unreachable'),
      },
      logUnexpected: (eventId, cause, canceled) =>
        request.log.error(
          { event_id: eventId, err: summarize(cause) },
          canceled ? 'query canceled' : 'unexpected error',
        ),
    });
    return send(request, reply, failure.code, failure.message, failure.param, failure.eventId);
  };
}

export function registerErrorHandling(
  app: FastifyInstance,
  publicUrl: string | undefined,
  outages?: Pick<DatabaseOutages, 'failed'>,
): void {
  app.setErrorHandler(errorAnswerer(publicUrl, outages));
  app.setNotFoundHandler(noRouteAnswerer(publicUrl));
}

/** Answers a request for a path (or method) with no route: 404 `not_found`. */
export function noRouteAnswerer(publicUrl: string | undefined): (request: FastifyRequest, reply: FastifyReply) => void {
  const send = sender(publicUrl);
  return (request, reply) => {
    send(request, reply, 'not_found', `No route: ${request.method} ${request.url.split('?')[0]}.`);
  };
}
