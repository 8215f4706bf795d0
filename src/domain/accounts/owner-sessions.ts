// Owners' browser sessions: a random token that only the owner's cookie holds; the database keeps
// its SHA-256 and an expiry.
import { randomBytes } from 'node:crypto';
import type { Db } from '../../db/index.js';
import { newId, sha256Hex } from '../../lib/ids.js';

export const SESSION_TTL_MS = 12 * 3_600_000;

export interface OwnerSession {
  id: string;
  tenantId: string;
  ownerId: string;
  email: string;
  expiresAt: Date;
}

/** Opens a session; the token is in this answer only (the cookie's value). */
export async function createSession(
  db: Db,
  tenantId: string,
  ownerId: string,
): Promise<{ token: string; expiresAt: Date }> {
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + SESSION_TTL_MS);
  // Housekeeping on the way: this tenant's expired sessions go.
  await db
    .deleteFrom('owner_sessions')
    .where('tenant_id', '=', tenantId)
    .where('expires_at', '<=', new Date())
    .execute();
  await db
    .insertInto('owner_sessions')
    .values({
      id: newId(),
      tenant_id: tenantId,
      owner_id: ownerId,
      token_hash: sha256Hex(token),
      expires_at: expiresAt,
    })
    .execute();
  return { token, expiresAt };
}

/** The live session a cookie's token names, with its owner; undefined when unknown or expired. */
export async function findSession(db: Db, token: string): Promise<OwnerSession | undefined> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined;
  const row = await db
    .selectFrom('owner_sessions as s')
    .innerJoin('owners as o', (join) => join.onRef('o.id', '=', 's.owner_id').onRef('o.tenant_id', '=', 's.tenant_id'))
    .select(['s.id', 's.tenant_id', 's.owner_id', 's.expires_at', 'o.email'])
    .where('s.token_hash', '=', sha256Hex(token))
    .where('s.expires_at', '>', new Date())
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    id: row.id,
    tenantId: row.tenant_id,
    ownerId: row.owner_id,
    email: row.email,
    expiresAt: new Date(row.expires_at),
  };
}

export async function deleteSession(db: Db, tenantId: string, sessionId: string): Promise<void> {
  await db.deleteFrom('owner_sessions').where('tenant_id', '=', tenantId).where('id', '=', sessionId).execute();
}

/** Removes expired sessions of every tenant (housekeeping). */
export async function sweepExpiredSessions(db: Db): Promise<number> {
  const result = await db.deleteFrom('owner_sessions').where('expires_at', '<=', new Date()).executeTakeFirst();
  return Number(result.numDeletedRows);
}
