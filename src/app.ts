// Builds the Fastify app from its parts, in the order a request meets them; src/serve.ts is the
// process that listens. Each part is registered by the module that owns it.
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import type { Db } from './db/index.js';
import { type DatabaseOutages, isDatabaseUnreachable, reportDatabaseOutages } from './db/index.js';
import { createOwnerService } from './domain/accounts/owners.js';
import { EMBEDDING_LANE } from './domain/knowledge/embeddings/jobs.js';
import { createServices, type Services } from './domain/services.js';
import { ErrorSchema } from './domain/shapes.js';
import { registerWebhookDelivery } from './domain/webhooks/delivery.js';
import { WEBHOOK_DELIVERY_JOB } from './domain/webhooks/events.js';
import { type Authenticator, createAuthenticator, operatorCheck } from './http/auth.js';
import { registerAuthentication } from './http/authentication.js';
import { registerBodyDeadline } from './http/body-deadline.js';
import { registerDocsRoutes, registerOpenApi } from './http/docs.js';
import { clientErrorHandler, errorAnswerer, registerErrorHandling } from './http/errors.js';
import { fastifyOptions } from './http/fastify-options.js';
import { registerHeaderAnswers } from './http/header-answers.js';
import { registerIdempotency } from './http/idempotency.js';
import { registerJsonBodies } from './http/json-bodies.js';
import { registerClosing, registerHealth } from './http/lifecycle.js';
import { registerMetricsEndpoint } from './http/metrics-endpoint.js';
import { registerRequestObservability } from './http/observability.js';
import { mountControlPlane, mountOperations } from './http/operation-routes.js';
import { type Limiter, registerRateLimit } from './http/rate-limit.js';
import { registerUnreadBody } from './http/unread-body.js';
import { createJobQueue, type JobQueue } from './jobs/queue.js';
import { throttledLine } from './lib/log-throttle.js';
import { reportRedisOutages } from './lib/redis.js';
import { createSecretBox, type SecretBox } from './lib/secret-box.js';
import { registerMcpRoutes } from './mcp/routes.js';
import { tracingEnabled } from './observability/tracing.js';
import { controlPlaneOperations } from './operations/control-plane/tenants.js';
import { summarize } from './operations/errors.js';
import { OPERATIONS } from './operations/index.js';
import { validatorOf } from './operations/validation.js';
import { registerSettingsPages } from './settings/index.js';

export { READY_CHECK_TIMEOUT_MS } from './http/lifecycle.js';

export interface AppDeps {
  config: Config;
  db: Db;
  redis?: Redis | undefined;
  /** Rate-limit key namespace in Redis (tests keep runs apart). */
  redisNamespace?: string;
  /** Where JSON log lines go; standard output when absent. */
  logStream?: NodeJS.WritableStream;
}

export interface App {
  app: FastifyInstance;
  services: Services;
  authenticator: Authenticator;
  /** The durable job queue; not polling until `jobs.start()`. */
  jobs: JobQueue;
  /**
   * Shutdown begins: /readyz answers 503 from now on (load balancers stop sending requests), the
   * rest is still served until `app.close()`, which does this too.
   */
  drain(): void;
}

/**
 * The durable job queue (src/jobs/queue.ts), its workers started by serve.ts after listen, with the
 * webhook deliveries' handler. A delivery waits on the receiver (up to WEBHOOK_TIMEOUT_MS): in a
 * lane of their own, slow receivers hold up other deliveries at most, never a sync, a run or an
 * evaluation. Waiting costs little there, so the lane takes more at once than the default one. One
 * tenant's deliveries take at most WEBHOOK_TENANT_CONCURRENCY of its slots, so a tenant whose
 * receivers hang delays its own deliveries, not the other tenants'.
 */
function createJobs(
  { config, db }: AppDeps,
  log: FastifyBaseLogger,
  outages: DatabaseOutages,
  secrets: SecretBox,
): JobQueue {
  const jobs = createJobQueue({
    db,
    log,
    pollMs: config.jobPollMs,
    stopGraceMs: config.jobStopGraceMs,
    outages,
    lanes: [
      {
        name: 'webhook-delivery',
        kinds: [WEBHOOK_DELIVERY_JOB],
        concurrency: config.webhookConcurrency,
        tenantConcurrency: config.webhookTenantConcurrency,
        // Past half its cap, a tenant's next delivery waits while another tenant's is due: two
        // tenants whose receivers hang cannot keep the lane's slots with their backlogs.
        tenantShare: Math.ceil(config.webhookTenantConcurrency / 2),
      },
      // Embedding jobs wait on the embeddings server (src/domain/knowledge/embeddings/jobs.ts).
      EMBEDDING_LANE,
    ],
  });
  registerWebhookDelivery(jobs, {
    db,
    secrets,
    allowPrivateTargets: config.allowPrivateTargets,
    timeoutMs: config.webhookTimeoutMs,
    retry: { baseMs: config.webhookRetryBaseMs, maxMs: config.webhookRetryMaxMs },
    log,
  });
  return jobs;
}

interface RouteDeps {
  deps: AppDeps;
  services: Services;
  authenticator: Authenticator;
  outages: DatabaseOutages;
  secrets: SecretBox;
  logError: (error: unknown) => void;
  shutdown: { draining(): boolean };
}

/**
 * The routes, behind their hooks: the rate limit (onRequest), then authentication and the scope
 * (before the body is read), then idempotency; then the operations over REST and MCP, the control
 * plane, the settings page, the docs and the probes. Returns the limiter of paths with no route.
 */
