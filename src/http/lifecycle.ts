// Liveness, readiness and shutdown as a load balancer sees them. Draining (readiness 503) from
// `drain()` or the start of `app.close()`; closing (new requests 503 `service_unavailable`) from the
// start of `app.close()`, before any other preClose hook, while in-flight requests finish.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { DatabaseOutages, Db } from '../db/index.js';
import { isDatabaseUnreachable } from '../db/index.js';
import { DomainError, summarize } from '../operations/errors.js';

/** `Retry-After` of a request refused because this server is shutting down: another may answer. */
const CLOSING_RETRY_AFTER_S = 2;
/** /readyz waits this long for the database, then answers 503 (a stalled database, a full pool). */
export const READY_CHECK_TIMEOUT_MS = 1_500;
/** What a closing server still answers itself: liveness, and readiness (503) for the balancer. */
const ANSWERED_WHILE_CLOSING = new Set(['/healthz', '/readyz']);

/**
 * Registers the closing answer (before the rate limit, so it costs no budget) and returns the
 * switch that starts draining.
 */
export function registerClosing(
  app: FastifyInstance,
  answerError: (error: DomainError, request: FastifyRequest, reply: FastifyReply) => unknown,
): { drain(): void; draining(): boolean } {
  let draining = false;
  let closing = false;
  app.addHook('preClose', (done) => {
    draining = true;
    closing = true;
    done();
  });
  app.addHook('onRequest', (request, reply, done) => {
    if (!closing || ANSWERED_WHILE_CLOSING.has(request.routeOptions.url ?? '')) return done();
    reply.header('retry-after', CLOSING_RETRY_AFTER_S);
    answerError(
      new DomainError('service_unavailable', 'The server is shutting down; retry (another instance may answer).'),
      request,
      reply,
    );
  });
  return {
    drain: () => {
      draining = true;
    },
    draining: () => draining,
  };
}

/**
 * /healthz, and /readyz: 503 once shutdown has begun, or when the database does not answer within
 * READY_CHECK_TIMEOUT_MS. One check at a time: a probe that finds the last one still waiting (a
 * stalled connection) waits on it too, rather than taking another pooled connection.
 */
export function registerHealth(
  app: FastifyInstance,
  { db, outages, draining }: { db: Db; outages: Pick<DatabaseOutages, 'failed'>; draining: () => boolean },
): void {
  app.get('/healthz', { schema: { hide: true }, config: { rateLimit: false } }, async () => ({ status: 'ok' }));
  let readyCheck: Promise<void> | undefined;
  const databaseAnswers = () => {
    readyCheck ??= sql`select 1`
      .execute(db)
      .then(() => undefined)
      .finally(() => {
        readyCheck = undefined;
      });
    return readyCheck;
  };
  app.get('/readyz', { schema: { hide: true }, config: { rateLimit: false } }, async (request, reply) => {
    if (draining()) {
      reply.code(503);
      return { status: 'unavailable', reason: 'shutting down' };
    }
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        databaseAnswers(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`the database did not answer within ${READY_CHECK_TIMEOUT_MS} ms`)),
            READY_CHECK_TIMEOUT_MS,
          );
        }),
      ]);
      return { status: 'ready' };
    } catch (error) {
      if (isDatabaseUnreachable(error)) outages.failed(error);
      else request.log.warn({ err: summarize(error) }, 'database not reachable');
      reply.code(503);
      return { status: 'unavailable', reason: 'database not reachable' };
    } finally {
      clearTimeout(timer);
    }
  });
}
