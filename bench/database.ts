// What each piece of the database layer buys (docs/database.md): `npx tsx bench/database.ts`
// (PGlite) or `DATABASE_URL=postgres://… npx tsx bench/database.ts`. One server per variant
// (database-server.ts, each its own process, data directory or schema): everything on (`all`),
// then one piece off each: `unprepared` (no prepared statements), `uncoalesced` (every comment
// write and row read a statement of its own), and on PGlite `one-client` (one pooled client on
// the database's thread rather than four) and `in-thread` (the database in the server's own
// thread, one client). The row read, the comment write and a row search (`q`, a heavy query) run
// on each, in rotating order, BENCH_ROUNDS (3) times; the table gives each run, the medians, each
// variant's ratio to `all` in the same round (on a machine whose speed drifts between minutes,
// their median is the figure to read) and the server's CPU time per request. Options:
// BENCH_SECONDS (10), BENCH_WARMUP (2), BENCH_CONNECTIONS (50), BENCH_ROWS (1000), BENCH_ROUNDS
// (3), BENCH_VARIANTS and BENCH_SCENARIOS (comma-separated subsets).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import {
  api,
  autocannon,
  freePort,
  processCpuUs,
  seedOrders,
  serverDatabase,
  startFlags,
  stopProcess,
  waitHealthy,
} from './support.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROWS = Number(process.env.BENCH_ROWS ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ADMIN = `bench-admin-${randomBytes(8).toString('hex')}`;
const DATABASE_URL = process.env.DATABASE_URL;

const ALL_VARIANTS = DATABASE_URL
  ? ['all', 'unprepared', 'uncoalesced']
  : ['all', 'unprepared', 'uncoalesced', 'one-client', 'in-thread'];
const VARIANTS = process.env.BENCH_VARIANTS?.split(',').map((v) => v.trim()) ?? ALL_VARIANTS;
const SCENARIOS = (process.env.BENCH_SCENARIOS?.split(',').map((s) => s.trim()) ?? [
  'row-read',
  'comment-write',
  'search',
]) as Scenario[];
type Scenario = 'row-read' | 'comment-write' | 'search';

interface Server {
  variant: string;
  child: ChildProcess;
  base: string;
  requests: Record<Scenario, Record<string, unknown>[]>;
  cleanUp: () => Promise<void>;
}

interface Run {
  variant: string;
  scenario: Scenario;
  rps: number;
  p50: number;
  p99: number;
  cpuUs: number | null;
  errors: number;
}

/** The variant's server, seeded with a workspace, a key, ROWS rows and a task. */
async function startServer(variant: string): Promise<Server> {
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    ADMIN_TOKEN: ADMIN,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '10000000',
    HOST: '127.0.0.1',
    BENCH_DATABASE: variant,
  };
  delete env.OTEL_EXPORTER_OTLP_ENDPOINT;
  delete env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  delete env.DATABASE_COALESCING;
  if (variant === 'uncoalesced') env.DATABASE_COALESCING = 'off';
  const { remove: cleanUp } = await serverDatabase(`bench-db-${variant}`, env);
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...startFlags(), '--import', 'tsx', path.resolve('bench/database-server.ts')],
    { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const base = `http://127.0.0.1:${port}`;
  await waitHealthy(base, child, 120_000);
  const key = await seedOrders(base, ADMIN, ROWS, (i) => ({
    data: { sku: `SKU-${i}`, price: (i % 97) + 0.99 },
    searchable_text: `product ${i} lamp chair table`,
  }));
  const auth = { 'x-api-key': key };
  const task = (await api(base, 'POST', '/api/v1/tasks', { title: 'Bench task' }, auth)).id as string;
  const rows = (request: (i: number) => Record<string, unknown>) => Array.from({ length: ROWS }, (_, i) => request(i));
  return {
    variant,
    child,
    base,
    requests: {
      'row-read': rows((i) => ({
        method: 'GET',
        path: `/api/v1/custom-data-sources/orders/rows/row-${i}`,
        headers: auth,
      })),
      'comment-write': [
        {
          method: 'POST',
          path: `/api/v1/tasks/${task}/comments`,
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ content: 'A comment written by the benchmark.' }),
        },
      ],
      search: rows((i) => ({
        method: 'GET',
        path: `/api/v1/custom-data-sources/orders/rows?q=lamp+${i}&limit=10`,
        headers: auth,
      })),
    },
    cleanUp,
  };
}

