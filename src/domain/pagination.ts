// Cursor pagination (DESIGN.md §5): `{object: "list", data, has_more, next_cursor}`, newest first.
// Ids are UUID v7, so "newest first" is "id descending" and the cursor is the last id returned.
import { type SelectQueryBuilder, sql } from 'kysely';
import { isUuid } from '../lib/ids.js';
import { ValidationError } from './errors.js';

export interface Page {
  limit: number;
  cursor?: string | undefined;
}

export interface List<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

export function encodeCursor(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64url');
}

/** The refusal of a cursor this service could not have issued: a `validation_error` on `cursor`. */
export const foreignCursor = (detail = '') =>
  new ValidationError('cursor', `cursor is not a cursor this API returned${detail}.`);

/** The id a cursor stands for; a cursor this service did not issue is a `validation_error`. */
export function decodeIdCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const value = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!isUuid(value)) throw foreignCursor();
  return value;
}

/**
 * A ranked list (a full-text query) resumes after (rank, id), best first: the cursor carries both,
 * so rows written or removed between two pages neither repeat nor go missing.
 */
export const rankCursor = (rank: number, id: string): string => JSON.stringify({ s: rank, i: id });

/** The (rank, id) a ranked list's cursor stands for; a cursor this service did not issue is a `validation_error`. */
export function decodeRankCursor(cursor: string | undefined): { s: number; i: string } | undefined {
  if (cursor === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const value = parsed as { s?: unknown; i?: unknown } | undefined;
  if (
    typeof value !== 'object' ||
    value === null ||
    typeof value.s !== 'number' ||
    !Number.isFinite(value.s) ||
    typeof value.i !== 'string' ||
    !isUuid(value.i)
  ) {
    throw foreignCursor(' for this query');
  }
  return { s: value.s, i: value.i };
}

/**
 * Builds a list from rows fetched with `limit + 1`: the extra row only tells that more exist.
 */
export function toList<R, T>(rows: R[], page: Page, toRecord: (row: R) => T, cursorOf: (row: R) => string): List<T> {
  const hasMore = rows.length > page.limit;
  const shown = hasMore ? rows.slice(0, page.limit) : rows;
  const last = shown[shown.length - 1];
  return {
    object: 'list',
    data: shown.map(toRecord),
    has_more: hasMore,
    next_cursor: hasMore && last !== undefined ? encodeCursor(cursorOf(last)) : null,
  };
}

/**
 * One page of a query, newest first: ordered by `column` (a UUID v7, so by creation) descending,
 * after the cursor's id, `limit + 1` rows so that `toList` can tell whether more exist.
 */
export function newestFirst<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  page: Page,
  column = 'id',
): SelectQueryBuilder<DB, TB, O> {
  const after = decodeIdCursor(page.cursor);
  const paged = query.orderBy(sql.ref(column), 'desc').limit(page.limit + 1);
  return after ? paged.where(sql<boolean>`${sql.ref(column)} < ${after}`) : paged;
}
