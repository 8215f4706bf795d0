// Secrets the service must read back to use (webhook signing secrets: an HMAC needs the key
// itself, so a hash cannot stand in as it does for API keys), sealed at rest with AES-256-GCM under
// SECRETS_KEY. A sealed value is `sealed1.` + base64url(IV ‖ ciphertext ‖ tag), bound to its row
// (the id as associated data), so a value copied into another row does not open there. Without a
// key, values are stored as given, and a value stored before a key was configured opens as it is.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** How every sealed value starts (a `LIKE` pattern can find the ones stored before a key). */
export const SEALED = 'sealed1.';
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const SECRETS_KEY_BYTES = 32;

export class SecretBoxError extends Error {}

export interface SecretBox {
  /** Whether a key is configured, so that `seal` seals. */
  readonly sealing: boolean;
  /** `secret` as it is to be stored for the row `context`. */
  seal(secret: string, context: string): string;
  /** A stored value opened: sealed ones with the key, those stored unsealed as they are. */
  open(stored: string, context: string): string;
  /** Whether a stored value is sealed. */
  isSealed(stored: string): boolean;
}

export function createSecretBox(key: Buffer | undefined): SecretBox {
  if (key !== undefined && key.length !== SECRETS_KEY_BYTES) {
    throw new SecretBoxError(`a secrets key has ${SECRETS_KEY_BYTES} bytes, not ${key.length}`);
  }
  const isSealed = (stored: string) => stored.startsWith(SEALED);
  return {
    sealing: key !== undefined,
    isSealed,

    seal(secret, context) {
      if (key === undefined) return secret;
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context));
      const sealed = Buffer.concat([iv, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `${SEALED}${sealed.toString('base64url')}`;
    },

    open(stored, context) {
      if (!isSealed(stored)) return stored;
      if (key === undefined) throw new SecretBoxError('the secret is sealed and SECRETS_KEY is not set');
      const sealed = Buffer.from(stored.slice(SEALED.length), 'base64url');
      if (sealed.length < IV_BYTES + TAG_BYTES) throw new SecretBoxError('the sealed secret is truncated');
      const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
      try {
        const opened = decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES));
        return Buffer.concat([opened, decipher.final()]).toString('utf8');
      } catch {
        throw new SecretBoxError(
          'the sealed secret does not open with SECRETS_KEY (another key sealed it, or it was altered)',
        );
      }
    },
  };
}
