// Builds the Fastify app from its parts; src/serve.ts is the process that listens.
import { randomUUID } from 'node:crypto';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type preParsingHookHandler,
} from 'fastify';
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import proxyAddr from 'proxy-addr';
import { registerSettingsPages } from './admin/settings/index.js';
import type { Config } from './config.js';
import type { Db } from './db/client.js';
import { isDatabaseUnreachable } from './db/errors.js';
import { reportDatabaseOutages } from './db/outage.js';
import { createOwnerService } from './domain/accounts/owners.js';
import { BadRequestError, DomainError, ValidationError } from './domain/errors.js';
import { EMBEDDING_LANE } from './domain/knowledge/embeddings/jobs.js';
import { createServices, type Services } from './domain/services.js';
import { ErrorSchema } from './domain/shapes.js';
import { registerWebhookDelivery } from './domain/webhooks/delivery.js';
import { WEBHOOK_DELIVERY_JOB } from './domain/webhooks/events.js';
import { type Authenticator, createAuthenticator, operatorCheck, presentedKey } from './http/auth.js';
import { registerBodyDeadline } from './http/body-deadline.js';
import { otherBodyLimits, routeBodyLimits, shapeRefusal } from './http/body-limits.js';
import { registerDocsRoutes, registerOpenApi } from './http/docs.js';
import { clientErrorHandler, errorAnswerer, registerErrorHandling } from './http/errors.js';
import { registerHeaderAnswers } from './http/header-answers.js';
import { hookList, judgeThen } from './http/hooks.js';
import { registerIdempotency } from './http/idempotency.js';
import { lazySerializers } from './http/lazy-compile.js';
import { mountControlPlane, mountOperations } from './http/operation-routes.js';
import { type Limiter, registerRateLimit } from './http/rate-limit.js';
import { registerUnreadBody } from './http/unread-body.js';
import { createJobQueue, type JobQueue } from './jobs/queue.js';
import { jsonProblem, jsonText } from './lib/json-body.js';
import { reportRedisOutages } from './lib/redis.js';
import { createSecretBox } from './lib/secret-box.js';
import { registerMcpRoutes } from './mcp/routes.js';
import { ownRequestLog, registerRequestObservability } from './observability/http.js';
import { registerMetricsEndpoint } from './observability/metrics-endpoint.js';
import { tracingEnabled } from './observability/tracing.js';
import type { AuthContext } from './operations/context.js';
import { controlPlaneOperations } from './operations/control-plane/tenants.js';
import { summarize } from './operations/errors.js';
import { OPERATIONS } from './operations/index.js';
import { checkScope } from './operations/invoke.js';
import { validatorOf } from './operations/validation.js';

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

