// The `knowledge.embed` job: computes the vectors of one document's passages (its own and its
// translations') that have none for the configured model, a batch at a time, and stores them.
// Queued in the transaction that wrote the document (src/domain/knowledge/documents.ts), one per document
// (a dedupe key; a write while it runs asks for one more run). A failure is retried with the
// queue's backoff; a sweep queues again documents whose passages still lack vectors (knowledge
// written before embeddings were configured, or whose jobs failed for good a day ago).
import { sql } from 'kysely';
import type { Db } from '../../../db/index.js';
import { isForeignKeyViolation } from '../../../db/index.js';
import type { JobLane, JobQueue } from '../../../jobs/queue.js';
import { EMBEDDINGS_BATCH_SIZE, type EmbeddingsClient } from './client.js';

export const EMBED_JOB = 'knowledge.embed';
/** How often the sweep looks for passages without vectors. */
export const EMBED_SWEEP_MS = 10 * 60_000;
/** Documents one sweep queues at most. */
const SWEEP_LIMIT = 500;
/** Characters of a passage's text sent to the model (titles and headings included). */
const INPUT_CHARS = 8000;

/**
 * The embedding jobs' own workers: they wait on the embeddings server, and a crawl queues one per
 * page, so they never take the slots syncs, runs and evaluations need. One tenant runs one at a
 * time while another tenant's is due.
 */
export const EMBEDDING_LANE: JobLane = { name: 'knowledge-embed', kinds: [EMBED_JOB], concurrency: 2, tenantShare: 1 };

type Enqueuer = Parameters<JobQueue['enqueue']>[0];

const dedupeKey = (documentId: string) => `${EMBED_JOB}:${documentId}`;

/** Queues the embedding of each document's passages, in the caller's transaction when given one. */
export async function enqueueEmbedding(
  jobs: Pick<JobQueue, 'enqueue'>,
  executor: Enqueuer,
  tenantId: string,
  documentIds: string[],
): Promise<void> {
  for (const documentId of new Set(documentIds)) {
    await jobs.enqueue(executor, {
      kind: EMBED_JOB,
      tenantId,
      payload: { document_id: documentId },
      dedupeKey: dedupeKey(documentId),
      followUp: true,
    });
  }
}

interface PendingPassage {
  id: string;
  title: string;
  heading: string;
  content: string;
}

/** Passages of the document without a vector of `model`, the next `limit` by id. */
async function pendingPassages(
  db: Db,
  tenantId: string,
  documentId: string,
  model: string,
  limit: number,
): Promise<PendingPassage[]> {
  const { rows } = await sql<PendingPassage>`
    select p.id::text as id, coalesce(t.title, d.title) as title, p.heading, p.content
      from knowledge_passages p
      join documents d on d.id = p.document_id and d.tenant_id = ${tenantId}
      left join document_translations t on t.id = p.translation_id and t.tenant_id = ${tenantId}
      left join knowledge_passage_vectors v on v.passage_id = p.id and v.model = ${model}
     where p.tenant_id = ${tenantId} and p.document_id = ${documentId} and v.passage_id is null
     order by p.id
     limit ${limit}
  `.execute(db);
  return rows;
}

/** What the model reads of a passage: its title, heading path and text. */
const passageText = (passage: PendingPassage) =>
  [passage.title, passage.heading, passage.content]
    .filter((part) => part.trim() !== '')
    .join('\n\n')
    .slice(0, INPUT_CHARS);

/**
 * Stores vectors (replacing one of another model). Passages gone since they were read (their
 * document changed or went) are skipped: the join finds them no more.
 */
async function storeVectors(
  db: Db,
  tenantId: string,
  model: string,
  rows: { id: string; embedding: number[] }[],
): Promise<void> {
  await sql`
    insert into knowledge_passage_vectors (passage_id, tenant_id, model, embedding)
    select p.id, p.tenant_id, ${model},
           array(select x::real from jsonb_array_elements_text(v.embedding) with ordinality as a(x, i) order by i)
      from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as v(id bigint, embedding jsonb)
      join knowledge_passages p on p.id = v.id and p.tenant_id = ${tenantId}
    on conflict (passage_id) do update
      set model = excluded.model, embedding = excluded.embedding, created_at = now()
  `.execute(db);
}

export function registerEmbeddingJob(
  jobs: Pick<JobQueue, 'register' | 'schedule' | 'enqueue'>,
  deps: { db: Db; client: EmbeddingsClient },
): void {
  const { db, client } = deps;
  jobs.register(EMBED_JOB, async (job, ctx) => {
    const documentId = job.payload.document_id;
    if (typeof documentId !== 'string') return;
    for (;;) {
      const pending = await pendingPassages(db, job.tenantId, documentId, client.model, EMBEDDINGS_BATCH_SIZE);
      if (pending.length === 0) return;
      const vectors = await client.embed(pending.map(passageText), { signal: ctx.signal });
      try {
        await storeVectors(
          db,
          job.tenantId,
          client.model,
          pending.map((passage, i) => ({ id: passage.id, embedding: vectors[i] ?? [] })),
        );
      } catch (error) {
        // A passage deleted between the read and the write: read what is left again.
        if (!isForeignKeyViolation(error)) throw error;
      }
      await ctx.heartbeat();
    }
  });
  jobs.schedule(`${EMBED_JOB}.sweep`, EMBED_SWEEP_MS, async () => {
    await enqueueMissingEmbeddings(jobs, db, client.model);
  });
}

/**
 * Queues the embedding of documents whose passages lack vectors of `model`, of every tenant, and
 * answers how many it queued. A document whose job is queued or running, or failed within the
 * last day, is left alone.
 */
export async function enqueueMissingEmbeddings(
  jobs: Pick<JobQueue, 'enqueue'>,
  db: Db,
  model: string,
  limit = SWEEP_LIMIT,
): Promise<number> {
  const { rows } = await sql<{ tenant_id: string; document_id: string }>`
    select distinct p.tenant_id, p.document_id::text as document_id
      from knowledge_passages p
      left join knowledge_passage_vectors v on v.passage_id = p.id and v.model = ${model}
     where v.passage_id is null
       and not exists (
         select 1 from jobs j
          where j.tenant_id = p.tenant_id and j.dedupe_key = ${`${EMBED_JOB}:`} || p.document_id::text
            and (j.status in ('queued', 'running')
                 or (j.status = 'failed' and j.finished_at > now() - interval '1 day')))
     limit ${limit}
  `.execute(db);
  for (const row of rows) await enqueueEmbedding(jobs, db, row.tenant_id, [row.document_id]);
  return rows.length;
}
