// The reference questions of a referential, each filed under a domain: added in batches of at
// most 100, listed with every domain's question count, and a domain renamed across every question
// of its referential in one transaction (spec, behaviour rule 6); renaming onto a domain that
// already exists merges the two. The records are their response schemas, the types derived from them.
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { checkBulkItems, InvalidParametersError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import { ListOf, Nullable, StringEnum, Timestamp, Uuid } from '../shapes.js';
import { cleanDomain, cleanText, requireReferential } from './referential-checks.js';

export const QuestionRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('coverage_question'),
    referential_id: Uuid,
    question: Type.String(),
    domain: Type.String(),
    origin: StringEnum(['manual', 'extracted'], 'manual: added through the API; extracted: found in a conversation.'),
    conversation_id: Nullable(Uuid),
    created_at: Timestamp,
  },
  { title: 'CoverageQuestion' },
);
export type QuestionRecord = Static<typeof QuestionRecord>;

export const DomainCount = Type.Object({ domain: Type.String(), question_count: Type.Integer() });
export type DomainCount = Static<typeof DomainCount>;

export const QuestionList = Type.Composite(
  [
    ListOf(QuestionRecord),
    Type.Object({
      referential_id: Uuid,
      domains: Type.Array(DomainCount, { description: 'Every domain of the referential, by name.' }),
    }),
  ],
  { title: 'CoverageQuestionList' },
);
export type QuestionList = Static<typeof QuestionList>;

export const DomainRename = Type.Object(
  {
    object: Type.Literal('domain_rename'),
    referential_id: Uuid,
    old_domain: Type.String(),
    new_domain: Type.String(),
    renamed_count: Type.Integer({ description: 'Questions moved from old_domain to new_domain.' }),
    merged: Type.Boolean({ description: 'True when new_domain already existed: the two domains are now one.' }),
  },
  { title: 'DomainRename' },
);
export type DomainRename = Static<typeof DomainRename>;

type QuestionRow = {
  id: string;
  referential_id: string;
  question: string;
  domain: string;
  origin: 'manual' | 'extracted';
  conversation_id: string | null;
  created_at: Date;
};

export const toQuestion = (row: QuestionRow): QuestionRecord => ({
  id: row.id,
  object: 'coverage_question',
  referential_id: row.referential_id,
  question: row.question,
  domain: row.domain,
  origin: row.origin,
  conversation_id: row.conversation_id,
  created_at: iso(row.created_at),
});

const QUESTION_COLUMNS = [
  'id',
  'referential_id',
  'question',
  'domain',
  'origin',
  'conversation_id',
  'created_at',
] as const;

export async function domainCounts(db: Db, tenantId: string, referentialId: string): Promise<DomainCount[]> {
  const rows = await db
    .selectFrom('coverage_questions')
    .select(['domain', sql<number>`count(*)::int`.as('question_count')])
    .where('tenant_id', '=', tenantId)
    .where('referential_id', '=', referentialId)
    .groupBy('domain')
    .orderBy('domain')
    .execute();
  return rows.map((r) => ({ domain: r.domain, question_count: Number(r.question_count) }));
}

export async function addQuestions(
  db: Db,
  tenantId: string,
  referentialId: string,
  questions: { question: string; domain: string }[],
): Promise<{ object: 'list'; data: QuestionRecord[]; has_more: false; next_cursor: null }> {
  checkBulkItems('questions', questions);
  const values = questions.map((q, i) => ({
    id: newId(),
    tenant_id: tenantId,
    referential_id: referentialId,
    question: cleanText(q.question, `questions[${i}].question`),
    domain: cleanDomain(q.domain, `questions[${i}].domain`),
  }));
  return db.transaction().execute(async (trx) => {
    await requireReferential(trx, tenantId, referentialId, { lock: true });
    const rows = await trx.insertInto('coverage_questions').values(values).returning(QUESTION_COLUMNS).execute();
    await touchReferential(trx, tenantId, referentialId);
    // Ids are time-ordered and made in input order: answer in the order sent.
    rows.sort((a, b) => (a.id < b.id ? -1 : 1));
    return { object: 'list' as const, data: rows.map(toQuestion), has_more: false as const, next_cursor: null };
  });
}

export async function listQuestions(
  db: Db,
  tenantId: string,
  referentialId: string,
  page: Page & { domain?: string | undefined },
): Promise<QuestionList> {
  await requireReferential(db, tenantId, referentialId);
  let query = db
    .selectFrom('coverage_questions')
    .select(QUESTION_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('referential_id', '=', referentialId);
  // Matched as domains are stored: whitespace collapsed and trimmed.
  if (page.domain !== undefined) query = query.where('domain', '=', cleanDomain(page.domain, 'domain'));
  query = newestFirst(query, page);
  const list = toList(await query.execute(), page, toQuestion, (row) => row.id);
  return { ...list, referential_id: referentialId, domains: await domainCounts(db, tenantId, referentialId) };
}

/**
 * Renames `old_domain` on every question of the referential in one transaction (the
 * referential row is locked, so a concurrent rename or extraction waits). Onto a domain that
 * exists, the two merge. An `old_domain` no question carries is `invalid_parameters`.
 */
export async function renameDomain(
  db: Db,
  tenantId: string,
  referentialId: string,
  input: { old_domain: string; new_domain: string },
): Promise<DomainRename> {
  const oldDomain = cleanDomain(input.old_domain, 'old_domain');
  const newDomain = cleanDomain(input.new_domain, 'new_domain');
  if (oldDomain === newDomain) throw new ValidationError('new_domain', 'new_domain must differ from old_domain.');
  return db.transaction().execute(async (trx) => {
    await requireReferential(trx, tenantId, referentialId, { lock: true });
    const target = await trx
      .selectFrom('coverage_questions')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where('referential_id', '=', referentialId)
      .where('domain', '=', newDomain)
      .limit(1)
      .executeTakeFirst();
    const result = await trx
      .updateTable('coverage_questions')
      .set({ domain: newDomain, updated_at: sql`now()` })
      .where('tenant_id', '=', tenantId)
      .where('referential_id', '=', referentialId)
      .where('domain', '=', oldDomain)
      .executeTakeFirst();
    const renamed = Number(result.numUpdatedRows);
    if (renamed === 0) {
      throw new InvalidParametersError('old_domain', `No question of this referential is in domain '${oldDomain}'.`);
    }
    await touchReferential(trx, tenantId, referentialId);
    return {
      object: 'domain_rename' as const,
      referential_id: referentialId,
      old_domain: oldDomain,
      new_domain: newDomain,
      renamed_count: renamed,
      merged: target !== undefined,
    };
  });
}

/** A change to its questions is a change to the referential: its `updated_at` moves. */
export async function touchReferential(trx: Db, tenantId: string, referentialId: string) {
  await trx
    .updateTable('coverage_referentials')
    .set({ updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', referentialId)
    .execute();
}
