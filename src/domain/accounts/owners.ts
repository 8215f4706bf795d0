// Workspace owners and their browser sessions (spec: Authentication 5, "Keys and their
// scopes are managed by the workspace owner in the admin settings under integrations, API").
// Passwords: scrypt from node:crypto with a random salt per password, stored as
// `scrypt$N$r$p$<salt>$<hash>` and compared in constant time. Sessions: a random token that only
// the owner's cookie holds; the database keeps its SHA-256 and an expiry.
import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../../db/client.js';
import { isUniqueViolation } from '../../db/errors.js';
import { newId, sha256Hex } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 200;
export const EMAIL_PATTERN = '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$';
export const SESSION_TTL_MS = 12 * 3_600_000;

// N = 2^15, r = 8: 32 MiB and a few tens of milliseconds per hash (OWASP's scrypt floor).
const SCRYPT = { N: 32_768, r: 8, p: 1, keyLength: 32 } as const;
const SCRYPT_MAXMEM = 64 * 1024 * 1024;

export interface OwnerRecord {
  id: string;
  object: 'owner';
  tenant_id: string;
  email: string;
  created_at: string;
}

export interface OwnerSession {
  id: string;
  tenantId: string;
  ownerId: string;
  email: string;
  expiresAt: Date;
}

function derive(password: string, salt: Buffer, N: number, r: number, p: number, keyLength: number) {
  const options: ScryptOptions = { N, r, p, maxmem: SCRYPT_MAXMEM };
  return new Promise<Buffer>((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, keyLength, options, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, SCRYPT.N, SCRYPT.r, SCRYPT.p, SCRYPT.keyLength);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Whether `password` matches a stored `scrypt$…` hash; a malformed hash matches nothing. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [kind, n, r, p, salt, hash] = stored.split('$');
  if (kind !== 'scrypt' || !salt || !hash) return false;
  const [N, R, P] = [Number(n), Number(r), Number(p)];
  // Bounds keep a tampered row from asking for unbounded work.
  if (!(N >= 1024 && N <= 1_048_576 && R >= 1 && R <= 32 && P >= 1 && P <= 16)) return false;
  const expected = Buffer.from(hash, 'base64url');
  if (expected.length < 16 || expected.length > 128) return false;
  const actual = await derive(password, Buffer.from(salt, 'base64url'), N, R, P, expected.length);
  return timingSafeEqual(actual, expected);
}

/** A password for an owner who did not choose one: 144 random bits, URL-safe. */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

function checkEmail(email: string, param = 'email'): string {
  const trimmed = email.trim();
  if (trimmed.length > 254 || !new RegExp(EMAIL_PATTERN).test(trimmed)) {
    throw new ValidationError(param, `${param} must be an e-mail address.`);
  }
  return trimmed;
}

/** Lengths in characters (code points), as the request schemas count them, not UTF-16 units. */
function checkPassword(password: string, param: string): void {
  const length = Array.from(password).length;
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    throw new ValidationError(
      param,
      `The password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters long.`,
    );
  }
}

/**
 * Refuses an owner's e-mail or password as `createOwner` would, naming the field under `prefix`
 * (`owner.password`): a tenant created with its owner checks the owner before the tenant exists.
 */
export function checkOwnerInput(input: { email: string; password?: string | undefined }, prefix = ''): void {
  checkEmail(input.email, `${prefix}email`);
  if (input.password !== undefined) checkPassword(input.password, `${prefix}password`);
}

export function createOwnerService({ db }: { db: Db }) {
  // Unknown accounts are checked against this hash, so a wrong e-mail costs the same time as a
  // wrong password and the answer reveals neither.
  let decoy: Promise<string> | undefined;

  return {
    /** Creates an owner; without a password one is generated and returned, in this answer only. */
    async createOwner(
      tenantId: string,
      input: { email: string; password?: string | undefined },
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
    },

    /** The owner these credentials name, or undefined; the same work whatever was wrong. */
    async checkCredentials(tenantId: string, email: string, password: string): Promise<OwnerRecord | undefined> {
      const row = await db
        .selectFrom('owners')
        .select(['id', 'tenant_id', 'email', 'password_hash', 'created_at'])
        .where('tenant_id', '=', tenantId)
        // Lower-cased as the stored key is, by the database: JavaScript's rules differ (final sigma).
        .where('email_key', '=', sql<string>`lower(${email.trim()})`)
        .executeTakeFirst();
      if (!row) {
        decoy ??= hashPassword(generatePassword());
        await verifyPassword(password, await decoy);
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
    },

    /** Opens a session; the token is in this answer only (the cookie's value). */
    async createSession(tenantId: string, ownerId: string): Promise<{ token: string; expiresAt: Date }> {
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
    },

    /** The live session a cookie's token names, with its owner; undefined when unknown or expired. */
    async findSession(token: string): Promise<OwnerSession | undefined> {
      if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined;
      const row = await db
        .selectFrom('owner_sessions as s')
        .innerJoin('owners as o', (join) =>
          join.onRef('o.id', '=', 's.owner_id').onRef('o.tenant_id', '=', 's.tenant_id'),
        )
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
    },

    async deleteSession(tenantId: string, sessionId: string): Promise<void> {
      await db.deleteFrom('owner_sessions').where('tenant_id', '=', tenantId).where('id', '=', sessionId).execute();
    },

    /** Removes expired sessions of every tenant (housekeeping). */
    async sweepExpiredSessions(): Promise<number> {
      const result = await db.deleteFrom('owner_sessions').where('expires_at', '<=', new Date()).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

export type OwnerService = ReturnType<typeof createOwnerService>;
