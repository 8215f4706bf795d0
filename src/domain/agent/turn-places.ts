// Per-tenant places for turns in this process: streamed turns (a turn run with a listener holds a
// place until it ends) and turns waiting for client results in the default mode (a place from the
// moment the turn would wait until it goes on). A request over a cap is refused with
// `turn_limit_exceeded` before anything is stored.
//
// The waiting turns are also watched here for results sent to another instance, or a conversation
// a newer turn took: one query per tenant for all its waiting turns every `pollMs`, so a hundred
// waiting turns cost about what one does (each polling on its own took two queries a turn).
import type { Db } from '../../db/index.js';
import { DomainError } from '../errors.js';

export interface TurnPlacesOptions {
  db: Db;
  /** Streamed turns one tenant may run at once in this process; unset, no cap. */
  maxStreams: number | undefined;
  /** Turns of one tenant this process may hold waiting for client results; unset, no cap. */
  maxWaiting: number | undefined;
  pollMs: number;
  /** Wakes the waiting turn of this message: its results came in, or its conversation moved on. */
  wake(messageId: string): void;
}

export function createTurnPlaces({ db, maxStreams, maxWaiting, pollMs, wake }: TurnPlacesOptions) {
  return { streamed: streamPlaces(maxStreams), ...waitingPlaces({ db, maxWaiting, pollMs, wake }) };
}

/** The stream places: streamed turns running, by tenant. */
function streamPlaces(maxStreams: number | undefined) {
  const streamsOf = new Map<string, number>();

  /** Runs `start` holding one of the tenant's stream places when `streams`, until its turn ends. */
  return async function streamed<T extends { finished: Promise<unknown> }>(
    tenantId: string,
    streams: boolean,
    start: () => Promise<T>,
  ): Promise<T> {
    if (!streams) return start();
    const open = streamsOf.get(tenantId) ?? 0;
    if (maxStreams !== undefined && open >= maxStreams) {
      throw new DomainError(
        'turn_limit_exceeded',
        `This workspace has ${open} streamed turns running on this server, its limit (TURN_MAX_STREAMS_PER_TENANT); retry when one ends, or send without Accept: text/event-stream.`,
      );
    }
    streamsOf.set(tenantId, open + 1);
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      const rest = (streamsOf.get(tenantId) ?? 1) - 1;
      if (rest === 0) streamsOf.delete(tenantId);
      else streamsOf.set(tenantId, rest);
    };
    try {
      const turn = await start();
      turn.finished.then(leave, leave);
      return turn;
    } catch (error) {
      leave();
      throw error;
    }
  };
}

/** The waiting places: turns waiting for client results, by tenant, watched while there are any. */
function waitingPlaces({ db, maxWaiting, pollMs, wake }: Omit<TurnPlacesOptions, 'maxStreams'>) {
  /** Turns waiting for client results, by tenant: their message ids. */
  const waitingOf = new Map<string, Set<string>>();
  let watcher: NodeJS.Timeout | undefined;
  let watching = false;

  /** Why the tenant's waiting places are all taken, or undefined when one is free. */
  function waitingFull(tenantId: string): string | undefined {
    const held = waitingOf.get(tenantId)?.size ?? 0;
    if (maxWaiting === undefined || held < maxWaiting) return undefined;
    return `This workspace has ${held} turns waiting for client function results on this server, its limit (TURN_MAX_WAITING_PER_TENANT); send their results, use client_functions_mode "pause", or retry when one ends.`;
  }

  /**
   * Takes a waiting place for the message's turn: a function that frees it, or, when the tenant's
   * places are all taken (turns started together), why.
   */
  function holdWaiting(tenantId: string, messageId: string): { leave: () => void } | { full: string } {
    const full = waitingFull(tenantId);
    if (full) return { full };
    const places = waitingOf.get(tenantId) ?? new Set<string>();
    places.add(messageId);
    waitingOf.set(tenantId, places);
    if (!watcher) {
      watcher = setInterval(checkWaiting, pollMs);
      watcher.unref();
    }
    const leave = () => {
      places.delete(messageId);
      if (places.size === 0 && waitingOf.get(tenantId) === places) waitingOf.delete(tenantId);
      if (waitingOf.size === 0 && watcher) {
        clearInterval(watcher);
        watcher = undefined;
      }
    };
    return { leave };
  }

  /** Wakes the waiting turns that no longer wait: no pending call left, or not their conversation's turn. */
  async function checkWaiting() {
    if (watching) return;
    watching = true;
    try {
      for (const [tenantId, places] of waitingOf) {
        const ids = [...places];
        if (ids.length === 0) continue;
        const waiting = await stillWaiting(db, tenantId, ids);
        for (const id of ids) if (!waiting.has(id)) wake(id);
      }
    } catch {
      // The next check retries; a turn still wakes at its deadline.
    } finally {
      watching = false;
    }
  }

  return {
    waitingFull,
    holdWaiting,
    close(): void {
      clearInterval(watcher);
      watcher = undefined;
    },
  };
}

/** Of the tenant's `ids`, the turns that still wait: a call still pending, and their conversation's turn. */
async function stillWaiting(db: Db, tenantId: string, ids: string[]): Promise<Set<string>> {
  const rows = await db
    .selectFrom('messages as m')
    .select('m.id')
    .where('m.tenant_id', '=', tenantId)
    .where('m.id', 'in', ids)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('function_calls as f')
          .select('f.call_id')
          .where('f.tenant_id', '=', tenantId)
          .whereRef('f.message_id', '=', 'm.id')
          .where('f.status', '=', 'pending'),
      ),
    )
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('conversations as c')
          .select('c.id')
          .where('c.tenant_id', '=', tenantId)
          .whereRef('c.id', '=', 'm.conversation_id')
          .whereRef('c.active_turn_id', '=', 'm.id'),
      ),
    )
    .execute();
  return new Set(rows.map((row) => row.id));
}
