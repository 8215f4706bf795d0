// Row throughput of custom data sources: PUT upsert and GET of one row, ~10 s each, with
// autocannon against the real app listening on 127.0.0.1 (never anything else).
//   npx tsx bench/rows.ts                      # in-memory PGlite, in this process
//   DATABASE_URL=postgres://… npx tsx bench/rows.ts
// Options (environment): BENCH_SECONDS (10), BENCH_CONNECTIONS (10), BENCH_ROWS (1000).
// The load generator runs in a worker thread so it does not share the server's event loop.
// On PostgreSQL it works in a schema of its own (`bench_rows_…`), dropped at the end, so it
// leaves nothing behind in the database it is pointed at.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import os from 'node:os';
import type { DatabaseHandle } from '../src/db/client.js';
import { startBenchApp, withBenchDatabase } from './support.js';

// autocannon ships no types (and @types/autocannon is not installed): the little used here, typed.
interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
type Autocannon = (options: {
  url: string;
  connections: number;
  duration: number;
  workers?: number;
  requests: { method: string; path: string; headers: Record<string, string>; body?: string }[];
}) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ROWS = Number(process.env.BENCH_ROWS ?? 1000);

const rowBody = (i: number) =>
  JSON.stringify({
    data: { sku: `SKU-${i}`, price: (i % 97) + 0.99, stock: i % 13, tags: ['a', 'b'], updated: '2024-05-01' },
    tags: [i % 2 === 0 ? 'even' : 'odd'],
    searchable_text: `product ${i} lamp chair table`,
    content: `Product number ${i}: a short description of the product for full-text search.`,
  });

async function main() {
  await withBenchDatabase('bench_rows', run);
}

async function run(database: DatabaseHandle) {
  const { app, services, origin } = await startBenchApp(database);

  const tenantId = `bench-${randomBytes(4).toString('hex')}`;
  await services.tenants.createTenant({ tenant_id: tenantId, name: tenantId });
  const { secret: key } = await services.tenants.createApiKey(tenantId, { name: 'bench', scopes: ['knowledge:write'] });
  const headers = { 'x-api-key': key, 'content-type': 'application/json' };

  const slug = `bench-${randomBytes(3).toString('hex')}`;
  const created = await fetch(`${origin}/api/v1/custom-data-sources`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'Bench', slug }),
  });
  if (created.status !== 201) throw new Error(`create source: ${created.status} ${await created.text()}`);
  for (let start = 0; start < ROWS; start += 100) {
    const rows = Array.from({ length: Math.min(100, ROWS - start) }, (_, k) => ({
      external_id: `row-${start + k}`,
      ...JSON.parse(rowBody(start + k)),
    }));
    const seeded = await fetch(`${origin}/api/v1/custom-data-sources/${slug}/rows/batch`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ rows }),
    });
    if (seeded.status !== 200) throw new Error(`seed: ${seeded.status} ${await seeded.text()}`);
  }

  // A fixed cycle of 200 distinct rows per connection: plain data, so it can cross to the worker.
  const ids = Array.from({ length: 200 }, (_, i) => (i * 7919) % ROWS);
  const base = `/api/v1/custom-data-sources/${slug}/rows`;
  const scenarios = [
    {
      name: 'PUT upsert (replace an existing row)',
      requests: ids.map((i) => ({ method: 'PUT' as const, path: `${base}/row-${i}`, headers, body: rowBody(i) })),
    },
    {
      name: 'GET row',
      requests: ids.map((i) => ({ method: 'GET' as const, path: `${base}/row-${i}`, headers })),
    },
  ];

  const db = database.kind === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : 'PGlite in-process (in memory)';
  console.log(
    `rows benchmark — ${db}; ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}`,
  );
  console.log(`${ROWS} seeded rows, ${CONNECTIONS} connections, ${SECONDS} s per scenario\n`);
  for (const scenario of scenarios) {
    const result = await autocannon({
      url: origin,
      connections: CONNECTIONS,
      duration: SECONDS,
      workers: 1,
      requests: scenario.requests,
    });
    const non2xx = result.non2xx + result.errors + result.timeouts;
    console.log(
      `${scenario.name.padEnd(38)} ${result.requests.average.toFixed(0).padStart(6)} req/s` +
        `   p50 ${result.latency.p50} ms   p99 ${result.latency.p99} ms` +
        `   (${result.requests.total} requests, ${non2xx} non-2xx/errors)`,
    );
  }

  await fetch(`${origin}/api/v1/custom-data-sources/${slug}`, { method: 'DELETE', headers });
  await app.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
