// One turn at a time per conversation: a turn claims its conversation (`active_turn_id`) with a
// lease it renews while it runs, so a turn whose process died frees the conversation once the
// lease lapses.
import { sql, type Transaction } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { ConflictError, NotFoundError } from '../errors.js';
import type { EngineContext, Runtime } from './turn-runtime.js';

export const DEFAULT_LEASE_MS = 60_000;

export const leaseUntil = (ms: number) => sql<Date>`now() + ${ms} * interval '1 millisecond'`;

/**
 * Claims the conversation for a turn inside `trx` (row locked): refuses while another turn
 * holds an unexpired lease, and fails a turn whose lease lapsed (its process died).
 */
export async function claim(
  ctx: EngineContext,
  trx: Transaction<Database>,
  tenantId: string,
  conversationId: string,
  turnId: string,
) {
  const row = await trx
    .selectFrom('conversations')
    .selectAll()
    .select(sql<boolean>`active_turn_id is not null and active_turn_expires_at > now()`.as('busy'))
    .where('tenant_id', '=', tenantId)
    .where('id', '=', conversationId)
    .$if(!ctx.deps.playsSimulations, (query) => query.where(isCustomerConversation(tenantId, 'id')))
    .forUpdate()
    .executeTakeFirst();
  if (!row) throw new NotFoundError('conversation', conversationId);
  if (row.busy) {
    throw new ConflictError(
      'The agent is still answering the previous message of this conversation; send this one when that turn ends.',
    );
  }
  if (row.active_turn_id !== null) {
    await trx
      .updateTable('messages')
      .set({
        status: 'FAILED',
        error: JSON.stringify({
          code: 'turn_interrupted',
          message: 'The server stopped while the agent was answering.',
        }),
        updated_at: new Date(),
      })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', row.active_turn_id)
      .where('status', 'in', ['IN_PROGRESS', 'WAITING_CLIENT'])
      .execute();
  }
  await trx
    .updateTable('conversations')
    .set({ active_turn_id: turnId, active_turn_expires_at: leaseUntil(ctx.leaseMs), updated_at: new Date() })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', conversationId)
    .execute();
  return row;
}

/** Frees the turn's conversation (with `executor`, the transaction that writes the turn's end, or the pool). */
export async function release(executor: Db, rt: Runtime) {
  await executor
    .updateTable('conversations')
    .set({ active_turn_id: null, active_turn_expires_at: null, updated_at: new Date() })
    .where('tenant_id', '=', rt.tenantId)
    .where('id', '=', rt.conversationId)
    .where('active_turn_id', '=', rt.messageId)
    .execute();
}

/** Renews the turn's lease every third of it until the returned function is called. */
export function renewLease(ctx: EngineContext, tenantId: string, conversationId: string, turnId: string): () => void {
  const { db, leaseMs } = ctx;
  const timer = setInterval(
    () => {
      db.updateTable('conversations')
        .set({ active_turn_expires_at: leaseUntil(leaseMs) })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', conversationId)
        .where('active_turn_id', '=', turnId)
        .execute()
        .catch(() => {
          /* the next renewal retries; a lapsed lease only lets a later turn take over */
        });
    },
    Math.max(50, Math.floor(leaseMs / 3)),
  );
  timer.unref();
  return () => clearInterval(timer);
}

/** Whether the turn still holds its conversation (a newer turn takes it once the lease lapsed). */
export async function holdsClaim(ctx: EngineContext, rt: Runtime): Promise<boolean> {
  const row = await ctx.db
    .selectFrom('conversations')
    .select('id')
    .where('tenant_id', '=', rt.tenantId)
    .where('id', '=', rt.conversationId)
    .where('active_turn_id', '=', rt.messageId)
    .executeTakeFirst();
  return row !== undefined;
}
