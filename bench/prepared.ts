// What prepared statements (src/db/prepared.ts) buy, straight on the database without the API:
// `npx tsx bench/prepared.ts` (PGlite, in its thread) or `DATABASE_URL=postgres://… npx tsx
// bench/prepared.ts`. The row read's point query (point.ts) in a loop of BENCH_CONNECTIONS (50)
// over a pool (10 clients on PostgreSQL, 4 on PGlite's thread), sent three ways: unnamed (as pg
// sends a query: Parse, Bind, Describe, Execute, Sync on every call), named as pg names one (`{
// name, text, values }`: Parse once, then Bind, Describe, Execute, Sync), and through
// prepared.ts (the same messages as pg's named statements, the name given by text). BENCH_SECONDS
// (5) each, in rotating order, BENCH_ROUNDS (3) times: queries per second and this process's CPU
// time per query (on PGlite, the database's thread is part of this process).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { PGLITE_OPTIONS } from '../src/db/client.js';
import { createDataDir, PGliteThread } from '../src/db/pglite-thread.js';
import { prepareStatements } from '../src/db/prepared.js';
import { createPointTable, POINT_SQL } from './point.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROWS = 1000;
const DATABASE_URL = process.env.DATABASE_URL;
type Way = 'unnamed' | 'named by pg' | 'prepared.ts';
const WAYS: Way[] = ['unnamed', 'named by pg', 'prepared.ts'];

/** A pool whose clients each know their number: PGlite's clients share one session, and names. */
function pool(way: Way, config: pg.PoolConfig): pg.Pool {
  const p = new pg.Pool(config);
  let clients = 0;
  p.on('connect', (client) => {
    (client as pg.PoolClient & { number?: number }).number = ++clients;
    if (way === 'prepared.ts') prepareStatements(client, 200);
  });
  return p;
}

async function query(way: Way, p: pg.Pool, id: string) {
  const client = (await p.connect()) as pg.PoolClient & { number?: number };
  try {
    return way === 'named by pg'
      ? await client.query({ name: `point_${client.number}`, text: POINT_SQL, values: [id] })
      : await client.query(POINT_SQL, [id]);
  } finally {
    client.release();
  }
}

async function loop(way: Way, p: pg.Pool): Promise<{ qps: number; cpuUs: number }> {
  const end = Date.now() + SECONDS * 1000;
  const cpu = process.cpuUsage();
  let count = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, w) => {
      for (let i = w; Date.now() < end; i++) {
        await query(way, p, `row-${i % ROWS}`);
        count++;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  return { qps: Math.round(count / SECONDS), cpuUs: Math.round((used.user + used.system) / count) };
}

async function main() {
  let config: pg.PoolConfig;
  let close = async () => {};
  if (DATABASE_URL) {
    config = { connectionString: DATABASE_URL, max: 10 };
  } else {
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'ws-bench-prepared-')), 'pgdata');
    await createDataDir(dir, PGLITE_OPTIONS);
    const thread = await PGliteThread.open(dir, PGLITE_OPTIONS);
    config = { max: 4, idleTimeoutMillis: 0, stream: () => thread.connect() };
    close = async () => {
      await thread.close();
      rmSync(path.dirname(dir), { recursive: true, force: true });
    };
  }
  const setup = new pg.Pool(config);
  const { Kysely, PostgresDialect } = await import('kysely');
  const db = new Kysely<never>({ dialect: new PostgresDialect({ pool: setup }) });
  await createPointTable(db, ROWS);
  const pools = new Map(WAYS.map((way) => [way, pool(way, config)]));
  const runs = new Map<Way, { qps: number; cpuUs: number }[]>(WAYS.map((way) => [way, []]));
  for (const way of WAYS) await loop(way, pools.get(way) as pg.Pool); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < WAYS.length; i++) {
      const way = WAYS[(i + round) % WAYS.length] as Way;
      runs.get(way)?.push(await loop(way, pools.get(way) as pg.Pool));
    }
  }
  await db.destroy();
  for (const p of pools.values()) await p.end();
  await close();
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;
  console.log(`\n${DATABASE_URL ? 'PostgreSQL' : 'PGlite'}, load average ${os.loadavg()[0]?.toFixed(1)}\n`);
  console.log('| sent | queries/s of each round | median | client CPU µs/query (median) |');
  console.log('| --- | --- | ---: | ---: |');
  for (const way of WAYS) {
    const list = runs.get(way) ?? [];
    const qps = list.map((r) => r.qps);
    console.log(`| ${way} | ${qps.join(', ')} | ${median(qps)} | ${median(list.map((r) => r.cpuUs))} |`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
