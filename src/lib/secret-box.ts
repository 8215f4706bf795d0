// Secrets the service must read back to use (webhook signing secrets: an HMAC needs the key
// itself, so a hash cannot stand in as it does for API keys), sealed at rest with AES-256-GCM under
// SECRETS_KEY. A sealed value is `sealed1.` + base64url(IV ‖ ciphertext ‖ tag), bound to its row
// (the id as associated data), so a value copied into another row does not open there. Without a
// key, values are stored as given, and a value stored before a key was configured opens as it is.
// The key is changed in place with the previous one kept for a while (SECRETS_KEY_PREVIOUS): values
// sealed under it still open, and `reseal` moves them under the current key.
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
  /** Whether the key before a change of key is kept, so that values sealed under it may remain. */
  readonly rotating: boolean;
  /** `secret` as it is to be stored for the row `context`. */
  seal(secret: string, context: string): string;
  /** A stored value opened: sealed ones with the key, those stored unsealed as they are. */
  open(stored: string, context: string): string;
  /** Whether a stored value is sealed. */
  isSealed(stored: string): boolean;
  /**
   * A stored value as it should now be stored: sealed under the current key when it was stored
   * unsealed or sealed under the previous key; undefined when it needs no change, or does not open.
   */
  reseal(stored: string, context: string): string | undefined;
}

/** `sealed`'s secret opened under `key`, or undefined when it was sealed under another key or altered. */
function openUnder(key: Buffer, sealed: Buffer, context: string): string | undefined {
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  try {
    const opened = decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES));
    return Buffer.concat([opened, decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

/**
 * A box sealing under `key`. `previous` is the key before a change of key: what it sealed still
 * opens, and is sealed again under `key` by `reseal`.
 */
export function createSecretBox(key: Buffer | undefined, previous?: Buffer): SecretBox {
  for (const given of [key, previous]) {
    if (given !== undefined && given.length !== SECRETS_KEY_BYTES) {
      throw new SecretBoxError(`a secrets key has ${SECRETS_KEY_BYTES} bytes, not ${given.length}`);
    }
  }
  if (previous !== undefined && key === undefined) throw new SecretBoxError('a previous key needs a current one');
  const isSealed = (stored: string) => stored.startsWith(SEALED);
  const unpack = (stored: string): Buffer => {
    const sealed = Buffer.from(stored.slice(SEALED.length), 'base64url');
    if (sealed.length < IV_BYTES + TAG_BYTES) throw new SecretBoxError('the sealed secret is truncated');
    return sealed;
  };

  const box: SecretBox = {
    sealing: key !== undefined,
    rotating: previous !== undefined,
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
      const sealed = unpack(stored);
      const opened = openUnder(key, sealed, context) ?? (previous && openUnder(previous, sealed, context));
      if (opened === undefined) {
        throw new SecretBoxError(
          previous
            ? 'the sealed secret opens with neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS (another key sealed it, or it was altered)'
            : 'the sealed secret does not open with SECRETS_KEY (another key sealed it, or it was altered)',
        );
      }
      return opened;
    },

    reseal(stored, context) {
      if (key === undefined) return undefined;
      if (!isSealed(stored)) return box.seal(stored, context);
      if (previous === undefined) return undefined;
      let sealed: Buffer;
      try {
        sealed = unpack(stored);
      } catch {
        return undefined;
      }
      if (openUnder(key, sealed, context) !== undefined) return undefined;
      const opened = openUnder(previous, sealed, context);
      return opened === undefined ? undefined : box.seal(opened, context);
    },
  };
  return box;
}
