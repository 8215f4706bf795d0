// Coverage referentials (DESIGN.md §7): named sets of reference questions, each filed under a
// domain. Questions are added in batches of at most 100; a domain is renamed across every
// question of its referential in one transaction (spec, behaviour rule 6), and renaming onto a
// domain that already exists merges the two.
import { type Kysely, sql } from 'kysely';
import type { Db } from '../../db/client.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { Database } from '../../db/schema.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, checkBulkItems, InvalidParametersError, NotFoundError, ValidationError } from '../errors.js';
import { decodeIdCursor, type List, newestFirst, type Page, toList } from '../pagination.js';

export const MAX_DOMAIN_LENGTH = 100;

export interface ReferentialRecord {
  id: string;
  object: 'coverage_referential';
  name: string;
  question_count: number;
  domain_count: number;
  created_at: string;
  updated_at: string;
}

export interface QuestionRecord {
  id: string;
  object: 'coverage_question';
  referential_id: string;
  question: string;
  domain: string;
  origin: 'manual' | 'extracted';
  conversation_id: string | null;
  created_at: string;
}

export interface DomainCount {
  domain: string;
  question_count: number;
}

export interface QuestionList extends List<QuestionRecord> {
  referential_id: string;
  domains: DomainCount[];
}

export interface DomainRename {
  object: 'domain_rename';
  referential_id: string;
  old_domain: string;
  new_domain: string;
  renamed_count: number;
  /** True when `new_domain` already had questions: the two domains are now one. */
  merged: boolean;
}

type ReferentialRow = {
  id: string;
  name: string;
  question_count: number;
  domain_count: number;
  created_at: Date;
  updated_at: Date;
};

type QuestionRow = {
  id: string;
  referential_id: string;
  question: string;
  domain: string;
  origin: 'manual' | 'extracted';
  conversation_id: string | null;
  created_at: Date;
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

/** Domains are compared exactly, after trimming; an empty one is refused. */
export function cleanDomain(value: string, param: string): string {
  const domain = value.replace(/\s+/g, ' ').trim();
  if (domain === '') throw new ValidationError(param, `${param} must not be blank.`);
  return domain;
}

function cleanText(value: string, param: string): string {
  const text = value.replace(/\s+/g, ' ').trim();
  if (text === '') throw new ValidationError(param, `${param} must not be blank.`);
  return text;
}

const QUESTION_COLUMNS = [
  'id',
  'referential_id',
  'question',
  'domain',
  'origin',
  'conversation_id',
  'created_at',
] as const;

/**
 * The id of this tenant's referential `id`, else 404 for an id in the path or 422 on
 * `referential_id` for one named in a body. `lock` holds its row until the transaction ends.
 */
export async function requireReferential(
  executor: Kysely<Database>,
  tenantId: string,
  id: string,
  { from = 'path', lock = false }: { from?: 'path' | 'body'; lock?: boolean } = {},
): Promise<string> {
  let query = executor
    .selectFrom('coverage_referentials')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (row) return row.id;
  if (from === 'body') throw new InvalidParametersError('referential_id', `No referential '${id}' in this workspace.`);
  throw new NotFoundError('referential', id);
}

export function createReferentialService({ db }: { db: Db }) {
  function selectReferentials(tenantId: string) {
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

  async function domainCounts(tenantId: string, referentialId: string): Promise<DomainCount[]> {
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

  return {
    requireReferential,
    domainCounts,

    async createReferential(tenantId: string, input: { name: string }): Promise<ReferentialRecord> {
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
    },

    async listReferentials(tenantId: string, page: Page): Promise<List<ReferentialRecord>> {
      let query = selectReferentials(tenantId)
        .orderBy('r.id', 'desc')
        .limit(page.limit + 1);
      const after = decodeIdCursor(page.cursor);
      if (after) query = query.where('r.id', '<', after);
      const rows = (await query.execute()) as ReferentialRow[];
      return toList(rows, page, toReferential, (row) => row.id);
    },

    async getReferential(tenantId: string, id: string): Promise<ReferentialRecord> {
      const row = (await selectReferentials(tenantId).where('r.id', '=', id).executeTakeFirst()) as
        | ReferentialRow
        | undefined;
      if (!row) throw new NotFoundError('referential', id);
      return toReferential(row);
    },

    /** Deletes the referential with its questions, evaluations and extraction runs. */
    async deleteReferential(tenantId: string, id: string) {
      const row = await db
        .deleteFrom('coverage_referentials')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returning('id')
        .executeTakeFirst();
      if (!row) throw new NotFoundError('referential', id);
      return { id: row.id, object: 'deleted' as const, deleted: true };
    },

    async addQuestions(
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
        await trx
          .updateTable('coverage_referentials')
          .set({ updated_at: sql`now()` })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', referentialId)
          .execute();
        // Ids are time-ordered and made in input order: answer in the order sent.
        rows.sort((a, b) => (a.id < b.id ? -1 : 1));
        return { object: 'list' as const, data: rows.map(toQuestion), has_more: false as const, next_cursor: null };
      });
    },

    async listQuestions(
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
      return { ...list, referential_id: referentialId, domains: await domainCounts(tenantId, referentialId) };
    },

    /**
     * Renames `old_domain` on every question of the referential in one transaction (the
     * referential row is locked, so a concurrent rename or extraction waits). Onto a domain that
     * exists, the two merge. An `old_domain` no question carries is `invalid_parameters`.
     */
    async renameDomain(
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
          throw new InvalidParametersError(
            'old_domain',
            `No question of this referential is in domain '${oldDomain}'.`,
          );
        }
        await trx
          .updateTable('coverage_referentials')
          .set({ updated_at: sql`now()` })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', referentialId)
          .execute();
        return {
          object: 'domain_rename' as const,
          referential_id: referentialId,
          old_domain: oldDomain,
          new_domain: newDomain,
          renamed_count: renamed,
          merged: target !== undefined,
        };
      });
    },
  };
}

export type ReferentialService = ReturnType<typeof createReferentialService>;