async function registerRoutes(
  app: FastifyInstance,
  { deps, services, authenticator, outages, secrets, logError, shutdown }: RouteDeps,
): Promise<Limiter> {
  const { config, db, redis, redisNamespace } = deps;
  await registerOpenApi(app, { operations: OPERATIONS, config });
  if (redis) reportRedisOutages(redis, app.log);
  const limitUnrouted = registerRateLimit(app, {
    perMinute: config.rateLimitPerMinute,
    redis,
    namespace: `${redisNamespace ?? config.redisKeyPrefix}rl:`,
  });
  registerHeaderAnswers(app, config.publicUrl);
  registerMetricsEndpoint(app, { adminToken: config.adminToken, db });
  registerAuthentication(app, authenticator);
  registerIdempotency(app, db, secrets, logError);

  mountOperations(app, OPERATIONS, services, config.bodyLimitBytes);
  registerMcpRoutes(app, {
    operations: OPERATIONS,
    services,
    authenticator,
    config,
    redis,
    namespace: redisNamespace ?? config.redisKeyPrefix,
    outages,
  });
  // Workspace owners: their accounts come with the tenant (control plane), and they manage their
  // keys on the settings page (src/settings/).
  const owners = createOwnerService({ db });
  mountControlPlane(app, controlPlaneOperations, {
    services,
    controlPlane: { owners, keysChanged: () => authenticator.forgetAll() },
    operatorOnly: operatorCheck({ tenants: services.tenants, adminToken: config.adminToken }),
    maxBodyBytes: config.bodyLimitBytes,
  });
  await registerSettingsPages(app, { config, tenants: services.tenants, owners, authenticator, outages });
  await registerDocsRoutes(app);
  registerHealth(app, { db, outages, draining: shutdown.draining });
  return limitUnrouted;
}

export async function buildApp(deps: AppDeps): Promise<App> {
  const { config, db, logStream } = deps;
  // The global budget's limiter, once the rate limit is registered (below).
  let limitUnrouted: Limiter | undefined;
  const app = Fastify(fastifyOptions({ config, logStream, limitUnrouted: () => limitUnrouted }));

  // Metrics, the request log line and spans for every route declared from here on.
  registerRequestObservability(app, { tracing: tracingEnabled() });
  // Bodies are JSON, taken as sent; paths and query strings are text, coerced (src/operations/validation.ts).
  app.setValidatorCompiler(({ schema, httpPart }) => validatorOf(schema, httpPart === 'body' ? 'json' : 'text'));
  registerJsonBodies(app, config.bodyLimitBytes);

  // A database that cannot be reached: requests answer 503, and the outage is logged once.
  const outages = reportDatabaseOutages(db, app.log);
  app.addHook('onClose', async () => outages.stop());
  app.addSchema(ErrorSchema);
  registerErrorHandling(app, config.publicUrl, outages);
  // Set when the request arrives, so every answer carries it, errors included.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  // A body still arriving REQUEST_TIMEOUT_MS after its headers is refused (400, connection closed).
  registerBodyDeadline(app, { timeoutMs: config.requestTimeoutMs, refuse: clientErrorHandler(config.publicUrl) });
  // A body its answer left unread is read and thrown away, up to a bound, then the connection closed.
  registerUnreadBody(app);
  // Before the rate limit, so a request refused while closing costs no budget.
  const shutdown = registerClosing(app, errorAnswerer(config.publicUrl));

  // Webhook signing secrets, sealed at rest when SECRETS_KEY is set (src/lib/secret-box.ts).
  const secrets = createSecretBox(config.secretsKey, config.secretsKeyPrevious);
  const jobs = createJobs(deps, app.log, outages, secrets);
  // Counted in embeddings_requests_total, every one; the log says why once a minute per reason
  // (a server down would otherwise write a line per question), never the key (not in the message).
  const embeddingsWarning = throttledLine((fields, message) => app.log.warn(fields, message));
  const services = createServices({
    db,
    config,
    jobs,
    secrets,
    onEmbeddingsError: (error) =>
      embeddingsWarning(
        error.reason,
        { err: { message: error.message, reason: error.reason, status: error.status } },
        'a question could not be embedded: it was answered from the lexical ranking alone',
      ),
  });
  // Jobs stop first: running ones get their grace period (JOB_STOP_GRACE_MS), then are stopped and
  // queued again. Only then are the simulations closed: closed earlier, every case a run still
  // played in the grace period would fail on its stopped engine and be recorded as failed.
  app.addHook('onClose', async () => {
    await jobs.stop();
    await services.simulations.close();
  });
  const logError = (error: unknown) => {
    if (isDatabaseUnreachable(error)) outages.failed(error);
    else app.log.error({ err: summarize(error) }, 'background write failed');
  };
  const authenticator = createAuthenticator({
    tenants: services.tenants,
    baseDomain: config.baseDomain,
    onError: logError,
  });
  app.addHook('onClose', async () => authenticator.close());
  // Customers' turns waiting on client results end FAILED and model calls stop, so close never
  // hangs on them (run jobs stop their own turns when the queue stops them, see above).
  app.addHook('preClose', async () => services.agent.close());

  limitUnrouted = await registerRoutes(app, { deps, services, authenticator, outages, secrets, logError, shutdown });
  return { app, services, authenticator, jobs, drain: shutdown.drain };
}
