// The Fastify server's options: its log (secrets left out), body limit, proxies trusted, request
// ids, and the answers of what Fastify refuses itself (malformed requests, router errors), in the
// spec's error shape.
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import proxyAddr from 'proxy-addr';
import type { Config } from '../config.js';
import { BadRequestError, DomainError } from '../domain/errors.js';
import { otherBodyLimits } from './body-limits.js';
import { clientErrorHandler, errorAnswerer } from './errors.js';
import { lazySerializers } from './lazy-compile.js';
import { ownRequestLog, traceIdOfLine } from './observability.js';
import type { Limiter } from './rate-limit.js';

export type ProxyTrust = false | ((address: string, hop: number) => boolean);

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Trusts the `hops` addresses nearest us (hop 0 is the socket's): the client is the next one. */
function trustHops(hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops;
}

/**
 * TRUST_PROXY as one function, given to Fastify and used for the router's own answers, whose
 * request Fastify builds without it (`request.ip` is the socket's there); `false` trusts nobody.
 */
export function proxyTrust(setting: false | number | string[]): ProxyTrust {
  if (setting === false) return false;
  return typeof setting === 'number' ? trustHops(setting) : proxyAddr.compile(setting);
}

/** Query parameters whose values are not logged. */
const SECRET_PARAMETER = /(?:key|token|secret|password|passwd|signature)$|^(?:auth|code|session|sig)$/i;

/** A URL as logged: the values of query parameters that may hold a secret replaced. */
export function withoutSecrets(url: string): string {
  const start = url.indexOf('?');
  if (start < 0) return url;
  const query = url
    .slice(start + 1)
    .split('&')
    .map((pair) => {
      const name = pair.split('=', 1)[0] ?? '';
      let decoded = name;
      try {
        decoded = decodeURIComponent(name);
      } catch {
        /* logged as sent */
      }
      return SECRET_PARAMETER.test(decoded) && pair.includes('=') ? `${name}=[redacted]` : pair;
    })
    .join('&');
  return `${url.slice(0, start)}?${query}`;
}

/**
 * Router errors (bad percent-encoding, an over-long path segment) in the spec's error shape. They
 * are answered before any hook runs, so they are counted here, against the budget of a path with
 * no route (`limitUnrouted`, once the rate limit is registered): same key, same headers, and past
 * the budget the same 429.
 */
function routerErrorAnswerer(
  trust: ProxyTrust,
  publicUrl: string | undefined,
  limitUnrouted: () => Limiter | undefined,
) {
  const answerError = errorAnswerer(publicUrl);
  return (error: { code?: string }, rawRequest: unknown, rawReply: unknown) => {
    const request = rawRequest as FastifyRequest;
    const reply = rawReply as FastifyReply;
    const refused =
      error.code === 'FST_ERR_BAD_URL'
        ? new BadRequestError('The URL is malformed (bad percent-encoding).')
        : new DomainError('not_found', 'No such resource: a path segment is too long.');
    reply.header('x-request-id', request.id);
    // Fastify builds this request without TRUST_PROXY: the client's address, and the scheme and
    // host of `doc_url`, as its other requests have them.
    if (trust) {
      Object.defineProperty(request, 'ip', { value: proxyAddr(request.raw, trust) });
      const peer = request.raw.socket?.remoteAddress;
      if (peer !== undefined && trust(peer, 0)) {
        for (const [property, header] of [
          ['host', 'x-forwarded-host'],
          ['protocol', 'x-forwarded-proto'],
        ] as const) {
          const value = request.headers[header];
          // The last entry, as Fastify takes it: the one the nearest proxy wrote.
          if (typeof value === 'string' && value !== '') {
            Object.defineProperty(request, property, { value: value.slice(value.lastIndexOf(',') + 1).trim() });
          }
        }
      }
    }
    // The limiter passes nothing, or DomainError('rate_limit_exceeded').
    const answer = (overBudget?: Error) =>
      answerError((overBudget as DomainError | undefined) ?? refused, request, reply);
    const limiter = limitUnrouted();
    if (limiter) limiter(request, reply, answer);
    else answer();
  };
}

export function fastifyOptions({
  config,
  logStream,
  limitUnrouted,
}: {
  config: Config;
  logStream?: NodeJS.WritableStream | undefined;
  limitUnrouted: () => Limiter | undefined;
}): FastifyServerOptions {
  const trust = proxyTrust(config.trustProxy);
  return {
    logger: {
      level: config.logLevel,
      // The trace id of a traced request's lines.
      mixin: traceIdOfLine,
      ...(logStream ? { stream: logStream } : {}),
      redact: {
        paths: ['req.headers["x-api-key"]', 'req.headers.authorization', 'req.headers.cookie'],
        censor: '[redacted]',
      },
      serializers: {
        // Fastify's, with the URL's secrets left out: a key sent in the query string is refused,
        // but the request is logged all the same.
        req: (request: FastifyRequest) => ({
          method: request.method,
          url: withoutSecrets(request.url),
          host: request.host,
          remoteAddress: request.ip,
          remotePort: request.socket?.remotePort,
        }),
      },
    },
    // Routes that are not operations take a few fields; operations set their own (src/http/body-limits.ts).
    bodyLimit: otherBodyLimits(config.bodyLimitBytes).bytes,
    // A number of proxies as a function of the hop (proxyTrust): Fastify ignores a number (it
    // cannot check the nearest peer's address). Trusting N hops assumes only the proxies can reach us.
    trustProxy: trust,
    requestIdHeader: false,
    schemaController: lazySerializers,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    forceCloseConnections: 'idle',
    // One line per request, with its operation, tenant and trace (src/http/observability.ts).
    logController: ownRequestLog(),
    clientErrorHandler: clientErrorHandler(config.publicUrl),
    // Requests that arrive while the server closes (on a kept-alive connection) are answered
    // (src/http/lifecycle.ts), in the spec's error shape with Retry-After, rather than with Fastify's own body.
    return503OnClosing: false,
    frameworkErrors: routerErrorAnswerer(trust, config.publicUrl, limitUnrouted),
  };
}
