// The rule that tells a customer's conversation from one a simulation case is playing.
import { type RawBuilder, type SqlBool, sql } from 'kysely';

/**
 * Whether the conversation in `column` is a customer's, not one a simulation case is playing
 * (docs/simulations.md, "Keeping simulations apart from customers"). Every read of conversations
 * for clients filters with it: lists, reads and messages, feedback, continuing a conversation,
 * task link targets, imports into datasets, dashboard analytics, question extraction.
 * `nullable`: a row that belongs to no conversation passes.
 *
 * `not in` the tenant's marks rather than `not exists`: PostgreSQL runs it as one hashed sub-plan
 * per statement whatever the table statistics (PGlite never analyses); the marks are few, one per
 * case playing now.
 */
export function isCustomerConversation(
  tenantId: string,
  column: string,
  options: { nullable?: boolean } = {},
): RawBuilder<SqlBool> {
  const ref = sql.ref(column);
  const notSimulated = sql<SqlBool>`${ref} not in (select s.conversation_id from simulation_conversations s where s.tenant_id = ${tenantId})`;
  return options.nullable ? sql<SqlBool>`(${ref} is null or ${notSimulated})` : notSimulated;
}
