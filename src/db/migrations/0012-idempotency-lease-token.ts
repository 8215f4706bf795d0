// A running request's Idempotency-Key reservation names its holder. A reservation whose lease ran
// out can be taken over by a repeat while the first request, which lost it, is still running (its
// database unreachable long enough for its renewals to fail); without a name, the first request's
// answer, stored on the key as it finished, replaced the repeat's, and the key then replayed an
// answer the repeat's client never saw. Renewal, the answer's store and the key's release now
// touch the reservation only while it holds the request's own token.
import type { Migration } from '../migrate.js';

export const idempotencyLeaseToken: Migration = {
  name: '0012-idempotency-lease-token',
  statements: ['alter table idempotency_keys add column lease_token uuid'],
};
