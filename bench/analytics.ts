// Dashboard analytics on a large workspace: seeds BENCH_CONVERSATIONS (100,000) conversations of
// the last 90 days straight through the database handle (one `insert … select generate_series`
// per table), then times `POST /api/v1/analytics/dashboard` over real HTTP on 127.0.0.1.
//   npx tsx bench/analytics.ts                      # in-memory PGlite, in this process
//   DATABASE_URL=postgres://… npx tsx bench/analytics.ts
// Options (environment): BENCH_CONVERSATIONS (100000), BENCH_RUNS (5 per report).
// On PostgreSQL it works in a schema of its own (`bench_analytics_…`), dropped at the end.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { sql } from 'kysely';
import type { DatabaseHandle } from '../src/db/client.js';
import { startBenchApp, withBenchDatabase } from './support.js';

const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 100_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

async function main() {
  await withBenchDatabase('bench_analytics', run);
}

/** Conversation g: started (g mod 90) days and (g mod 86400) seconds ago; every 10th handed off, etc. */
async function seed(database: DatabaseHandle, tenantId: string) {
  const db = database.db;
  const agents = [randomUUID(), randomUUID()];
  await db
    .insertInto('agents')
    .values(agents.map((id, i) => ({ id, tenant_id: tenantId, name: `Agent ${i}`, handoff_agent_ids: '[]' })))
    .execute();
  await sql`
    insert into conversations (id, tenant_id, agent_id, context, message_count, created_at, updated_at)
    select gen_random_uuid(), ${tenantId},
      case when g % 2 = 0 then ${agents[0]}::uuid else ${agents[1]}::uuid end,
      jsonb_build_object('user_type', case when g % 3 = 0 then 'lead' else 'customer' end, 'organization', 'org-' || (g % 50)),
      4, now() - (g % 90) * interval '1 day' - (g % 86400) * interval '1 second', now()
    from generate_series(1, ${CONVERSATIONS}) as g
  `.execute(db);
  // Two customer messages and two replies each (the first reply done 1–30 s after).
  await sql`
    insert into messages (id, tenant_id, conversation_id, agent_id, role, author, content, status, created_at, updated_at)
    select gen_random_uuid(), c.tenant_id, c.id, case when r.role = 'assistant' then c.agent_id end, r.role, r.author,
      case when r.role = 'user' then 'How do I reset my password?' else 'Open Settings, then Security.' end,
      'COMPLETED', c.created_at + r.k * interval '1 minute',
      c.created_at + r.k * interval '1 minute' + (1 + (abs(hashtext(c.id::text)) % 30)) * interval '1 second'
    from conversations c
    cross join (values (0, 'user', 'customer'), (0, 'assistant', 'agent'), (1, 'user', 'customer'), (1, 'assistant', 'agent'))
      as r(k, role, author)
    where c.tenant_id = ${tenantId}
  `.execute(db);
  await sql`
    insert into tickets (id, tenant_id, conversation_id, to_agent_id, reason, created_at, updated_at)
    select gen_random_uuid(), c.tenant_id, c.id, c.agent_id, 'handoff', c.created_at, c.created_at
    from conversations c where c.tenant_id = ${tenantId} and abs(hashtext(c.id::text)) % 10 = 0
  `.execute(db);
  await sql`
    insert into message_feedback (id, tenant_id, conversation_id, message_id, rating, created_at)
    select gen_random_uuid(), m.tenant_id, m.conversation_id, m.id,
      case when abs(hashtext(m.id::text)) % 4 = 0 then 'negative' else 'positive' end, m.updated_at
    from messages m
    where m.tenant_id = ${tenantId} and m.role = 'assistant' and abs(hashtext(m.id::text)) % 10 < 2
  `.execute(db);
  await sql`
    insert into knowledge_update_requests (id, tenant_id, question, conversation_id, created_at, updated_at)
    select gen_random_uuid(), c.tenant_id, 'Unanswered question', c.id, c.created_at, c.created_at
    from conversations c where c.tenant_id = ${tenantId} and abs(hashtext(c.id::text)) % 20 = 1
  `.execute(db);
  await sql`analyze`.execute(db);
}

const randomUUID = () => globalThis.crypto.randomUUID();

async function run(database: DatabaseHandle) {
  const { app, services, origin } = await startBenchApp(database, {
    ANALYTICS_TIMEOUT_MS: '600000',
  });

  const tenantId = `bench-${randomBytes(4).toString('hex')}`;
  await services.tenants.createTenant({ tenant_id: tenantId, name: tenantId });
  const { secret: key } = await services.tenants.createApiKey(tenantId, { name: 'bench', scopes: ['analytics:read'] });

  const db = database.kind === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : 'PGlite in-process (in memory)';
  console.log(
    `analytics benchmark — ${db}; ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}`,
  );
  const seedStarted = performance.now();
  await seed(database, tenantId);
  console.log(
    `seeded ${CONVERSATIONS} conversations, ${CONVERSATIONS * 4} messages in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s\n`,
  );

  const reports: [string, Record<string, string>][] = [
    ['last_7_days', { report_type: 'last_7_days' }],
    ['last_30_days', { report_type: 'last_30_days' }],
    ['last_90_days', { report_type: 'last_90_days' }],
    ['last_90_days, agent_name', { report_type: 'last_90_days', agent_name: 'Agent 0' }],
    ['last_90_days, user_type + org', { report_type: 'last_90_days', user_type: 'customer', organization: 'org-7' }],
  ];
  for (const [name, body] of reports) {
    const times: number[] = [];
    let conversations = 0;
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      const response = await fetch(`${origin}/api/v1/analytics/dashboard`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const report = (await response.json()) as { metrics?: { conversations: number } };
      if (response.status !== 200) throw new Error(`${name}: ${response.status} ${JSON.stringify(report)}`);
      times.push(performance.now() - started);
      conversations = report.metrics?.conversations ?? 0;
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)] ?? 0;
    console.log(
      `${name.padEnd(32)} ${String(conversations).padStart(7)} conversations   ` +
        `min ${(times[0] ?? 0).toFixed(0)} ms   median ${median.toFixed(0)} ms   max ${(times.at(-1) ?? 0).toFixed(0)} ms`,
    );
  }
  await app.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