/** `Retry-After` of a request refused because this server is shutting down: another may answer. */
const CLOSING_RETRY_AFTER_S = 2;
/** /readyz waits this long for the database, then answers 503 (a stalled database, a full pool). */
export const READY_CHECK_TIMEOUT_MS = 1_500;
/** What a closing server still answers itself: liveness, and readiness (503) for the balancer. */
const ANSWERED_WHILE_CLOSING = new Set(['/healthz', '/readyz']);

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Trusts the `hops` addresses nearest us (hop 0 is the socket's): the client is the next one. */
function trustHops(hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops;
}

/**
 * TRUST_PROXY as one function, given to Fastify and used for the router's own answers, whose
 * request Fastify builds without it (`request.ip` is the socket's there); `false` trusts nobody.
 */
function proxyTrust(setting: false | number | string[]): false | ((address: string, hop: number) => boolean) {
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

export async function buildApp({ config, db, redis, redisNamespace, logStream }: AppDeps): Promise<App> {
  const trust = proxyTrust(config.trustProxy);
  const answerError = errorAnswerer(config.publicUrl);
  const refuseClient = clientErrorHandler(config.publicUrl);
  // The global budget's limiter, once the rate limit is registered (below).
  let limitUnrouted: Limiter | undefined;
  const app = Fastify({
    logger: {
      level: config.logLevel,
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
    // One line per request, with its operation, tenant and trace (src/observability/http.ts).
    logController: ownRequestLog(),
    clientErrorHandler: refuseClient,
    // Requests that arrive while the server closes (on a kept-alive connection) are answered
    // below, in the spec's error shape with Retry-After, rather than with Fastify's own body.
    return503OnClosing: false,
    // Router errors (bad percent-encoding, an over-long path segment) in the spec's error shape too.
    // They are answered before any hook runs, so they are counted here, against the budget of a
    // path with no route: same key, same headers, and past the budget the same 429.
    frameworkErrors: (error, rawRequest, rawReply) => {
      const request = rawRequest as FastifyRequest;
      const reply = rawReply as unknown as FastifyReply;
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
      if (limitUnrouted) limitUnrouted(request, reply, answer);
      else answer();
    },
  });

  // Metrics, the request log line and spans for every route declared from here on.
  registerRequestObservability(app, { tracing: tracingEnabled() });

  // Bodies are JSON, taken as sent; paths and query strings are text, coerced (src/operations/validation.ts).
  app.setValidatorCompiler(({ schema, httpPart }) => validatorOf(schema, httpPart === 'body' ? 'json' : 'text'));

  // JSON only: Fastify's own text/plain parser would let a plain-text body through to operations.
  // JSON.parse, then one walk (src/lib/json-body.ts) for what may not be stored or copied, a
  // `__proto__` key included (what Fastify's secure-json-parse refuses, without naming it).
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const overShape = shapeRefusal(body as Buffer, routeBodyLimits(request, config.bodyLimitBytes));
    if (overShape) return done(overShape);
    const decoded = jsonText(body as Buffer, request.headers['content-type']);
    if ('problem' in decoded) return done(new BadRequestError(decoded.problem));
    // An empty body reads as no body, so bodiless POSTs work whatever the client sends.
    if (decoded.text.trim() === '') return done(null, undefined);
    let value: unknown;
    try {
      value = JSON.parse(decoded.text);
    } catch {
      return done(new BadRequestError('The request body is not valid JSON.'));
    }
    const problem = jsonProblem(value);
    if (problem === undefined) return done(null, value);
    done(
      problem.forbiddenKey || problem.param === ''
        ? new BadRequestError(problem.message, problem.param || undefined)
        : new ValidationError(problem.param, problem.message),
    );
  });

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
  registerBodyDeadline(app, { timeoutMs: config.requestTimeoutMs, refuse: refuseClient });
  // A body its answer left unread is read and thrown away, up to a bound, then the connection closed.
  registerUnreadBody(app);

  // Shutdown: draining (readiness 503) from `drain()` or the start of `app.close()`; closing
  // (new requests 503 `service_unavailable`) from the start of `app.close()`, before any other
  // preClose hook, while in-flight requests finish. Before the rate limit, so it costs no budget.
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

  // The durable job queue (src/jobs/queue.ts); serve.ts starts its workers after listen.
  const jobs = createJobQueue({
    db,
    log: app.log,
    pollMs: config.jobPollMs,
    stopGraceMs: config.jobStopGraceMs,
    outages,
    // A delivery waits on the receiver (up to WEBHOOK_TIMEOUT_MS): in a lane of their own, slow
    // receivers hold up other deliveries at most, never a sync, a run or an evaluation. Waiting
    // costs little here, so the lane takes more at once than the default one. One tenant's
    // deliveries take at most WEBHOOK_TENANT_CONCURRENCY of its slots, so a tenant whose
    // receivers hang delays its own deliveries, not the other tenants'.
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
  // Webhook signing secrets, sealed at rest when SECRETS_KEY is set (src/lib/secret-box.ts).
  const secrets = createSecretBox(config.secretsKey, config.secretsKeyPrevious);
  registerWebhookDelivery(jobs, {
    db,
    secrets,
    allowPrivateTargets: config.allowPrivateTargets,
    timeoutMs: config.webhookTimeoutMs,
    retry: { baseMs: config.webhookRetryBaseMs, maxMs: config.webhookRetryMaxMs },
    log: app.log,
  });
  const services = createServices({ db, config, jobs, secrets });
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

  await registerOpenApi(app, { operations: OPERATIONS, config });
  if (redis) reportRedisOutages(redis, app.log);
  limitUnrouted = registerRateLimit(app, {
    perMinute: config.rateLimitPerMinute,
    redis,
    namespace: `${redisNamespace ?? config.redisKeyPrefix}rl:`,
  });
  registerHeaderAnswers(app, config.publicUrl);
  registerMetricsEndpoint(app, { adminToken: config.adminToken, publicUrl: config.publicUrl, db });

  // Authentication runs after the rate limit (onRequest) and before the body is read, on the
  // routes of operations and on those marked `authenticated` (MCP); the others carry no hook.
  app.decorateRequest('auth', null);
  app.addHook('onRoute', (route) => {
    const { operation, authenticated, bearerKey = false } = route.config ?? {};
    if (!operation && !authenticated) return;
    const admit = (request: FastifyRequest, auth: AuthContext) => {
      if (operation) checkScope(operation, auth);
      request.auth = auth;
    };
    // A callback hook, not an async one: a key seen in the last second is judged without a promise.
    const authenticate: preParsingHookHandler = (request, _reply, payload, done) => {
      let auth: AuthContext | Promise<AuthContext>;
      try {
        auth = authenticator.authenticate(presentedKey(request.headers, bearerKey), request.headers.host);
      } catch (error) {
        return done(error as Error);
      }
      judgeThen(
        auth,
        (resolved) => admit(request, resolved),
        (error) => (error ? done(error) : done(null, payload)),
      );
    };
    route.preParsing = [authenticate, ...hookList(route.preParsing)];
  });
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
  // keys on the settings page (src/admin/settings/).
  const owners = createOwnerService({ db });
  mountControlPlane(app, controlPlaneOperations, {
    services,
    controlPlane: { owners, keysChanged: () => authenticator.forgetAll() },
    operatorOnly: operatorCheck({ tenants: services.tenants, adminToken: config.adminToken }),
    maxBodyBytes: config.bodyLimitBytes,
  });
  await registerSettingsPages(app, { config, tenants: services.tenants, owners, authenticator, outages });
  await registerDocsRoutes(app);

  app.get('/healthz', { schema: { hide: true }, config: { rateLimit: false } }, async () => ({ status: 'ok' }));
  // Readiness: 503 once shutdown has begun, or when the database does not answer within
  // READY_CHECK_TIMEOUT_MS. One check at a time: a probe that finds the last one still waiting
  // (a stalled connection) waits on it too, rather than taking another pooled connection.
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
    if (draining) {
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

  const drain = () => {
    draining = true;
  };
  return { app, services, authenticator, jobs, drain };
}
