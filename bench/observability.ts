// What metrics and tracing cost a request: `npm run bench:observability` (PGlite) or
// `DATABASE_URL=postgres://… npm run bench:observability`. As the benchmark of record (run.ts),
// the compiled server runs as its own process, loaded with autocannon on 127.0.0.1: each round
// starts three new servers, one with tracing off (metrics on, as always), one with tracing on
// exporting every trace, and one sampling a tenth of them (OTEL_TRACES_SAMPLER=
// parentbased_traceidratio, 0.1), over OTLP/HTTP to a collector stand-in in this process; each is
// scraped at /metrics every 15 s. The row read and the comment write run on each, in rotating
// order, BENCH_ROUNDS times (5); the table gives each run, the medians, and the ratio of each
// mode's median to tracing off's.
//
// The metrics cannot be turned off, so their own share is measured apart, in this process: the
// work the request hook does per request (a counter and a histogram), in nanoseconds,
// against the server's CPU time per request of the tracing-off runs.
// Options: BENCH_SECONDS (10), BENCH_WARMUP (2), BENCH_CONNECTIONS (50), BENCH_ROWS (1000),
// BENCH_ROUNDS (5).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { requestRecorder } from '../src/observability/metrics.js';
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
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROWS = Number(process.env.BENCH_ROWS ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ADMIN = `bench-admin-${randomBytes(8).toString('hex')}`;
const SCRAPE_MS = 15_000;

type Mode = 'off' | 'on' | 'sampled';
const MODES: Mode[] = ['off', 'on', 'sampled'];
type Scenario = 'row-read' | 'comment-write';
interface Run {
  mode: Mode;
  scenario: Scenario;
  rps: number;
  p50: number;
  p99: number;
  cpuUs: number | null;
  errors: number;
}

/** A collector stand-in: takes OTLP/HTTP exports and counts them, keeping nothing. */
async function startCollector() {
  let exports = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: () => exports,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface Server {
  mode: Mode;
  child: ChildProcess;
  base: string;
  requests: Record<Scenario, Record<string, unknown>[]>;
  cleanUp: () => Promise<void>;
}

/** A server of its own (a data directory, or a PostgreSQL schema), seeded with ROWS rows and a task. */
async function startServer(mode: Mode, collectorUrl: string): Promise<Server> {
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    ADMIN_TOKEN: ADMIN,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '10000000',
    HOST: '127.0.0.1',
  };
  delete env.OTEL_EXPORTER_OTLP_ENDPOINT;
  delete env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  delete env.OTEL_TRACES_SAMPLER;
  delete env.OTEL_TRACES_SAMPLER_ARG;
  if (mode !== 'off') env.OTEL_EXPORTER_OTLP_ENDPOINT = collectorUrl;
  if (mode === 'sampled') {
    env.OTEL_TRACES_SAMPLER = 'parentbased_traceidratio';
    env.OTEL_TRACES_SAMPLER_ARG = '0.1';
  }
  const { remove: cleanUp } = await serverDatabase('bench-obs', env);
  const port = await freePort();
  const child = spawn(process.execPath, [...startFlags(), SERVER, 'serve'], {
    env: { ...env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  await waitHealthy(base, child);
  const key = await seedOrders(base, ADMIN, ROWS, (i) => ({ data: { sku: `SKU-${i}`, price: (i % 97) + 0.99 } }));
  const auth = { 'x-api-key': key };
  const task = (await api(base, 'POST', '/api/v1/tasks', { title: 'Bench task' }, auth)).id as string;
  return {
    mode,
    child,
    base,
    requests: {
      'row-read': Array.from({ length: ROWS }, (_, i) => ({
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
    },
    cleanUp,
  };
}

async function load(server: Server, scenario: Scenario): Promise<Run> {
  const options = { url: server.base, connections: CONNECTIONS, requests: server.requests[scenario] };
  if (WARMUP > 0) await autocannon({ ...options, duration: WARMUP });
  // Prometheus's scrape, as in production, while the load runs.
  const scrape = () =>
    fetch(`${server.base}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.text());
  await scrape();
  const scraper = setInterval(() => void scrape().catch(() => {}), SCRAPE_MS);
  const cpuBefore = processCpuUs(server.child.pid);
  const result = await autocannon({ ...options, duration: SECONDS });
  const cpuAfter = processCpuUs(server.child.pid);
  clearInterval(scraper);
  return {
    mode: server.mode,
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

/** Nanoseconds the request hook's metrics (a counter and a histogram) take per request, measured in this process. */
function metricsNsPerRequest(): number {
  const record = requestRecorder('benchProbe', 'GET', 'rest');
  const round = (n: number) => {
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) record(i % 50 === 0 ? 404 : 200, 0.001 + (i % 7) * 0.003);
    return Number(process.hrtime.bigint() - started) / n;
  };
  round(200_000); // warm-up: JIT
  const samples = [round(500_000), round(500_000), round(500_000)].sort((a, b) => a - b);
  return Math.round(samples[1] ?? 0);
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

async function stopServers(servers: Server[]): Promise<void> {
  for (const server of servers) {
    await stopProcess(server.child);
    await server.cleanUp();
  }
}

async function main() {
  // The build `npm start` runs (types removed, nothing else changed; checked apart).
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  const collector = await startCollector();
  const runs: Run[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // New server processes each round: one process can run a third slower than its twin for
      // its whole life (its heap's layout, the JIT's choices), which would pass for a mode's cost.
      // Rotating order: a machine whose speed drifts favours no mode.
      const modes = MODES.map((_, i) => MODES[(i + round) % MODES.length] as Mode);
      const servers: Server[] = [];
      try {
        for (const mode of modes) servers.push(await startServer(mode, collector.url));
        for (const scenario of ['row-read', 'comment-write'] as const) {
          for (const server of servers) runs.push(await load(server, scenario));
        }
      } finally {
        await stopServers(servers);
      }
    }
  } finally {
    await collector.close();
  }

  const db = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite';
  console.log(
    `\n${db}, ${CONNECTIONS} connections, ${SECONDS} s each, ${ROUNDS} rounds, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'}), ${new Date().toISOString().slice(0, 10)}`,
  );
  console.log(`OTLP exports received by the collector stand-in: ${collector.exports()}\n`);
  console.log('| scenario | tracing | round | req/s | p50 ms | p99 ms | server CPU µs/req | errors |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const scenario of ['row-read', 'comment-write'] as const) {
    for (const mode of MODES) {
      runs
        .filter((r) => r.scenario === scenario && r.mode === mode)
        .forEach((r, i) => {
          console.log(
            `| ${scenario} | ${mode} | ${i + 1} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.cpuUs ?? ''} | ${r.errors} |`,
          );
        });
    }
  }
  console.log('\n| scenario | tracing | median req/s | vs off | median p50 ms | median p99 ms | server CPU µs/req |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
  const offCpu: number[] = [];
  for (const scenario of ['row-read', 'comment-write'] as const) {
    const of = (mode: Mode) => runs.filter((r) => r.scenario === scenario && r.mode === mode);
    const offRps = median(of('off').map((r) => r.rps));
    offCpu.push(median(of('off').map((r) => r.cpuUs ?? 0)));
    for (const mode of MODES) {
      const list = of(mode);
      const rps = median(list.map((r) => r.rps));
      const ratio = offRps ? `${Math.round((rps / offRps) * 1000) / 10} %` : '';
      console.log(
        `| ${scenario} | ${mode} | ${rps} | ${ratio} | ${median(list.map((r) => r.p50))} | ${median(list.map((r) => r.p99))} | ${median(list.map((r) => r.cpuUs ?? 0))} |`,
      );
    }
  }
  const ns = metricsNsPerRequest();
  const shares = offCpu.map((us) => (us ? `${Math.round((ns / (us * 1000)) * 10_000) / 100} %` : 'n/a'));
  console.log(
    `\nMetrics per request (counter + histogram), measured apart: ${ns} ns, ` +
      `${shares[0]} of the row read's server CPU and ${shares[1]} of the comment write's (tracing off).`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
