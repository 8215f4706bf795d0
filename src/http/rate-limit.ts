// Per-client-IP rate limit (spec: Limits): fixed windows of a minute, counted in process memory,
// or in Redis when REDIS_URL is set so that every instance shares them. Every limited answer
// carries RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (seconds to the window's end,
// IETF draft); a 429 carries Retry-After. Routes with `config: { rateLimit: false }` and the
// documentation are not limited; a route with `config: { rateLimit: { max, timeWindow } }` has a
// budget of its own (the owners' sign-in). A path with no route, and a URL the router refuses
// (src/app.ts, frameworkErrors), count against the global budget. If Redis does not answer,
// requests pass uncounted.
//
// Written here rather than taken from @fastify/rate-limit, which did the same with five awaits and
// a route-options object per request: on a cached read that was a tenth of the server's CPU
// (bench/README.md). With counters in memory the check answers without a promise.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { DomainError } from '../domain/errors.js';
import { hookList, judgeThen } from './hooks.js';

export interface RouteRateLimit {
  max: number;
  timeWindow: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false`: not limited; `{ max, timeWindow }`: a budget of the route's own. */
    rateLimit?: false | RouteRateLimit;
  }
}

/** A window's count after this hit, and the milliseconds until the window ends. */
interface Hit {
  count: number;
  resetMs: number;
}

export interface RateCounter {
  hit(key: string, windowMs: number): Hit | Promise<Hit>;
}

/** Counters of this process: a fixed window per key, forgotten once it has ended. */
export function memoryCounter(): RateCounter {
  const windows = new Map<string, { count: number; endsAt: number }>();
  let nextSweep = 0;
  return {
    hit(key, windowMs) {
      const now = Date.now();
      if (now >= nextSweep) {
        for (const [k, w] of windows) if (w.endsAt <= now) windows.delete(k);
        nextSweep = now + windowMs;
      }
      let window = windows.get(key);
      if (window === undefined || window.endsAt <= now) {
        window = { count: 0, endsAt: now + windowMs };
        windows.set(key, window);
      }
      window.count++;
      return { count: window.count, resetMs: window.endsAt - now };
    },
  };
}

// One round trip: count the hit, start the window's expiry on its first hit, and say what is left.
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}`;

type WithHitCommand = Redis & { workspaceRateHit(key: string, windowMs: number): Promise<[number, number]> };

/** Counters in Redis, shared by every instance using the same key prefix. */
export function redisCounter(redis: Redis, prefix: string): RateCounter {
  // A defined command runs the script by its digest (EVALSHA), sending its text only once.
  if (!('workspaceRateHit' in redis)) redis.defineCommand('workspaceRateHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
  const commands = redis as WithHitCommand;
  return {
    async hit(key, windowMs) {
      const [count, ttl] = await commands.workspaceRateHit(`${prefix}${key}`, windowMs);
      return { count, resetMs: ttl };
    },
  };
}

/**
 * Counts a request against a budget, keyed by `request.ip`, and sets the RateLimit-* headers; over
 * the budget it sets Retry-After and calls `done` with DomainError('rate_limit_exceeded').
 */
export type Limiter = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void;

/**
 * Limits the routes as they are declared, and what has no route. Returns the limiter of the global
 * budget that a path with no route counts against, for the answers the router makes before any
 * hook runs (src/app.ts).
 */
export function registerRateLimit(
  app: FastifyInstance,
  options: { perMinute: number; redis: Redis | undefined; namespace: string },
): Limiter {
  const counter = options.redis ? redisCounter(options.redis, options.namespace) : memoryCounter();
  const global: RouteRateLimit = { max: options.perMinute, timeWindow: 60_000 };

  app.addHook('onRoute', (route) => {
    const own = route.config?.rateLimit;
    if (own === false || route.url.startsWith('/docs')) return;
    const limit = own ?? global;
    // A route with a budget of its own counts apart from the others.
    const scope = own ? `${route.method}:${route.url}:` : '';
    route.onRequest = [limiter(counter, limit, scope), ...hookList(route.onRequest)];
  });
  // A path with no route counts against the same budget, before its body is read.
  const unrouted = limiter(counter, global, '');
  app.addHook('onRequest', (request, reply, done) => (request.is404 ? unrouted(request, reply, done) : done()));
  return unrouted;
}

function limiter(counter: RateCounter, limit: RouteRateLimit, scope: string): Limiter {
  const judge = (reply: FastifyReply, { count, resetMs }: Hit) => {
    const reset = Math.max(0, Math.ceil(resetMs / 1000));
    reply.header('ratelimit-limit', limit.max);
    reply.header('ratelimit-remaining', Math.max(0, limit.max - count));
    reply.header('ratelimit-reset', reset);
    if (count <= limit.max) return;
    reply.header('retry-after', reset);
    throw new DomainError(
      'rate_limit_exceeded',
      `Too many requests from this address: the limit is ${limit.max} a minute. Retry after ${reset} s.`,
    );
  };
  return (request, reply, done) => {
    let hit: Hit | Promise<Hit>;
    try {
      hit = counter.hit(`${scope}${request.ip}`, limit.timeWindow);
    } catch {
      return done(); // the counter is unreachable: pass uncounted
    }
    // A count that never comes (Redis does not answer) lets the request pass uncounted.
    judgeThen(
      hit,
      (resolved) => judge(reply, resolved),
      done,
      () => done(),
    );
  };
}
