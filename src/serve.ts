// The serving process: config → database → migrations → first-start seed → listen; and a
// graceful stop on SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the rest).

import { type App, buildApp } from './app.js';
import type { Config } from './config.js';
import { type Db, migrateToLatest, openDatabaseAtStart } from './db/index.js';
import { createOwnerService } from './domain/accounts/owners.js';
import { ALL_SCOPES } from './domain/accounts/scopes.js';
import type { TenantService } from './domain/accounts/tenants.js';
import { sweepIdempotencyKeys } from './http/idempotency.js';
import { tuneHeapGrowth } from './lib/heap.js';
import { connectRedis } from './lib/redis.js';
import { startProgress } from './lib/start-progress.js';
import { startTracing, stopTracing } from './observability/tracing.js';

const HOUR_MS = 3_600_000;

/** On an empty embedded database: the demo tenant and a key with every scope, printed once. */
const DEMO_OWNER_EMAIL = 'owner@example.com';

async function seedFirstStart(tenants: TenantService, db: Db, config: Config, embedded: boolean): Promise<string[]> {
  const lines: string[] = [];
  if (config.adminToken) {
    // ADMIN_TOKEN replaces a token generated at an earlier start (printed, so perhaps kept in a
    // log): it opens nothing from now on, and a start without ADMIN_TOKEN generates a new one.
    const retired = await tenants.retireOperatorTokens();
    if (retired > 0) lines.push('Operator token generated at an earlier start: retired, ADMIN_TOKEN replaces it');
  } else if ((await tenants.countOperatorTokens()) === 0) {
    const token = await tenants.createOperatorToken();
    lines.push(`Operator token (control plane, shown once): ${token}`);
  }
  if (embedded && (await tenants.countTenants()) === 0) {
    await tenants.createTenant({ tenant_id: 'demo', name: 'Demo workspace' });
    const key = await tenants.createApiKey('demo', { name: 'demo (all scopes)', scopes: ALL_SCOPES });
    lines.push('Demo tenant: demo');
    lines.push(`Demo API key (every scope, shown once): ${key.secret}`);
    // The demo owner signs in to the settings page (/admin/settings/integrations/api).
    const { owner, generatedPassword } = await createOwnerService({ db }).createOwner('demo', {
      email: DEMO_OWNER_EMAIL,
    });
    lines.push(`Demo owner (settings page /admin/login, shown once): ${owner.email} / ${generatedPassword}`);
  }
  return lines;
}

/**
 * SIGTERM and SIGINT stop the server gracefully: readiness fails first, requests are still served
 * for SHUTDOWN_DELAY_MS, then the app closes (jobs get their grace), and the process exits.
 */
function stopOnSignals({
  app,
  drain,
  config,
  redis,
  database,
}: {
  app: App['app'];
  drain: () => void;
  config: Config;
  redis: Awaited<ReturnType<typeof connectRedis>> | undefined;
  database: Awaited<ReturnType<typeof openDatabaseAtStart>>;
}): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    // /readyz answers 503 from now on; requests are still served for SHUTDOWN_DELAY_MS, so load
    // balancers stop sending them before the listener closes (then new ones answer 503).
    drain();
    if (config.shutdownDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, config.shutdownDelayMs));
    // Past the jobs' grace period (JOB_STOP_GRACE_MS) and a margin for the rest, exit regardless.
    const forceAfterMs = Math.max(15_000, config.jobStopGraceMs + 5_000);
    const force = setTimeout(() => {
      app.log.error(
        { after_ms: forceAfterMs },
        'shutdown did not finish in time (requests or the database still busy): exiting',
      );
      process.exit(1);
    }, forceAfterMs);
    force.unref();
    try {
      await app.close();
      redis?.disconnect();
      await database.close();
      // The spans of the last requests are sent before the process ends.
      await stopTracing().catch((error) => app.log.warn({ err: String(error) }, 'traces not flushed'));
      process.exit(0);
    } catch (error) {
      app.log.error({ err: String(error) }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

/** The first start's secrets and where to begin, shown once. */
function printFirstStart(seeded: string[], origin: string): void {
  process.stdout.write(
    [
      '',
      '  Workspace API is ready.',
      ...seeded.map((line) => `  ${line}`),
      '',
      // The demo key exists only where the demo tenant was just seeded (an empty embedded database).
      ...(seeded.includes('Demo tenant: demo') ? [`  Try: curl -H 'X-API-Key: <demo key>' ${origin}/api/v1/apps`] : []),
      `  Docs: ${origin}/docs`,
      `  API keys (workspace owners): ${origin}/admin/settings/integrations/api`,
      '',
    ].join('\n'),
  );
}

export async function serve(config: Config): Promise<void> {
  const progress = startProgress((text) => process.stderr.write(text), config.logLevel === 'silent');
  // Before the database is opened and the app built: both look once whether tracing is on.
  await startTracing();
  const database = await openDatabaseAtStart({
    url: config.databaseUrl,
    dataDir: config.dataDir,
    preparedStatements: config.databasePreparedStatements,
    stage: progress.stage,
  });
  tuneHeapGrowth(database.kind);
  await migrateToLatest(database.db, progress.stage);
  progress.begin('Starting the server');
  const redis = config.redisUrl ? await connectRedis(config.redisUrl) : undefined;

  const { app, services, jobs, drain } = await buildApp({ config, db: database.db, redis });
  const seeded = await seedFirstStart(services.tenants, database.db, config, database.kind === 'pglite');
  const sealed = await services.webhooks.sealStoredSecrets();
  if (sealed > 0) app.log.info({ endpoints: sealed }, 'webhook signing secrets sealed under SECRETS_KEY');

  const sweeper = setInterval(() => {
    sweepIdempotencyKeys(database.db).catch((error) => app.log.warn({ err: String(error) }, 'idempotency sweep'));
  }, HOUR_MS);
  sweeper.unref();

  app.addHook('onClose', async () => {
    clearInterval(sweeper);
  });

  // Signals are handled from before the first request can arrive, so a stop is always graceful.
  stopOnSignals({ app, drain, config, redis, database });

  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    // The first start's secrets are created and shown once: shown even when the server cannot
    // listen (the port taken), since the next start will not show them again.
    if (seeded.length > 0) {
      process.stdout.write(
        ['', '  The server did not start; these are shown once:', ...seeded.map((line) => `  ${line}`), ''].join('\n'),
      );
    }
    await database.close();
    throw error;
  }
  // Job workers (source syncs and other background work) and their schedules; app.close stops them.
  jobs.start();
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const origin = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  progress.ready(origin);
  if (seeded.length > 0) printFirstStart(seeded, origin);
}
