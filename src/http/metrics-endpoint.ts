// GET /metrics: the Prometheus text exposition of the registry (src/observability/metrics.ts),
// for the operator: `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time (the
// digests, as the control plane does). Without ADMIN_TOKEN the route is not there (404, as any
// path with no route): a token generated at first start is shown once and retired by the next
// ADMIN_TOKEN, no setting for a scraper. A budget of its own (rate limit), far above a scrape
// every few seconds, so wrong tokens are counted while scrapes never are refused. Not in the
// public OpenAPI document: it is no part of the tenants' API (docs/operations.md documents it).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { sameDigest, sha256Hex } from '../lib/ids.js';
import { registry } from '../observability/metrics.js';
import { watchJobQueue } from '../observability/scrape-gauges.js';
import { errorBody } from '../operations/errors.js';
import { publicOrigin } from './errors.js';

export const METRICS_PATH = '/metrics';
/** Scrapes (and refused tries) one client address may make a minute. */
export const METRICS_SCRAPES_PER_MINUTE = 120;

export function registerMetricsEndpoint(
  app: FastifyInstance,
  // biome-ignore lint/suspicious/noExplicitAny: any database with the jobs table.
  { adminToken, publicUrl, db }: { adminToken: string | undefined; publicUrl: string | undefined; db: Kysely<any> },
): void {
  if (!adminToken) return;
  const expected = sha256Hex(adminToken);
  const unwatch = watchJobQueue(db);
  app.addHook('onClose', async () => unwatch());

  // Answered here, not thrown: the challenge is the operator's (as the control plane's), whatever
  // the error handler would say for a tenant's route.
  const refuse = (request: FastifyRequest, reply: FastifyReply, code: 'not_authenticated' | 'invalid_api_key') => {
    const message =
      code === 'not_authenticated'
        ? 'No operator token: send `Authorization: Bearer <ADMIN_TOKEN>`.'
        : 'The operator token is not valid.';
    const { status, body } = errorBody(publicOrigin(request, publicUrl), code, message);
    const invalid = code === 'invalid_api_key' ? ', error="invalid_token"' : '';
    return reply
      .code(status)
      .header('www-authenticate', `Bearer realm="workspace-admin"${invalid}`)
      .type('application/json; charset=utf-8')
      .send(body);
  };
  const requireOperator = async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) return refuse(request, reply, 'not_authenticated');
    if (!sameDigest(sha256Hex(match[1]), expected)) return refuse(request, reply, 'invalid_api_key');
  };

  app.get(
    METRICS_PATH,
    {
      schema: { hide: true },
      config: { rateLimit: { max: METRICS_SCRAPES_PER_MINUTE, timeWindow: 60_000 } },
      // After the rate limit's hook (a route hook too, put first), so wrong tokens are counted.
      onRequest: requireOperator,
    },
    async (_request, reply) => {
      reply.type(registry.contentType);
      return registry.metrics();
    },
  );
}
