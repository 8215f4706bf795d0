// The benchmark of record (issue 10), one command: `npm run bench` (PGlite) or
// `DATABASE_URL=postgres://… npm run bench`. It builds and starts the real server as its own
// process (compiled, as `npm start` runs it), loads it with autocannon on 127.0.0.1 only, and measures:
//   hello       a bare Fastify hello-world (the HTTP ceiling)
//   db-point    a bare loop of the same point query the row read makes, straight on the same
//               database (PGlite in this process; PostgreSQL through the same driver and pool)
//   row-read    authenticated GET /api/v1/custom-data-sources/{slug}/rows/{external_id}
//   comment     authenticated POST /api/v1/tasks/{task_id}/comments
//   mcp-call    authenticated MCP tools/call get_custom_data_source_row
// For each: requests per second, p50/p99 latency and the server's peak RSS (VmHWM, reset
// before each run). Options: BENCH_SECONDS (10), BENCH_CONNECTIONS (50), BENCH_ROWS (1000).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGliteDialect } from '../src/db/pglite-dialect.js';
import { ALL_SCOPES } from '../src/domain/scopes.js';

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROWS = Number(process.env.BENCH_ROWS ?? 1000);
const ADMIN = `bench-admin-${randomBytes(8).toString('hex')}`;
// The server runs as `npm start` runs it: compiled JavaScript (built first, below).
const SERVER = path.resolve('dist/src/cli/main.js');

interface Line {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  rssMb: number | null;
  errors: number;
}

const rowData = (i: number) => ({
  data: { sku: `SKU-${i}`, price: (i % 97) + 0.99, stock: i % 13, tags: ['a', 'b'] },
  tags: [i % 2 === 0 ? 'even' : 'odd'],
  searchable_text: `product ${i} lamp chair table`,
  content: `Product number ${i}: a short description.`,
});

async function freePort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function waitHealthy(url: string, child: ChildProcess) {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`process exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not become healthy`);
}

function resetPeak(pid: number | undefined) {
  if (pid === undefined) return;
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    /* not Linux, or not permitted: the peak then covers the whole run */
  }
}

function peakRssMb(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Math.round(Number(match[1]) / 1024) : null;
  } catch {
    return null;
  }
}

async function load(name: string, pid: number | undefined, options: Record<string, unknown>): Promise<Line> {
  resetPeak(pid);
  const result = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...options });
  return {
    name,
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    rssMb: peakRssMb(pid),
    errors: result.non2xx + result.errors,
  };
}

