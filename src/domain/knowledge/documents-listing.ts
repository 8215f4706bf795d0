// Listing documents: newest first, or, with `q`, ranked by full-text search over documents and
// their translations, each with an excerpt from the text that matched best.
import { sql } from 'kysely';
import { decodeRankCursor, type List, newestFirst, type Page, rankCursor, toList } from '../pagination.js';
import type { DocumentContext } from './documents-context.js';
import { DOCUMENT_COLUMNS, type DocumentRecord, type DocumentRow, toDocumentRecord } from './documents-records.js';
import { documentRanks } from './search.js';
import { searchQuery } from './text-search.js';

const HEADLINE_OPTIONS =
  'StartSel="",StopSel="",MaxWords=40,MinWords=15,ShortWord=2,MaxFragments=2,FragmentDelimiter=" … "';

export async function listDocuments(
  { db, search }: DocumentContext,
  tenantId: string,
  page: Page & { source_id?: string | undefined; q?: string | undefined },
): Promise<List<DocumentRecord>> {
  const q = searchQuery(page.q);
  if (q !== undefined) {
    const after = decodeRankCursor(page.cursor);
    const result = await search(tenantId, (trx) =>
      sql<DocumentRow>`
      with ranked as (${documentRanks(tenantId, q, { sourceId: page.source_id })})
      select d.id, d.title, d.content, d.language, d.source_id, d.page_id, d.url, d.created_at, d.updated_at,
             r.rank,
             -- The excerpt comes from the text that matched best: the document, or a translation.
             (select ts_headline(p.cfg, p.content, websearch_to_tsquery(p.cfg, ${q}), ${HEADLINE_OPTIONS})
              from (
                select d.search_config as cfg, d.content,
                       ts_rank_cd(d.search_vector, websearch_to_tsquery(d.search_config, ${q})) as rank, 0 as pass
                union all
                select t.search_config, t.content,
                       ts_rank_cd(t.search_vector, websearch_to_tsquery(t.search_config, ${q})), 1
                from document_translations t
                where t.tenant_id = ${tenantId} and t.document_id = d.id
                  and t.search_vector @@ websearch_to_tsquery(t.search_config, ${q})
              ) p
              order by p.rank desc, p.pass
              limit 1) as snippet
      from ranked r join documents d on d.id = r.document_id and d.tenant_id = ${tenantId}
      ${after ? sql`where (r.rank, d.id) < (${after.s}::float8, ${after.i}::uuid)` : sql``}
      order by r.rank desc, d.id desc
      limit ${page.limit + 1}
    `.execute(trx),
    );
    return toList(result.rows, page, toDocumentRecord, (row) => rankCursor(Number(row.rank), row.id));
  }
  let query = db.selectFrom('documents').select(DOCUMENT_COLUMNS).where('tenant_id', '=', tenantId);
  if (page.source_id !== undefined) query = query.where('source_id', '=', page.source_id);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toDocumentRecord, (row) => row.id);
}
