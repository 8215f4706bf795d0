// Workspace owners (spec: Authentication 5, "Keys and their scopes are managed by the workspace
// owner in the admin settings under integrations, API"): their passwords (./passwords.ts) and
// their browser sessions (./owner-sessions.ts).
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { Timestamp, Uuid } from '../shapes.js';
import { createSession, deleteSession, findSession, sweepExpiredSessions } from './owner-sessions.js';
import { checkPassword, generatePassword, hashPassword, verifyPassword } from './passwords.js';

export { type OwnerSession, SESSION_TTL_MS } from './owner-sessions.js';
export {
  generatePassword,
  hashPassword,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
  verifyPassword,
} from './passwords.js';

export const EMAIL_PATTERN = '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$';

// Workspace owners: they sign in to /admin/settings/integrations/api to manage keys.
export const OwnerRecord = Type.Object(
  { id: Uuid, object: Type.Literal('owner'), tenant_id: Type.String(), email: Type.String(), created_at: Timestamp },
  { title: 'Owner' },
);
export type OwnerRecord = Static<typeof OwnerRecord>;

export interface NewOwner {
  email: string;
  password?: string | undefined;
}

/**
 * Unknown accounts are checked against this hash, so a wrong e-mail costs the same time as a
 * wrong password and the answer reveals neither.
 */
interface Decoy {
  hash?: Promise<string>;
}

function checkEmail(email: string, param = 'email'): string {
  const trimmed = email.trim();
  if (trimmed.length > 254 || !new RegExp(EMAIL_PATTERN).test(trimmed)) {
    throw new ValidationError(param, `${param} must be an e-mail address.`);
  }
  return trimmed;
}

/**
 * Refuses an owner's e-mail or password as `createOwner` would, naming the field under `prefix`
 * (`owner.password`): a tenant created with its owner checks the owner before the tenant exists.
 */
export function checkOwnerInput(input: { email: string; password?: string | undefined }, prefix = ''): void {
  checkEmail(input.email, `${prefix}email`);
  if (input.password !== undefined) checkPassword(input.password, `${prefix}password`);
}

/** Creates an owner; without a password one is generated and returned, in this answer only. */
async function createOwner(
  db: Db,
  tenantId: string,
  input: NewOwner,
): Promise<{ owner: OwnerRecord; generatedPassword?: string }> {
  const email = checkEmail(input.email);
  const generated = input.password === undefined ? generatePassword() : undefined;
  const password = input.password ?? (generated as string);
  checkPassword(password, 'password');
  const tenant = await db.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst();
  if (!tenant) throw new NotFoundError('tenant', tenantId);
  try {
    const row = await db
      .insertInto('owners')
      .values({ id: newId(), tenant_id: tenantId, email, password_hash: await hashPassword(password) })
      .returning(['id', 'tenant_id', 'email', 'created_at'])
      .executeTakeFirstOrThrow();
    const owner: OwnerRecord = {
      id: row.id,
      object: 'owner',
      tenant_id: row.tenant_id,
      email: row.email,
      created_at: iso(row.created_at),
    };
    return generated === undefined ? { owner } : { owner, generatedPassword: generated };
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ConflictError(`Tenant '${tenantId}' already has an owner with this e-mail.`, 'email');
    }
    throw error;
  }
}

/** The owner these credentials name, or undefined; the same work whatever was wrong. */
async function checkCredentials(
  db: Db,
  decoy: Decoy,
  tenantId: string,
  email: string,
  password: string,
): Promise<OwnerRecord | undefined> {
  const row = await db
    .selectFrom('owners')
    .select(['id', 'tenant_id', 'email', 'password_hash', 'created_at'])
    .where('tenant_id', '=', tenantId)
    // Lower-cased as the stored key is, by the database: JavaScript's rules differ (final sigma).
    .where('email_key', '=', sql<string>`lower(${email.trim()})`)
    .executeTakeFirst();
  if (!row) {
    decoy.hash ??= hashPassword(generatePassword());
    await verifyPassword(password, await decoy.hash);
    return undefined;
  }
  if (!(await verifyPassword(password, row.password_hash))) return undefined;
  return {
    id: row.id,
    object: 'owner',
    tenant_id: row.tenant_id,
    email: row.email,
    created_at: iso(row.created_at),
  };
}

export function createOwnerService({ db }: { db: Db }) {
  const decoy: Decoy = {};
  return {
    createOwner: (tenantId: string, input: NewOwner) => createOwner(db, tenantId, input),
    checkCredentials: (tenantId: string, email: string, password: string) =>
      checkCredentials(db, decoy, tenantId, email, password),
    createSession: (tenantId: string, ownerId: string) => createSession(db, tenantId, ownerId),
    findSession: (token: string) => findSession(db, token),
    deleteSession: (tenantId: string, sessionId: string) => deleteSession(db, tenantId, sessionId),
    sweepExpiredSessions: () => sweepExpiredSessions(db),
  };
}

export type OwnerService = ReturnType<typeof createOwnerService>;
