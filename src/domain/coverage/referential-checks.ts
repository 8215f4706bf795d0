// The checks the coverage writes share: the referential named exists in the workspace (and can
// be held while it is written), and a question or domain is not blank once its spacing is collapsed.
import type { Kysely } from 'kysely';
import type { Database } from '../../db/index.js';
import { InvalidParametersError, NotFoundError, ValidationError } from '../errors.js';

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

/** Domains are compared exactly, after trimming; an empty one is refused. */
export function cleanDomain(value: string, param: string): string {
  const domain = value.replace(/\s+/g, ' ').trim();
  if (domain === '') throw new ValidationError(param, `${param} must not be blank.`);
  return domain;
}

export function cleanText(value: string, param: string): string {
  const text = value.replace(/\s+/g, ' ').trim();
  if (text === '') throw new ValidationError(param, `${param} must not be blank.`);
  return text;
}
