// Standard Webhooks signing (https://www.standardwebhooks.com): a secret is `whsec_` + base64 of
// random bytes; a signature is `v1,` + base64 HMAC-SHA256, keyed with the decoded bytes, of
// `{webhook-id}.{webhook-timestamp}.{body}`. Several signatures (during a secret rotation) are
// separated by spaces, and a receiver accepts the message when any of them verifies.
// Ten lines of node:crypto rather than the `standardwebhooks` package: signing is the easy half,
// and the tests verify every delivery with that package, so the two are checked against each other.
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';
/** 192 bits, as the reference implementations use. */
const SECRET_BYTES = 24;

export function newWebhookSecret(): string {
  return `${PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** `v1,<signature>` of one message under one secret. */
export function sign(secret: string, messageId: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
  const digest = createHmac('sha256', key).update(`${messageId}.${timestamp}.${body}`).digest('base64');
  return `v1,${digest}`;
}

/** The three Standard Webhooks headers of one attempt, signed with every secret given. */
export function signatureHeaders(
  secrets: readonly string[],
  messageId: string,
  timestamp: number,
  body: string,
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((secret) => sign(secret, messageId, timestamp, body)).join(' '),
  };
}
