// Secrets sealed at rest (src/lib/secret-box.ts): AES-256-GCM under SECRETS_KEY, bound to the row
// they belong to. Webhook signing secrets use it (test/webhooks/delivery.test.ts, end to end).
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSecretBox, SecretBoxError } from '../../src/lib/secret-box.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('the secret box', () => {
  const box = createSecretBox(randomBytes(32));

  it('seals a secret so that it opens again for its own row only, with a fresh nonce each time', () => {
    const sealed = box.seal(SECRET, 'row-1');
    expect(sealed).toMatch(/^sealed1\.[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(SECRET.slice('whsec_'.length));
    expect(box.isSealed(sealed)).toBe(true);
    expect(box.open(sealed, 'row-1')).toBe(SECRET);
    expect(box.seal(SECRET, 'row-1')).not.toBe(sealed);
    expect(() => box.open(sealed, 'row-2')).toThrow(SecretBoxError);
  });

  it('refuses a sealed value that was changed, cut short, or sealed under another key', () => {
    const sealed = box.seal(SECRET, 'row-1');
    const changed = `${sealed.slice(0, 20)}${sealed[20] === 'A' ? 'B' : 'A'}${sealed.slice(21)}`;
    expect(() => box.open(changed, 'row-1')).toThrow(/another key/);
    expect(() => box.open('sealed1.AAAA', 'row-1')).toThrow(/truncated/);
    expect(() => createSecretBox(randomBytes(32)).open(sealed, 'row-1')).toThrow(/another key/);
    expect(() => createSecretBox(undefined).open(sealed, 'row-1')).toThrow(/SECRETS_KEY is not set/);
  });

  it('without a key stores secrets as given; a value stored unsealed opens as it is under any box', () => {
    const plain = createSecretBox(undefined);
    expect(plain.sealing).toBe(false);
    expect(plain.seal(SECRET, 'row-1')).toBe(SECRET);
    expect(box.sealing).toBe(true);
    expect(box.open(SECRET, 'row-1')).toBe(SECRET);
    expect(() => createSecretBox(randomBytes(16))).toThrow(SecretBoxError);
  });

  it('a change of key: what the previous key sealed still opens, and reseal moves it under the new key', () => {
    const oldKey = randomBytes(32);
    const before = createSecretBox(oldKey).seal(SECRET, 'row-1');
    const changing = createSecretBox(randomBytes(32), oldKey);
    expect(changing.rotating).toBe(true);
    expect(box.rotating).toBe(false);
    expect(changing.open(before, 'row-1')).toBe(SECRET);
    expect(() => changing.open(before, 'row-2')).toThrow(/neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS/);

    const moved = changing.reseal(before, 'row-1') as string;
    expect(moved).toMatch(/^sealed1\./);
    expect(changing.open(moved, 'row-1')).toBe(SECRET);
    expect(() => createSecretBox(oldKey).open(moved, 'row-1')).toThrow(/another key/);
    // Already under the new key, or opening under neither: no change. Stored unsealed: sealed.
    expect(changing.reseal(moved, 'row-1')).toBeUndefined();
    expect(changing.reseal(createSecretBox(randomBytes(32)).seal(SECRET, 'row-1'), 'row-1')).toBeUndefined();
    expect(changing.reseal('sealed1.AAAA', 'row-1')).toBeUndefined();
    expect(changing.open(changing.reseal(SECRET, 'row-1') as string, 'row-1')).toBe(SECRET);
    // Without a previous key only unsealed values are sealed; without any key nothing changes.
    expect(box.reseal(before, 'row-1')).toBeUndefined();
    expect(box.open(box.reseal(SECRET, 'row-1') as string, 'row-1')).toBe(SECRET);
    expect(createSecretBox(undefined).reseal(SECRET, 'row-1')).toBeUndefined();
    expect(() => createSecretBox(undefined, oldKey)).toThrow(SecretBoxError);
  });
});
