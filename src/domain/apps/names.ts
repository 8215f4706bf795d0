// An app is addressed by its name, unique in its tenant.
import type { Db } from '../../db/index.js';
import { NotFoundError } from '../errors.js';

/** The id of the app `name` names in this tenant, or `not_found`. */
export async function findAppId(db: Db, tenantId: string, name: string): Promise<string> {
  const row = await db
    .selectFrom('apps')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('app', name);
  return row.id;
}
