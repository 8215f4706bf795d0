// A tenant as the API answers it, and the lookup of one by its id.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../../db/index.js';
import { iso } from '../../lib/time.js';
import { NotFoundError } from '../errors.js';
import { Timestamp } from '../shapes.js';

export const TenantRecord = Type.Object(
  { id: Type.String(), object: Type.Literal('tenant'), name: Type.String(), created_at: Timestamp },
  { title: 'Tenant' },
);
export type TenantRecord = Static<typeof TenantRecord>;

/** The tenant `tenantId` names, or `not_found`. */
export async function getTenant(db: Db, tenantId: string): Promise<TenantRecord> {
  const row = await db.selectFrom('tenants').selectAll().where('id', '=', tenantId).executeTakeFirst();
  if (!row) throw new NotFoundError('tenant', tenantId);
  return { id: row.id, object: 'tenant', name: row.name, created_at: iso(row.created_at) };
}
