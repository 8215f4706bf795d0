// The serving process: config → database → migrations → first-start seed → listen; and a
// graceful stop on SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the rest).
import { Redis } from 'ioredis';
import type { Config } from './config.js';
import { openDatabase } from './db/client.js';
import { migrateToLatest } from './db/migrate.js';
import { ALL_SCOPES } from './domain/scopes.js';
import type { TenantService } from './domain/tenants.js';
import { sweepIdempotencyKeys } from './http/idempotency.js';
import { buildApp } from './server.js';

const HOUR_MS = 3_600_000;

/** On an empty embedded database: the demo tenant and a key with every scope, printed once. */
async function seedFirstStart(tenants: TenantService, config: Config, embedded: boolean): Promise<string[]> {
  const lines: string[] = [];
  if (!config.adminToken && (await tenants.countOperatorTokens()) === 0) {
    const token = await tenants.createOperatorToken();
    lines.push(`Operator token (control plane, shown once): ${token}`);
  }
  if (embedded && (await tenants.countTenants()) === 0) {
    await tenants.createTenant({ tenant_id: 'demo', name: 'Demo workspace' });
    const key = await tenants.createApiKey('demo', { name: 'demo (all scopes)', scopes: ALL_SCOPES });
    lines.push('Demo tenant: demo');
    lines.push(`Demo API key (every scope, shown once): ${key.secret}`);
  }
  return lines;
}

export async function serve(config: Config): Promise<void> {
  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(database.db);
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: false })
    : undefined;
  redis?.on('error', () => {
    /* reported by the rate limiter's skipOnError path; ioredis reconnects by itself */
  });

  const { app, services } = await buildApp({ config, db: database.db, redis });
  const seeded = await seedFirstStart(services.tenants, config, database.kind === 'pglite');

  const sweeper = setInterval(() => {
    sweepIdempotencyKeys(database.db).catch((error) => app.log.warn({ err: String(error) }, 'idempotency sweep'));
  }, HOUR_MS);
  sweeper.unref();

  app.addHook('onClose', async () => {
    clearInterval(sweeper);
  });

  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const origin = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  if (seeded.length > 0) {
    process.stdout.write(
      [
        '',
        '  Workspace API is ready.',
        ...seeded.map((line) => `  ${line}`),
        '',
        `  Try: curl -H 'X-API-Key: <demo key>' ${origin}/api/v1/apps`,
        `  Docs: ${origin}/docs`,
        '',
      ].join('\n'),
    );
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    try {
      await app.close();
      redis?.disconnect();
      await database.close();
      process.exit(0);
    } catch (error) {
      app.log.error({ err: String(error) }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