async function load(server: Server, scenario: Scenario): Promise<Run> {
  const options = { url: server.base, connections: CONNECTIONS, requests: server.requests[scenario] };
  if (WARMUP > 0) await autocannon({ ...options, duration: WARMUP });
  const cpuBefore = processCpuUs(server.child.pid);
  const result = await autocannon({ ...options, duration: SECONDS });
  const cpuAfter = processCpuUs(server.child.pid);
  return {
    variant: server.variant,
    scenario,
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuUs:
      cpuBefore === null || cpuAfter === null || result.requests.total === 0
        ? null
        : Math.round((cpuAfter - cpuBefore) / result.requests.total),
    errors: result.non2xx + result.errors,
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

/** Each variant's runs of `scenario`, and its ratio to `all` in each round (the same minute). */
function ratiosTo(runs: Run[], scenario: Scenario, variant: string): number[] {
  const of = (v: string) => runs.filter((r) => r.scenario === scenario && r.variant === v);
  const all = of('all');
  return of(variant).flatMap((r, round) => {
    const base = all[round]?.rps;
    return base ? [r.rps / base] : [];
  });
}

function report(runs: Run[]) {
  const db = DATABASE_URL ? 'PostgreSQL' : 'PGlite';
  console.log(
    `\n${db}, ${CONNECTIONS} connections, ${SECONDS} s each, ${ROUNDS} rounds, ${os.cpus().length} CPUs, load average ${os.loadavg()[0]?.toFixed(1)}, ${new Date().toISOString().slice(0, 10)}\n`,
  );
  console.log(
    '| scenario | variant | req/s of each round | median req/s | vs all, each round | median vs all | p50 ms | p99 ms | server CPU µs/req | errors |',
  );
  console.log('| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |');
  const percent = (ratio: number) => `${Math.round(ratio * 100)} %`;
  for (const scenario of SCENARIOS) {
    for (const variant of VARIANTS) {
      const list = runs.filter((r) => r.scenario === scenario && r.variant === variant);
      const ratios = ratiosTo(runs, scenario, variant);
      const cells = [
        list.map((r) => r.rps).join(', '),
        median(list.map((r) => r.rps)),
        ratios.map(percent).join(', '),
        ratios.length ? percent(median(ratios)) : '',
        median(list.map((r) => r.p50)),
        median(list.map((r) => r.p99)),
        median(list.map((r) => r.cpuUs ?? 0)),
        list.reduce((sum, r) => sum + r.errors, 0),
      ];
      console.log(`| ${scenario} | ${variant} | ${cells.join(' | ')} |`);
    }
  }
}

async function main() {
  const servers: Server[] = [];
  const runs: Run[] = [];
  try {
    for (const variant of VARIANTS) servers.push(await startServer(variant));
    // Every server warmed on every scenario first (JIT, caches, pools): otherwise the first server of
    // the first round meets its load cold.
    for (const scenario of SCENARIOS) {
      for (const server of servers) {
        await autocannon({
          url: server.base,
          connections: CONNECTIONS,
          requests: server.requests[scenario],
          duration: 5,
        });
      }
    }
    for (let round = 0; round < ROUNDS; round++) {
      // Rotating order: a machine whose speed drifts favours no variant.
      const order = servers.map((_, i) => servers[(i + round) % servers.length] as Server);
      for (const scenario of SCENARIOS) {
        for (const server of order) {
          const run = await load(server, scenario);
          console.error(`${scenario} ${server.variant} round ${round + 1}: ${run.rps} req/s, p99 ${run.p99} ms`);
          runs.push(run);
        }
      }
    }
  } finally {
    for (const server of servers) {
      await stopProcess(server.child);
      await server.cleanUp();
    }
  }
  report(runs);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
