// Identifiers and secrets. Ids are UUID v7 (time-ordered, so "newest first" is "id descending");
// secrets are random with a readable prefix and are only ever stored as SHA-256 hashes.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { v7 } from 'uuid';

export const newId = (): string => v7();

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string): boolean => UUID_PATTERN.test(value);

export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(24).toString('base64url')}`;
}

export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex'); // one call: cheaper than createHash on every request
}

/** Constant-time comparison of two hex digests of equal length. */
export function sameDigest(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
