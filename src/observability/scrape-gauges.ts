// Gauges read when /metrics is scraped rather than kept up to date on the hot path: the database
// pools' clients, and the job queue's depth and oldest due job by kind (one query, its answer kept
// JOB_STATS_TTL_MS so that several scrapers, or a fast one, cost the database one query).
import { type Kysely, sql } from 'kysely';
import type pg from 'pg';
import { Gauge } from 'prom-client';
import { registry } from './metrics.js';

/** How long the job queue's figures are reused before they are read again. */
export const JOB_STATS_TTL_MS = 5_000;

export type DatabaseKind = 'pglite' | 'postgres';

const pools = new Map<pg.Pool, DatabaseKind>();

/** The pools of this process, summed by database kind; ended pools are forgotten. */
function poolFigures(): Map<DatabaseKind, { total: number; idle: number; waiting: number }> {
  const sums = new Map<DatabaseKind, { total: number; idle: number; waiting: number }>();
  for (const [pool, kind] of pools) {
    if (pool.ended) {
      pools.delete(pool);
      continue;
    }
    const sum = sums.get(kind) ?? { total: 0, idle: 0, waiting: 0 };
    sum.total += pool.totalCount;
    sum.idle += pool.idleCount;
    sum.waiting += pool.waitingCount;
    sums.set(kind, sum);
  }
  return sums;
}

function poolGauge(name: string, help: string, figure: 'total' | 'idle' | 'waiting'): void {
  new Gauge({
    name,
    help,
    labelNames: ['database'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, sums] of poolFigures()) this.labels(kind).set(sums[figure]);
    },
  });
}

poolGauge(
  'db_pool_clients',
  'Database clients open in the pool (PostgreSQL connections; for the embedded PGlite, the clients sharing its one session).',
  'total',
);
poolGauge('db_pool_clients_idle', 'Database clients open and idle; in use = db_pool_clients - this.', 'idle');
poolGauge(
  'db_pool_waiting',
  'Queries waiting for a database client (the pool is full): a lasting value means the pool (or PGlite) is the bottleneck.',
  'waiting',
);

/** Counts `pool`'s clients in the db_pool_* gauges until it ends. */
export function watchPool(pool: pg.Pool, kind: DatabaseKind): void {
  pools.set(pool, kind);
}

interface JobFigures {
  queued: Map<string, { count: number; oldestSeconds: number }>;
  running: Map<string, number>;
}

interface JobSource {
  // biome-ignore lint/suspicious/noExplicitAny: any database with the jobs table.
  db: Kysely<any>;
  read?: { at: number; figures: Promise<JobFigures | undefined> };
}

const jobSources = new Set<JobSource>();
/** Kinds seen once: reported at 0 when none is waiting, rather than vanishing. */
const kindsSeen = new Set<string>();

/** Operator figures across every tenant (like the queue's own sweep): counts only, no tenant data. */
async function readJobFigures(source: JobSource): Promise<JobFigures | undefined> {
  try {
    const { rows } = await sql<{ kind: string; status: string; n: number; oldest_s: number | null }>`
      select kind, 'queued' as status, count(*)::int as n,
             extract(epoch from now() - min(run_at))::float8 as oldest_s
        from jobs where status = 'queued' and run_at <= now() group by kind
      union all
      select kind, 'running', count(*)::int, null from jobs where status = 'running' group by kind`.execute(source.db);
    const figures: JobFigures = { queued: new Map(), running: new Map() };
    for (const row of rows) {
      if (row.status === 'queued') figures.queued.set(row.kind, { count: row.n, oldestSeconds: row.oldest_s ?? 0 });
      else figures.running.set(row.kind, row.n);
    }
    return figures;
  } catch {
    // A database that does not answer leaves these gauges out of the scrape; the rest is served.
    return undefined;
  }
}

async function jobFigures(): Promise<JobFigures[]> {
  const now = Date.now();
  const reads = [...jobSources].map((source) => {
    if (!source.read || now - source.read.at >= JOB_STATS_TTL_MS) {
      source.read = { at: now, figures: readJobFigures(source) };
    }
    return source.read.figures;
  });
  return (await Promise.all(reads)).filter((figures): figures is JobFigures => figures !== undefined);
}

/** Per kind across the sources (one in a server; tests build several apps in a process). */
function jobGauge(
  name: string,
  help: string,
  pick: (figures: JobFigures, kind: string) => number | undefined,
  combine: (a: number, b: number) => number,
): void {
  new Gauge({
    name,
    help,
    labelNames: ['kind'] as const,
    registers: [registry],
    async collect() {
      const all = await jobFigures();
      this.reset();
      if (all.length === 0) return;
      for (const figures of all) {
        for (const kind of [...figures.queued.keys(), ...figures.running.keys()]) kindsSeen.add(kind);
      }
      for (const kind of kindsSeen) {
        let value = 0;
        for (const figures of all) value = combine(value, pick(figures, kind) ?? 0);
        this.labels(kind).set(value);
      }
    },
  });
}

jobGauge(
  'jobs_queued',
  'Jobs due to run and waiting for a worker, by kind (all instances: read from the database).',
  (figures, kind) => figures.queued.get(kind)?.count,
  (a, b) => a + b,
);
jobGauge(
  'jobs_running',
  'Jobs running (leased to a worker of any instance), by kind.',
  (figures, kind) => figures.running.get(kind),
  (a, b) => a + b,
);
jobGauge(
  'jobs_oldest_queued_age_seconds',
  'Seconds the oldest due job of a kind has waited past its run time (0 when none waits): a rising value means workers do not keep up.',
  (figures, kind) => figures.queued.get(kind)?.oldestSeconds,
  Math.max,
);

/** Reports the job queue of `db` at scrape time; answers the function that stops it. */
// biome-ignore lint/suspicious/noExplicitAny: any database with the jobs table.
export function watchJobQueue(db: Kysely<any>): () => void {
  const source: JobSource = { db };
  jobSources.add(source);
  return () => {
    jobSources.delete(source);
  };
}
