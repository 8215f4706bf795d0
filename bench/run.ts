// The benchmark of record, one command: `npm run bench` (PGlite) or
// `DATABASE_URL=postgres://… npm run bench`. It builds and starts the real server as its own
// process (compiled, as `npm start` runs it), loads it with autocannon on 127.0.0.1 only, and measures:
//   hello       a bare Fastify hello-world (the HTTP ceiling)
//   db-point    a bare loop of the same point query the row read makes, straight on the same
//               database (PGlite in this process; PostgreSQL through the same driver and pool),
//               sent as the driver sends it; on PostgreSQL once more as a prepared statement
//   floor       a bare Fastify route running that query through the API's database layer
//   row-read    authenticated GET /api/v1/custom-data-sources/{slug}/rows/{external_id}
//   comment     authenticated POST /api/v1/tasks/{task_id}/comments
//   mcp-call    authenticated MCP tools/call get_custom_data_source_row
// For each: requests per second, p50/p99 latency, the server's peak RSS (VmHWM, reset before
// each run) and the CPU time each party spent per request: the server process (for db-point, this
// benchmark's process, the database client), that process's main thread alone (the one thread
// that runs its JavaScript), PostgreSQL's processes, and autocannon (this process). Options:
// BENCH_SECONDS (10), BENCH_WARMUP (2, unmeasured seconds before each HTTP run),
// BENCH_CONNECTIONS (50), BENCH_ROWS (1000), BENCH_ONLY (a comma-separated list of hello, floor,
// row-read, comment-write, mcp-call; the ceiling always runs), BENCH_ROUNDS (0: after the table,
// that many more pairs of the db ceiling and the row read, run back to back, and the median of
// their ratios).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { openDatabase, PGLITE_OPTIONS } from '../src/db/client.js';
import { ThreadSocket } from '../src/db/pglite-thread.js';
import { prepareStatements } from '../src/db/prepared.js';
import { coalescedPointQuery, createPointTable, POINT_SQL, pointQuery } from './point.js';
import {
  api,
  autocannon,
  freePort,
  processCpuUs,
  SERVER,
  seedOrders,
  serverDatabase,
  startFlags,
  stopProcess,
  waitHealthy,
} from './support.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROWS = Number(process.env.BENCH_ROWS ?? 1000);
/** Seconds of the same load before each measured HTTP run: JIT, caches and pools warmed. */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const ONLY = process.env.BENCH_ONLY?.split(',').map((name) => name.trim());
/** Pairs of (db ceiling, row read) run back to back after the table, for the ratio's median. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 0);
const wanted = (scenario: string) => !ONLY || ONLY.includes(scenario);
const ADMIN = `bench-admin-${randomBytes(8).toString('hex')}`;
const SERVER_STDOUT = process.env.BENCH_SERVER_STDOUT;
// The server runs as `npm start` runs it (compiled first, below), with npm start's Node.js flags.
const SERVER_FLAGS = startFlags().concat((process.env.BENCH_SERVER_FLAGS ?? '').split(' ').filter(Boolean));

interface Line {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  rssMb: number | null;
  errors: number;
  /**
   * CPU microseconds per request: server (or database client), that process's main thread alone,
   * PostgreSQL, load generator.
   */
  cpu: { server: number | null; main: number | null; db: number | null; loadgen: number | null };
}

const rowData = (i: number) => ({
  data: { sku: `SKU-${i}`, price: (i % 97) + 0.99, stock: i % 13, tags: ['a', 'b'] },
  tags: [i % 2 === 0 ? 'even' : 'odd'],
  searchable_text: `product ${i} lamp chair table`,
  content: `Product number ${i}: a short description.`,
});

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

