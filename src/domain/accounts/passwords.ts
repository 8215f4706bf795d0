// Owners' passwords: scrypt from node:crypto with a random salt per password, stored as
// `scrypt$N$r$p$<salt>$<hash>` and compared in constant time.
import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';
import { ValidationError } from '../errors.js';

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 200;

// N = 2^15, r = 8: 32 MiB and a few tens of milliseconds per hash (OWASP's scrypt floor).
const SCRYPT = { N: 32_768, r: 8, p: 1, keyLength: 32 } as const;
const SCRYPT_MAXMEM = 64 * 1024 * 1024;

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

/** Lengths in characters (code points), as the request schemas count them, not UTF-16 units. */
export function checkPassword(password: string, param: string): void {
  const length = Array.from(password).length;
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    throw new ValidationError(
      param,
      `The password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters long.`,
    );
  }
}
