// Simulation run throughput: one run of BENCH_CASES test cases (default 1000) with the built-in
// provider, played by the app's job queue, timed from `POST …/runs` (201, queued) to the run
// reading `completed` through `GET /simulation/runs/{id}`. The app listens on 127.0.0.1 only.
//   npx tsx bench/simulations.ts                      # in-memory PGlite, in this process
//   DATABASE_URL=postgres://… npx tsx bench/simulations.ts
// Options (environment): BENCH_CASES (1000), SIMULATION_CONCURRENCY (4, as in the app).
// The cases mix the four expected types (answer, tool_call, handoff, no_answer) over two
// documents, an enabled workflow and a handoff agent, so every path of the engine is played.
// On PostgreSQL it works in a schema of its own (`bench_sim_…`), dropped at the end.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { DatabaseHandle } from '../src/db/client.js';
import { startBenchApp, withBenchDatabase } from './support.js';

const CASES = Number(process.env.BENCH_CASES ?? 1000);

async function main() {
  await withBenchDatabase('bench_sim', run);
}

async function run(database: DatabaseHandle) {
  const { app, services, jobs, config, origin } = await startBenchApp(database, {
    JOB_POLL_MS: '50',
    ...(process.env.SIMULATION_CONCURRENCY ? { SIMULATION_CONCURRENCY: process.env.SIMULATION_CONCURRENCY } : {}),
  });

  const tenantId = `bench-${randomBytes(4).toString('hex')}`;
  await services.tenants.createTenant({ tenant_id: tenantId, name: tenantId });
  const { secret: key } = await services.tenants.createApiKey(tenantId, {
    name: 'bench',
    scopes: ['simulations:write', 'knowledge:write', 'workflows:write', 'agents:write'],
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${origin}${path}`, {
      method,
      headers: { 'x-api-key': key, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await response.json()) as Record<string, unknown> & { id: string };
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };

  await call('POST', '/api/v1/documents', {
    title: 'Refund policy',
    content: 'Refunds are processed within 14 days of receiving the returned item.',
  });
  await call('POST', '/api/v1/documents', {
    title: 'Shipping times',
    content: 'Standard shipping takes 3 to 5 business days. Express shipping arrives the next business day.',
  });
  const workflow = await call('POST', '/api/v1/workflows', {
    name: 'cancel_order',
    input_schema: { type: 'object', properties: { order_id: { type: 'string' } } },
  });
  await call('PUT', `/api/v1/workflows/${workflow.id}/enabled`, { enabled: true });
  const billing = await call('POST', '/api/v1/agents', { name: 'Billing team' });
  const front = await call('POST', '/api/v1/agents', { name: 'Front desk', handoff_agent_ids: [billing.id] });
  const dataset = await call('POST', '/api/v1/simulation/datasets', { name: 'bench', agent_id: front.id });

  const kinds = [
    (i: number) => ({
      question: `How long do refunds take? (${i})`,
      expected_type: 'answer',
      expected_answer: 'Refunds are processed within 14 days.',
    }),
    (i: number) => ({
      question: `Please cancel_order order_id=A${i}`,
      expected_type: 'tool_call',
      expected_tool_name: 'cancel_order',
      expected_tool_args: { order_id: `A${i}` },
    }),
    () => ({ question: 'Put me through to the Billing team', expected_type: 'handoff', expected_agent_id: billing.id }),
    (i: number) => ({ question: `Do you sell submarines model ${i}?`, expected_type: 'no_answer' }),
  ];
  const seedStart = performance.now();
  for (let i = 0; i < CASES; i++) {
    await call(
      'POST',
      `/api/v1/simulation/datasets/${dataset.id}/test-cases`,
      (kinds[i % kinds.length] as (n: number) => unknown)(i),
    );
  }
  const seedMs = performance.now() - seedStart;

  const dbName = database.kind === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : 'PGlite in-process (in memory)';
  console.log(
    `simulations benchmark — ${dbName}; ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}`,
  );
  console.log(
    `${CASES} test cases created over HTTP in ${(seedMs / 1000).toFixed(1)} s; SIMULATION_CONCURRENCY ${config.simulationConcurrency}`,
  );

  jobs.start();
  const start = performance.now();
  const started = await call('POST', `/api/v1/simulation/datasets/${dataset.id}/runs`, {});
  let status = started;
  let lastReport = start;
  while (status.status === 'queued' || status.status === 'running') {
    await new Promise((resolve) => setTimeout(resolve, 100));
    status = await call('GET', `/api/v1/simulation/runs/${started.id}`);
    if (performance.now() - lastReport > Number(process.env.BENCH_REPORT_MS ?? 5000)) {
      lastReport = performance.now();
      console.log(`  … ${Number(status.passed_tests) + Number(status.failed_tests)} / ${CASES} cases`);
    }
  }
  const seconds = (performance.now() - start) / 1000;
  console.log(
    `run ${status.status}: ${status.passed_tests} passed, ${status.failed_tests} failed, success_rate ${status.success_rate}`,
  );
  console.log(`${CASES} cases in ${seconds.toFixed(1)} s — ${(CASES / seconds).toFixed(1)} cases/s`);
  if (status.status !== 'completed' || status.passed_tests !== CASES) process.exitCode = 1;

  await call('DELETE', `/api/v1/simulation/datasets/${dataset.id}`);
  await app.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
