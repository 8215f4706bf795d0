// The noisy neighbour, one command: `npm run bench:noisy` (PGlite) or with DATABASE_URL set. The
// server runs as `npm start` runs it, in its own process. A victim tenant's reads
// (GET /api/v1/apps, autocannon, BENCH_CONNECTIONS=10 connections, BENCH_SECONDS=10) are measured
// twice in the same run: alone, then while another process (bench/noisy-attacker.mjs) sends the
// worst bodies a stranger and an attacking tenant can, BENCH_ATTACKERS=4 at once. Then the
// server's peak RSS after writing large rows: BENCH_LARGE_BATCHES batches of 100 rows of 50 KB
// (5 MB each), the largest the row batch takes.
import { type ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ALL_SCOPES } from '../src/domain/accounts/scopes.js';
import { api, autocannon, freePort, SERVER, serverDatabase, startFlags } from './support.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ATTACKERS = Number(process.env.BENCH_ATTACKERS ?? 4);
const LARGE_BATCHES = Number(process.env.BENCH_LARGE_BATCHES ?? 20);
const ADMIN = `bench-admin-${randomBytes(8).toString('hex')}`;

function rssMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Math.round(Number(match[1]) / 1024) : 0;
}

async function victimRun(base: string, key: string) {
  const r = await autocannon({
    url: `${base}/api/v1/apps`,
    connections: CONNECTIONS,
    duration: SECONDS,
    headers: { 'x-api-key': key },
  });
  return { rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, max: r.latency.max };
}

async function main() {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    ADMIN_TOKEN: ADMIN,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '10000000',
  };
  const database = await serverDatabase('noisy', env);
  const children: ChildProcess[] = [];
  try {
    const port = await freePort();
    const server = spawn(process.execPath, [...startFlags(), SERVER, 'serve'], {
      env: { ...env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(server);
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      if (server.exitCode !== null || i > 600) throw new Error('the server did not start');
      if (
        await fetch(`${base}/healthz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const auth = { authorization: `Bearer ${ADMIN}` };
    const keys: string[] = [];
    for (const tenant of ['victim', 'attacker']) {
      await api(base, 'POST', '/admin/v1/tenants', { tenant_id: tenant, name: tenant }, auth);
      const created = await api(
        base,
        'POST',
        `/admin/v1/tenants/${tenant}/api-keys`,
        { name: 'k', scopes: ALL_SCOPES },
        auth,
      );
      keys.push(created.secret as string);
    }
    const [victim, attacker] = keys as [string, string];
    for (let i = 0; i < 5; i++) await api(base, 'POST', '/api/v1/apps', { name: `app-${i}` }, { 'x-api-key': victim });
    await api(base, 'POST', '/api/v1/custom-data-sources', { name: 'Junk', slug: 'junk' }, { 'x-api-key': attacker });

    await victimRun(base, victim); // warm-up
    const alone = await victimRun(base, victim);
    const attackers = fork(path.resolve('bench/noisy-attacker.mjs'), [base, attacker, String(ATTACKERS)], {
      stdio: 'ignore',
    });
    children.push(attackers);
    await new Promise((resolve) => attackers.once('message', resolve)); // its bodies made
    const attacked = await victimRun(base, victim);
    const outcome = new Promise<{ sent: number; statuses: Record<string, number> }>((resolve) =>
      attackers.once('message', resolve),
    );
    attackers.send('stop');
    const { sent: attacks, statuses } = await outcome;

    // Peak RSS after large rows: batches of 100 rows of 50 KB.
    const rows = (batch: number) =>
      Array.from({ length: 100 }, (_, i) => ({ external_id: `r${batch}-${i}`, data: { note: 'y'.repeat(50_000) } }));
    writeFileSync(`/proc/${server.pid}/clear_refs`, '5');
    const before = rssMb(server.pid as number, 'VmRSS');
    for (let batch = 0; batch < LARGE_BATCHES; batch++) {
      await api(
        base,
        'POST',
        '/api/v1/custom-data-sources/junk/rows/batch',
        { rows: rows(batch) },
        { 'x-api-key': attacker },
      );
    }
    const peak = rssMb(server.pid as number, 'VmHWM');
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const after = rssMb(server.pid as number, 'VmRSS');

    const db = database.schema ? 'PostgreSQL' : 'PGlite';
    const date = new Date().toISOString().slice(0, 10);
    console.log(
      `\n${db}, ${CONNECTIONS} victim connections, ${ATTACKERS} attackers, ${SECONDS} s each, ${os.cpus().length} CPUs, ${date}\n`,
    );
    console.log('| victim GET /api/v1/apps | req/s | p50 ms | p99 ms | max ms |');
    console.log('| --- | ---: | ---: | ---: | ---: |');
    console.log(`| alone | ${alone.rps} | ${alone.p50} | ${alone.p99} | ${alone.max} |`);
    console.log(`| under attack | ${attacked.rps} | ${attacked.p50} | ${attacked.p99} | ${attacked.max} |`);
    console.log(`\n${attacks} attack requests answered: ${JSON.stringify(statuses)} (status: count).`);
    console.log(
      `\nLarge rows: ${LARGE_BATCHES} batches of 100 rows of 50 KB: RSS ${before} MB before, peak ${peak} MB, ${after} MB 5 s after.`,
    );
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await database.remove();
  }
}

await main();
