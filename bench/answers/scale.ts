// How fast a turn's knowledge search stays as a workspace grows: the tuning corpus (English) copied
// until the workspace holds BENCH_PASSAGES passages (10,000 and 100,000 by default), then each of
// its questions searched BENCH_ROUNDS times (3) one after another; p50 and p95 of the search alone
// (`searchKnowledge`, the statements a turn runs), in this process.
//   npx tsx bench/answers/scale.ts                                   # PGlite
//   DATABASE_URL=postgres://… npx tsx bench/answers/scale.ts         # PostgreSQL
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { searchKnowledge } from '../../src/domain/knowledge/search.js';
import { withBenchDatabase } from '../support.js';
import { loadCorpus, loadQuestions } from './evaluate.js';

const SIZES = (process.env.BENCH_PASSAGES ?? '10000,100000').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;

await withBenchDatabase('bench_scale', async (database) => {
  const db = database.db;
  const tenantId = `scale-${randomBytes(4).toString('hex')}`;
  await sql`insert into tenants (id, name) values (${tenantId}, ${tenantId})`.execute(db);
  const documents = loadCorpus('files', 'en');
  const questions = loadQuestions('files').questions.map((q) => q.q.en as string);
  const passages = async () =>
    Number(
      (
        await sql<{
          n: number;
        }>`select coalesce(sum(passages), 0)::int as n from knowledge_stats where tenant_id = ${tenantId}`.execute(db)
      ).rows[0]?.n ?? 0,
    );
  let copy = 0;
  for (const size of SIZES) {
    const started = performance.now();
    while ((await passages()) < size) {
      copy++;
      // One copy of the corpus in one statement; the triggers cut each document into passages.
      await sql`
        insert into documents (id, tenant_id, title, content, language, search_config, content_hash)
        select gen_random_uuid(), ${tenantId}, d.title || ' (' || ${copy} || ')', d.content, 'en', 'english', 'x'
        from jsonb_to_recordset(${JSON.stringify(documents)}::jsonb) as d(title text, content text)
      `.execute(db);
    }
    const seeded = (performance.now() - started) / 1000;
    const times: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const question of questions) {
        const t0 = performance.now();
        await searchKnowledge(db, tenantId, question, { language: 'en' });
        times.push(performance.now() - t0);
      }
    }
    times.sort((a, b) => a - b);
    console.log(
      `${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'}: ${await passages()} passages (${copy} copies, seeded in ${seeded.toFixed(0)} s): ` +
        `search p50 ${percentile(times, 0.5).toFixed(1)} ms, p95 ${percentile(times, 0.95).toFixed(1)} ms over ${times.length} searches`,
    );
  }
});
