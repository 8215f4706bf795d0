// Coverage referentials (DESIGN.md §7): named sets of reference questions, each filed under a
// domain. The referentials themselves are here (the record is its response schema, the type
// derived from it); their questions and domains are in questions.ts.
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { decodeIdCursor, type List, type Page, toList } from '../pagination.js';
import { Timestamp, Uuid } from '../shapes.js';
import { addQuestions, domainCounts, listQuestions, renameDomain } from './questions.js';
import { cleanText, requireReferential } from './referential-checks.js';

export type { DomainCount, DomainRename, QuestionList, QuestionRecord } from './questions.js';
export { toQuestion } from './questions.js';
export { cleanDomain, requireReferential } from './referential-checks.js';

export const MAX_DOMAIN_LENGTH = 100;

export const ReferentialRecord = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('coverage_referential'),
    name: Type.String(),
    question_count: Type.Integer(),
    domain_count: Type.Integer(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'CoverageReferential' },
);
export type ReferentialRecord = Static<typeof ReferentialRecord>;

type ReferentialRow = {
  id: string;
  name: string;
  question_count: number;
  domain_count: number;
  created_at: Date;
  updated_at: Date;
};

const toReferential = (row: ReferentialRow): ReferentialRecord => ({
  id: row.id,
  object: 'coverage_referential',
  name: row.name,
  question_count: Number(row.question_count),
  domain_count: Number(row.domain_count),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export function createReferentialService({ db }: { db: Db }) {
  return {
    requireReferential,
    domainCounts: (tenantId: string, referentialId: string) => domainCounts(db, tenantId, referentialId),
    createReferential: (tenantId: string, input: { name: string }) => createReferential(db, tenantId, input),
    listReferentials: (tenantId: string, page: Page) => listReferentials(db, tenantId, page),
    getReferential: (tenantId: string, id: string) => getReferential(db, tenantId, id),
    deleteReferential: (tenantId: string, id: string) => deleteReferential(db, tenantId, id),
    addQuestions: (tenantId: string, referentialId: string, questions: { question: string; domain: string }[]) =>
      addQuestions(db, tenantId, referentialId, questions),
    listQuestions: (tenantId: string, referentialId: string, page: Page & { domain?: string | undefined }) =>
      listQuestions(db, tenantId, referentialId, page),
    renameDomain: (tenantId: string, referentialId: string, input: { old_domain: string; new_domain: string }) =>
      renameDomain(db, tenantId, referentialId, input),
  };
}

export type ReferentialService = ReturnType<typeof createReferentialService>;

/** The tenant's referentials with their question and domain counts. */
function selectReferentials(db: Db, tenantId: string) {
  return db
    .selectFrom('coverage_referentials as r')
    .select(['r.id', 'r.name', 'r.created_at', 'r.updated_at'])
    .select((eb) => [
      eb
        .selectFrom('coverage_questions as q')
        .select(sql<number>`count(*)::int`.as('n'))
        .whereRef('q.referential_id', '=', 'r.id')
        .where('q.tenant_id', '=', tenantId)
        .as('question_count'),
      eb
        .selectFrom('coverage_questions as q')
        .select(sql<number>`count(distinct q.domain)::int`.as('n'))
        .whereRef('q.referential_id', '=', 'r.id')
        .where('q.tenant_id', '=', tenantId)
        .as('domain_count'),
    ])
    .where('r.tenant_id', '=', tenantId);
}

async function createReferential(db: Db, tenantId: string, input: { name: string }): Promise<ReferentialRecord> {
  const name = cleanText(input.name, 'name');
  try {
    const row = await db
      .insertInto('coverage_referentials')
      .values({ id: newId(), tenant_id: tenantId, name })
      .returning(['id', 'name', 'created_at', 'updated_at'])
      .executeTakeFirstOrThrow();
    return toReferential({ ...row, question_count: 0, domain_count: 0 });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`A referential named '${name}' already exists.`, 'name');
    throw error;
  }
}

async function listReferentials(db: Db, tenantId: string, page: Page): Promise<List<ReferentialRecord>> {
  let query = selectReferentials(db, tenantId)
    .orderBy('r.id', 'desc')
    .limit(page.limit + 1);
  const after = decodeIdCursor(page.cursor);
  if (after) query = query.where('r.id', '<', after);
  const rows = (await query.execute()) as ReferentialRow[];
  return toList(rows, page, toReferential, (row) => row.id);
}

async function getReferential(db: Db, tenantId: string, id: string): Promise<ReferentialRecord> {
  const row = (await selectReferentials(db, tenantId).where('r.id', '=', id).executeTakeFirst()) as
    | ReferentialRow
    | undefined;
  if (!row) throw new NotFoundError('referential', id);
  return toReferential(row);
}

/** Deletes the referential with its questions, evaluations and extraction runs. */
async function deleteReferential(db: Db, tenantId: string, id: string) {
  const row = await db
    .deleteFrom('coverage_referentials')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning('id')
    .executeTakeFirst();
  if (!row) throw new NotFoundError('referential', id);
  return { id: row.id, object: 'deleted' as const, deleted: true };
}
