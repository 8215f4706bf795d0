// GET /metrics: the Prometheus text exposition of the registry (src/observability/metrics.ts),
// for the operator: `Authorization: Bearer <ADMIN_TOKEN>`, judged as the control plane's token is
// (src/http/auth.ts, operatorCheck). Without ADMIN_TOKEN the route is not there (404, as any
// path with no route): a token generated at first start is shown once and retired by the next
// ADMIN_TOKEN, no setting for a scraper. A budget of its own (rate limit), far above a scrape
// every few seconds, so wrong tokens are counted while scrapes never are refused. Not in the
// public OpenAPI document: it is no part of the tenants' API (docs/operations.md documents it).
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { registry } from '../observability/metrics.js';
import { watchJobQueue } from '../observability/scrape-gauges.js';
import { operatorCheck } from './auth.js';

export const METRICS_PATH = '/metrics';
/** Scrapes (and refused tries) one client address may make a minute. */
export const METRICS_SCRAPES_PER_MINUTE = 120;

export function registerMetricsEndpoint(
  app: FastifyInstance,
  // biome-ignore lint/suspicious/noExplicitAny: any database with the jobs table.
  { adminToken, db }: { adminToken: string | undefined; db: Kysely<any> },
): void {
  if (!adminToken) return;
  const unwatch = watchJobQueue(db);
  app.addHook('onClose', async () => unwatch());

  app.get(
    METRICS_PATH,
    {
      schema: { hide: true },
      config: { rateLimit: { max: METRICS_SCRAPES_PER_MINUTE, timeWindow: 60_000 }, operator: true },
      // After the rate limit's hook (a route hook too, put first), so wrong tokens are counted.
      onRequest: operatorCheck({ adminToken }),
    },
    async (_request, reply) => {
      reply.type(registry.contentType);
      return registry.metrics();
    },
  );
}