/** CPU time so far of each PostgreSQL process of this machine (null when PostgreSQL is not in play). */
function postgresCpuUs(): Map<number, number> | null {
  if (!process.env.DATABASE_URL) return null;
  const cpu = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/stat`, 'utf8').includes('(postgres)')) {
        cpu.set(Number(entry), processCpuUs(Number(entry)) ?? 0);
      }
    } catch {
      /* the process ended meanwhile */
    }
  }
  return cpu;
}

/**
 * PostgreSQL's CPU time between two readings: each process's own difference (a backend that
 * started meanwhile from zero), so that one that exited meanwhile does not subtract its total.
 */
function postgresCpuSpent(before: Map<number, number> | null, after: Map<number, number> | null): number | null {
  if (!before || !after) return null;
  let spent = 0;
  for (const [pid, used] of after) spent += used - (before.get(pid) ?? 0);
  return spent;
}

/** Measures the CPU each party spends while `work` runs, per unit of work done. */
async function measured<T extends { count: number }>(
  pid: number | undefined,
  work: () => Promise<T>,
): Promise<{ result: T; cpu: Line['cpu'] }> {
  const server = processCpuUs(pid);
  const main = processCpuUs(pid, true);
  const db = postgresCpuUs();
  const own = process.cpuUsage();
  const result = await work();
  const ownUsed = process.cpuUsage(own);
  const per = (before: number | null, after: number | null) =>
    before === null || after === null || result.count === 0 ? null : Math.round((after - before) / result.count);
  return {
    result,
    cpu: {
      server: per(server, processCpuUs(pid)),
      main: per(main, processCpuUs(pid, true)),
      db: per(0, postgresCpuSpent(db, postgresCpuUs())),
      loadgen: per(0, ownUsed.user + ownUsed.system),
    },
  };
}

async function load(name: string, pid: number | undefined, options: Record<string, unknown>): Promise<Line> {
  // The peak covers the warm-up too; the rates, latencies and CPU figures only the measured run.
  resetPeak(pid);
  if (WARMUP > 0) await autocannon({ connections: CONNECTIONS, duration: WARMUP, ...options });
  const { result, cpu } = await measured(pid, async () => {
    const r = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...options });
    return Object.assign(r, { count: r.requests.total });
  });
  return {
    name,
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    rssMb: peakRssMb(pid),
    errors: result.non2xx + result.errors,
    cpu,
  };
}

/**
 * One request per seeded row, built before the run: autocannon sends each connection through
 * them in turn from prepared buffers. (A `setupRequest` callback would rebuild every request in
 * the load generator, whose CPU time is taken from the same two cores as the server's.)
 */
function eachRow(request: (i: number) => Record<string, unknown>): Record<string, unknown>[] {
  return Array.from({ length: ROWS }, (_, i) => request(i));
}

/**
 * The same point query the row read makes, in a tight loop from CONNECTIONS concurrent loops, on
 * the database `query` reaches: for the ceiling, straight on it (PGlite in this thread; PostgreSQL
 * through the API's driver and pool of 10), and once more as the API reaches it.
 */
async function dbCeiling(name: string, query: (externalId: string) => Promise<unknown>): Promise<Line> {
  const latencies: number[] = [];
  resetPeak(process.pid);
  const end = Date.now() + SECONDS * 1000;
  const { result, cpu } = await measured(process.pid, async () => {
    let count = 0;
    const worker = async (w: number) => {
      let i = w;
      while (Date.now() < end) {
        const started = performance.now();
        await query(`row-${i++ % ROWS}`);
        latencies.push(performance.now() - started);
        count++;
      }
    };
    await Promise.all(Array.from({ length: CONNECTIONS }, (_, w) => worker(w)));
    return { count };
  });
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round((latencies[Math.floor(latencies.length * q)] ?? 0) * 10) / 10;
  return {
    name,
    rps: Math.round(result.count / SECONDS),
    p50: at(0.5),
    p99: at(0.99),
    // The loop's process: this one (on PGlite, the database too).
    rssMb: peakRssMb(process.pid),
    errors: 0,
    // The client side of the loop is this process: its time is the "server" column here.
    cpu: { server: cpu.loadgen, main: cpu.main, db: cpu.db, loadgen: null },
  };
}

/** PGlite in this thread, on the point table's files (which nothing else holds open meanwhile). */
async function openPointPGlite(pointDir: string | undefined) {
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = new PGlite(path.join(pointDir ?? '', 'pgdata'), PGLITE_OPTIONS);
  await pglite.waitReady;
  return pglite;
}

/**
 * The database ceiling: the point query as the driver sends it (unnamed statements), straight
 * on the database: PostgreSQL through the API's driver and pool of 10, or PGlite's own `query` in
 * this thread (on the point table's files, which nothing else holds open meanwhile).
 */
async function unpreparedCeiling(
  databaseUrl: string | undefined,
  schema: string | undefined,
  pointDir: string | undefined,
): Promise<Line> {
  if (databaseUrl) {
    const database = await openDatabase({ url: databaseUrl, schema, preparedStatements: 0 });
    const db = database.db as unknown as Kysely<never>;
    try {
      return await dbCeiling('db-point (ceiling)', (id) => pointQuery(db, id));
    } finally {
      await database.close();
    }
  }
  const pglite = await openPointPGlite(pointDir);
  try {
    return await dbCeiling('db-point (ceiling)', (id) => pglite.query(POINT_SQL, [id]));
  } finally {
    await pglite.close();
  }
}

/** The ceilings: the point table made, then the loops. */
async function dbCeilings(
  databaseUrl: string | undefined,
  schema: string | undefined,
  pointDir: string | undefined,
): Promise<Line[]> {
  const lines: Line[] = [];
  if (databaseUrl) {
    // The driver as it sends a query (unnamed statements), then as the API sends it (prepared).
    const database = await openDatabase({ url: databaseUrl, schema, preparedStatements: 0 });
    await createPointTable(database.db as unknown as Kysely<never>, ROWS);
    await database.close();
    lines.push(await unpreparedCeiling(databaseUrl, schema, pointDir));
    const prepared = await openDatabase({ url: databaseUrl, schema, preparedStatements: 200 });
    const db = prepared.db as unknown as Kysely<never>;
    lines.push(await dbCeiling('db-point, prepared', (id) => pointQuery(db, id)));
    lines.push(await dbCeiling('db-point, prepared, coalesced', coalescedPointQuery(db)));
    await prepared.close();
    return lines;
  }
  // PGlite: straight on the database in this thread, as PGlite's own `query` sends it (parse,
  // describe, bind, execute: the ceiling); then prepared, through node-postgres speaking the wire
  // protocol to PGlite in this thread (the way the API speaks to its thread, without the thread);
  // then through the API's own database thread.
  const database = await openDatabase({ dataDir: pointDir });
  const db = database.db as unknown as Kysely<never>;
  await createPointTable(db, ROWS);
  await database.close();
  lines.push(await unpreparedCeiling(databaseUrl, schema, pointDir));
  const pglite = await openPointPGlite(pointDir);
  const client = new pg.Client({
    stream: () => {
      const socket: ThreadSocket = new ThreadSocket({
        send: (bytes) => {
          // As the API's thread does it (pglite-thread.ts): the answer's bytes, unparsed.
          const chunks: Uint8Array[] = [];
          void pglite
            .execProtocolRawStream(bytes, { syncToFs: false, onRawData: (chunk) => chunks.push(chunk.slice()) })
            .then(() => socket.receive(Buffer.concat(chunks)));
        },
        gone: () => {},
      });
      return socket;
    },
  });
  await client.connect();
  prepareStatements(client, 200);
  // One query at a time on the one client, each sent when the one before has answered (as pg's own
  // queue would, which warns when it is used: it goes in pg 9).
  let previous: Promise<unknown> = Promise.resolve();
  const inTurn = (id: string) => {
    const next = previous.then(async () => (await client.query(POINT_SQL, [id])).rows[0]);
    previous = next.catch(() => {});
    return next;
  };
  lines.push(await dbCeiling('db-point, prepared, straight', inTurn));
  await client.end();
  await pglite.close();
  const threaded = await openDatabase({ dataDir: pointDir });
  const tdb = threaded.db as unknown as Kysely<never>;
  lines.push(await dbCeiling("db-point, prepared, the API's database thread", (id) => pointQuery(tdb, id)));
  lines.push(await dbCeiling("db-point, prepared, coalesced, the API's database thread", coalescedPointQuery(tdb)));
  await threaded.close();
  return lines;
}

async function main() {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
  const databaseUrl = process.env.DATABASE_URL;
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    ADMIN_TOKEN: ADMIN,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '10000000',
    MCP_MAX_CONCURRENT: String(CONNECTIONS * 2),
  };
  const { schema, dataDir, remove: removeDatabase } = await serverDatabase('bench', env);
  const lines: Line[] = [];
  const rounds: { ceiling: number; read: number; p99: number }[] = [];
  const children: ChildProcess[] = [];
  try {
    if (wanted('hello')) {
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
    }

    // The point table lives in the benchmark's schema (PostgreSQL) or a data directory of its own.
    const pointDir = dataDir ? path.join(dataDir, 'point') : undefined;
    lines.push(...(await dbCeilings(databaseUrl, schema, pointDir)));

    if (wanted('floor')) {
      // The floor: a bare Fastify route over the same query and database layer, in its own process.
      const floorPort = await freePort();
      const floor = spawn(process.execPath, ['--import', 'tsx', path.resolve('bench/floor.ts')], {
        env: {
          ...env,
          PORT: String(floorPort),
          ...(schema ? { BENCH_SCHEMA: schema } : {}),
          ...(pointDir ? { DATA_DIR: pointDir } : {}),
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.push(floor);
      const floorBase = `http://127.0.0.1:${floorPort}`;
      await waitHealthy(floorBase, floor);
      lines.push(
        await load('floor: bare Fastify route + query', floor.pid, {
          url: floorBase,
          requests: eachRow((i) => ({ method: 'GET', path: `/rows/row-${i}` })),
        }),
      );
      floor.kill();
      await new Promise((resolve) => (floor.exitCode !== null ? resolve(null) : floor.once('exit', resolve)));
    }

    const port = await freePort();
    const server = spawn(process.execPath, [...SERVER_FLAGS, SERVER, 'serve'], {
      env: { ...env, PORT: String(port), HOST: '127.0.0.1' },
      // The server's standard output (a GC trace: `--trace-gc-nvp`) to BENCH_SERVER_STDOUT, a file.
      stdio: ['ignore', SERVER_STDOUT ? openSync(SERVER_STDOUT, 'w') : 'ignore', 'inherit'],
    });
    children.push(server);
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base, server);
    const auth = { 'x-api-key': await seedOrders(base, ADMIN, ROWS, rowData) };
    const task = (await api(base, 'POST', '/api/v1/tasks', { title: 'Bench task' }, auth)).id as string;

    const rowRead = () =>
      load('row-read', server.pid, {
        url: base,
        requests: eachRow((i) => ({
          method: 'GET',
          path: `/api/v1/custom-data-sources/orders/rows/row-${i}`,
          headers: auth,
        })),
      });
    if (wanted('row-read')) lines.push(await rowRead());
    if (wanted('comment-write')) {
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
    }
    if (wanted('mcp-call')) {
      lines.push(
        await load('mcp-call', server.pid, {
          url: base,
          requests: eachRow((i) => ({
            method: 'POST',
            path: '/api/v1/mcp',
            headers: {
              ...auth,
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': '2025-06-18',
            },
            body: JSON.stringify({
              jsonrpc: '2.0',
              id: 1,
              method: 'tools/call',
              params: {
                name: 'get_custom_data_source_row',
                arguments: { id_or_slug: 'orders', external_id: `row-${i}` },
              },
            }),
          })),
        }),
      );
    }
    // The ratio again, from pairs measured back to back: on a shared machine whose speed drifts
    // between minutes, the median of paired ratios is steadier than one ceiling against one read.
    for (let round = 0; round < ROUNDS; round++) {
      const ceiling = await unpreparedCeiling(databaseUrl, schema, pointDir);
      const read = await rowRead();
      rounds.push({ ceiling: ceiling.rps, read: read.rps, p99: read.p99 });
    }
    // A clean stop, so that a profile asked for in BENCH_SERVER_FLAGS is written.
    await stopProcess(server);
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await removeDatabase();
  }
  const ceiling = lines.find((l) => l.name === 'db-point (ceiling)')?.rps ?? 0;
  // The same query prepared, straight on the database: the stricter comparison.
  const preparedCeiling = lines.find((l) => l.name.startsWith('db-point, prepared'))?.rps ?? 0;
  // The point reads as the row read makes them, coalesced: the strictest.
  const coalescedCeiling = lines.find((l) => l.name.startsWith('db-point, prepared, coalesced'))?.rps ?? 0;
  const db = databaseUrl ? 'PostgreSQL' : 'PGlite';
  console.log(
    `\n${db}, ${CONNECTIONS} connections, ${SECONDS} s each, ${os.cpus().length} CPUs, ${new Date().toISOString().slice(0, 10)}\n`,
  );
  console.log(
    '| scenario | req/s | p50 ms | p99 ms | peak RSS MB | vs db ceiling | vs prepared | vs coalesced | CPU µs/req: server | its main thread | database | autocannon | errors |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const l of lines) {
    const against = (base: number) =>
      base && !l.name.startsWith('db-point') && !l.name.startsWith('hello')
        ? `${Math.round((l.rps / base) * 100)} %`
        : '';
    const ratio = `${against(ceiling)} | ${against(preparedCeiling)} | ${against(coalescedCeiling)}`;
    const cpu = [l.cpu.server, l.cpu.main, l.cpu.db, l.cpu.loadgen].map((v) => v ?? '').join(' | ');
    console.log(`| ${l.name} | ${l.rps} | ${l.p50} | ${l.p99} | ${l.rssMb ?? ''} | ${ratio} | ${cpu} | ${l.errors} |`);
  }
  if (rounds.length > 0) {
    const median = (values: number[]) => {
      const sorted = [...values].sort((a, b) => a - b);
      const mid = sorted.length >> 1;
      return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
    };
    const ratios = rounds.map((r) => (r.ceiling ? (r.read / r.ceiling) * 100 : 0));
    console.log(`\nRow read against the db ceiling, ${rounds.length} pairs run back to back:\n`);
    console.log('| pair | db ceiling req/s | row-read req/s | row-read p99 ms | ratio |');
    console.log('| ---: | ---: | ---: | ---: | ---: |');
    rounds.forEach((r, i) => {
      console.log(`| ${i + 1} | ${r.ceiling} | ${r.read} | ${r.p99} | ${Math.round(ratios[i] ?? 0)} % |`);
    });
    const p99s = rounds.map((r) => r.p99);
    console.log(
      `\nMedian ratio ${Math.round(median(ratios))} % (${Math.round(Math.min(...ratios))}–${Math.round(Math.max(...ratios))} %); median row-read p99 ${median(p99s)} ms.`,
    );
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