async function api(base: string, method: string, p: string, body: unknown, headers: Record<string, string>) {
  const r = await fetch(`${base}${p}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await r.json()) as Record<string, unknown>;
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

/** The same point query the row read makes, in a tight loop on the same kind of database. */
async function dbCeiling(databaseUrl: string | undefined, schema: string | undefined): Promise<Line> {
  const db = databaseUrl
    ? new Kysely<never>({
        dialect: new PostgresDialect({
          pool: new pg.Pool({ connectionString: databaseUrl, max: 10, options: `-c search_path=${schema}` }),
        }),
      })
    : new Kysely<never>({ dialect: new PGliteDialect(new PGlite()) });
  await sql`create table bench_rows (id uuid primary key, external_id text unique not null, data jsonb not null,
    tags text[] not null, searchable_text text not null, content text not null, updated_at timestamptz not null default now())`.execute(
    db,
  );
  await sql`insert into bench_rows (id, external_id, data, tags, searchable_text, content)
    select gen_random_uuid(), 'row-' || i, jsonb_build_object('sku', 'SKU-' || i, 'price', i), array['even'], 'product', 'content'
    from generate_series(0, ${ROWS - 1}) i`.execute(db);
  const latencies: number[] = [];
  const end = Date.now() + SECONDS * 1000;
  let done = 0;
  const worker = async (w: number) => {
    let i = w;
    while (Date.now() < end) {
      const started = performance.now();
      await sql`select id, external_id, data, tags, searchable_text, content, updated_at from bench_rows where external_id = ${`row-${i++ % ROWS}`}`.execute(
        db,
      );
      latencies.push(performance.now() - started);
      done++;
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, w) => worker(w)));
  await db.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round((latencies[Math.floor(latencies.length * q)] ?? 0) * 10) / 10;
  return {
    name: 'db-point (ceiling)',
    rps: Math.round(done / SECONDS),
    p50: at(0.5),
    p99: at(0.99),
    rssMb: null,
    errors: 0,
  };
}

async function main() {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
  const databaseUrl = process.env.DATABASE_URL;
  let schema: string | undefined;
  let dataDir: string | undefined;
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    ADMIN_TOKEN: ADMIN,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '10000000',
    MCP_MAX_CONCURRENT: String(CONNECTIONS * 2),
  };
  if (databaseUrl) {
    schema = `bench_${randomBytes(4).toString('hex')}`;
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`create schema ${schema}`);
    await client.end();
    const url = new URL(databaseUrl);
    url.searchParams.set('options', `-c search_path=${schema}`);
    env.DATABASE_URL = url.toString();
  } else {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-bench-'));
    env.DATA_DIR = dataDir;
    delete env.DATABASE_URL;
  }
  const lines: Line[] = [];
  const children: ChildProcess[] = [];
  try {
    // The HTTP ceiling: a bare Fastify hello-world in its own process.
    const helloPort = await freePort();
    const hello = spawn(
      process.execPath,
      [
        '-e',
        `require('fastify')().get('/', async () => ({ hello: 'world' })).listen({ port: ${helloPort}, host: '127.0.0.1' })`,
      ],
      { stdio: 'ignore' },
    );
    children.push(hello);
    await waitHealthyPlain(`http://127.0.0.1:${helloPort}/`);
    lines.push(await load('hello (Fastify ceiling)', hello.pid, { url: `http://127.0.0.1:${helloPort}/` }));
    hello.kill();

    lines.push(await dbCeiling(databaseUrl, schema));

    const port = await freePort();
    const server = spawn(process.execPath, [SERVER, 'serve'], {
      env: { ...env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(server);
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base, server);
    const admin = { authorization: `Bearer ${ADMIN}` };
    await api(base, 'POST', '/admin/v1/tenants', { tenant_id: 'bench', name: 'Bench' }, admin);
    const key = (
      await api(base, 'POST', '/admin/v1/tenants/bench/api-keys', { name: 'bench', scopes: ALL_SCOPES }, admin)
    ).secret as string;
    const auth = { 'x-api-key': key };
    await api(base, 'POST', '/api/v1/custom-data-sources', { name: 'Orders', slug: 'orders' }, auth);
    for (let start = 0; start < ROWS; start += 100) {
      const rows = Array.from({ length: Math.min(100, ROWS - start) }, (_, j) => ({
        external_id: `row-${start + j}`,
        ...rowData(start + j),
      }));
      await api(base, 'POST', '/api/v1/custom-data-sources/orders/rows/batch', { rows }, auth);
    }
    const task = (await api(base, 'POST', '/api/v1/tasks', { title: 'Bench task' }, auth)).id as string;

    let n = 0;
    lines.push(
      await load('row-read', server.pid, {
        url: base,
        requests: [
          {
            method: 'GET',
            headers: auth,
            setupRequest: (request: Record<string, unknown>) => ({
              ...request,
              path: `/api/v1/custom-data-sources/orders/rows/row-${n++ % ROWS}`,
            }),
          },
        ],
      }),
    );
    lines.push(
      await load('comment-write', server.pid, {
        url: base,
        requests: [
          {
            method: 'POST',
            path: `/api/v1/tasks/${task}/comments`,
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ content: 'A comment written by the benchmark.' }),
          },
        ],
      }),
    );
    lines.push(
      await load('mcp-call', server.pid, {
        url: base,
        requests: [
          {
            method: 'POST',
            path: '/api/v1/mcp',
            headers: {
              ...auth,
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': '2025-06-18',
            },
            setupRequest: (request: Record<string, unknown>) => ({
              ...request,
              body: JSON.stringify({
                jsonrpc: '2.0',
                id: 1,
                method: 'tools/call',
                params: {
                  name: 'get_custom_data_source_row',
                  arguments: { id_or_slug: 'orders', external_id: `row-${n++ % ROWS}` },
                },
              }),
            }),
          },
        ],
      }),
    );
    server.kill('SIGTERM');
  } finally {
    for (const child of children) child.kill('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    if (schema && databaseUrl) {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      await client.query(`drop schema ${schema} cascade`);
      await client.end();
    }
  }
  const ceiling = lines.find((l) => l.name.startsWith('db-point'))?.rps ?? 0;
  const db = databaseUrl ? 'PostgreSQL' : 'PGlite';
  console.log(
    `\n${db}, ${CONNECTIONS} connections, ${SECONDS} s each, ${os.cpus().length} CPUs, ${new Date().toISOString().slice(0, 10)}\n`,
  );
  console.log('| scenario | req/s | p50 ms | p99 ms | peak RSS MB | vs db ceiling | errors |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const l of lines) {
    const ratio =
      ceiling && !l.name.startsWith('db-point') && !l.name.startsWith('hello')
        ? `${Math.round((l.rps / ceiling) * 100)} %`
        : '';
    console.log(`| ${l.name} | ${l.rps} | ${l.p50} | ${l.p99} | ${l.rssMb ?? ''} | ${ratio} | ${l.errors} |`);
  }
}

async function waitHealthyPlain(url: string) {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not start`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
