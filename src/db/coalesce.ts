// Point reads coalesced. Reads by key that reach the same group (a table) in one turn of the event
// loop go to the database as one query for all their keys, sent when the turn's I/O is handled
// (`setImmediate`). A lone read waits for nothing but that turn; under load, the requests that one
// turn parses share one round trip, one statement execution and one pooled connection, where each
// would have taken its own. On the row read this is most of the database's work and of the
// driver's (bench/README.md).
//
// A key read twice in one batch is asked once; every read of it gets the row, or undefined when
// the query returned none. A query that fails fails every read of its batch, each of which sees
// the error as it would have seen its own query's.

import { CompiledQuery, type QueryResult } from 'kysely';

type Waiter<Row> = { resolve(row: Row | undefined): void; reject(error: unknown): void };

/** The reads of one group waiting for the same query: key → its readers. */
type Batch<Row> = Map<string, Waiter<Row>[]>;

export interface PointReads<Row> {
  /** The row of `group` whose key is `key`, or undefined. */
  read(group: string, key: string): Promise<Row | undefined>;
}

export function coalescePointReads<Row>(options: {
  /** One query for these distinct keys of `group`: the rows found, in any order. */
  readMany(group: string, keys: string[]): Promise<Row[]>;
  /** A row's key, as the reads name it. */
  keyOf(row: Row): string;
  /** Keys in one query at most; a batch that reaches it is sent at once. */
  maxKeys: number;
}): PointReads<Row> {
  const open = new Map<string, Batch<Row>>();
  let scheduled = false;

  async function send(group: string, batch: Batch<Row>): Promise<void> {
    let rows: Row[];
    try {
      rows = await options.readMany(group, [...batch.keys()]);
    } catch (error) {
      for (const waiters of batch.values()) for (const waiter of waiters) waiter.reject(error);
      return;
    }
    const found = new Map<string, Row>();
    for (const row of rows) found.set(options.keyOf(row), row);
    for (const [key, waiters] of batch) {
      const row = found.get(key);
      for (const waiter of waiters) waiter.resolve(row);
    }
  }

  function sendOpen(): void {
    scheduled = false;
    const batches = [...open];
    open.clear();
    for (const [group, batch] of batches) void send(group, batch);
  }

  return {
    read(group, key) {
      return new Promise<Row | undefined>((resolve, reject) => {
        let batch = open.get(group);
        if (batch === undefined) {
          batch = new Map();
          open.set(group, batch);
          if (!scheduled) {
            scheduled = true;
            setImmediate(sendOpen);
          }
        }
        const waiters = batch.get(key);
        if (waiters !== undefined) {
          waiters.push({ resolve, reject });
          return;
        }
        batch.set(key, [{ resolve, reject }]);
        if (batch.size >= options.maxKeys) {
          open.delete(group);
          void send(group, batch);
        }
      });
    },
  };
}

/**
 * Point reads by a key column through a group's two statements: `one` for a lone key (its `$1`),
 * `many` for several at once (`$1` a text[] of them, as `= any($1::text[])`).
 */
export function coalescedStatements<Row>(
  db: { executeQuery<R>(query: CompiledQuery<R>): Promise<QueryResult<R>> },
  statements: (group: string) => { one: string; many: string },
  keyOf: (row: Row) => string,
): PointReads<Row> {
  return coalescePointReads<Row>({
    async readMany(group, keys) {
      const { one, many } = statements(group);
      const query = keys.length === 1 ? CompiledQuery.raw(one, keys) : CompiledQuery.raw(many, [keys]);
      return (await db.executeQuery(query as CompiledQuery<Row>)).rows;
    },
    keyOf,
    maxKeys: 100,
  });
}
