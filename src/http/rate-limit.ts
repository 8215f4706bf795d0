// Per-client-IP rate limit (spec: Limits), on @fastify/rate-limit: counters in process memory,
// or in Redis when REDIS_URL is set so that every instance shares them. Every answer carries
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset; a 429 carries Retry-After (seconds).
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { DomainError } from '../domain/errors.js';

export async function registerRateLimit(
  app: FastifyInstance,
  options: { perMinute: number; redis: Redis | undefined; namespace: string },
): Promise<void> {
  await app.register(rateLimit, {
    global: true,
    max: options.perMinute,
    timeWindow: 60_000,
    enableDraftSpec: true,
    keyGenerator: (request) => request.ip,
    ...(options.redis ? { redis: options.redis, nameSpace: options.namespace } : {}),
    // A Redis outage must not take the API down with it: requests pass uncounted meanwhile.
    skipOnError: true,
    errorResponseBuilder: (_request, context) =>
      new DomainError(
        'rate_limit_exceeded',
        `Too many requests from this address: the limit is ${context.max} a minute. Retry after ${Math.ceil(context.ttl / 1000)} s.`,
      ),
  });
}
