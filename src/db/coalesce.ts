// Point reads coalesced while the database is busy with them. A read by key is sent at once when
// fewer than `maxInFlight` statements of its group (a table) are running; otherwise it waits, with
// the other reads of that group that arrive meanwhile, and they go as one statement for all their
// keys when a running one returns. A lone read waits for nothing; under load, the reads that pile
// up behind a running statement share one round trip, one statement execution and one pooled
// connection, where each would have taken its own. On the row read this is most of the database's
// work and of the driver's (bench/README.md).
//
// A key read twice in one waiting batch is asked once; every read of it gets the row, or undefined
// when the statement returned none. A statement that fails fails every read of its batch, each of
// which sees the error as it would have seen its own statement's. The reads of one batch finish
// together, when its whole answer has arrived: `maxKeys` bounds how many rows that is.
//
// Written here rather than taken from `dataloader`, which batches by turn of the event loop: it
// would hold a lone read until the turn ends, and send a turn's reads as one statement even when
// the database is idle and could run them side by side.

import { CompiledQuery, type QueryResult } from 'kysely';

type Waiter<Row> = { resolve(row: Row | undefined): void; reject(error: unknown): void };

/** The reads waiting for the same statement: key → its readers. */
type Batch<Row> = Map<string, Waiter<Row>[]>;

/** A group's statements running, and its batches waiting in order (the last one still filling). */
interface Group<Row> {
  running: number;
  waiting: Batch<Row>[];
}

export interface PointReads<Row> {
  /** The row of `group` whose key is `key`, or undefined. */
  read(group: string, key: string): Promise<Row | undefined>;
}

export interface CoalesceOptions {
  /** Statements of one group running at once; the reads beyond them wait and are coalesced. */
  maxInFlight: number;
  /** Keys in one statement at most. */
  maxKeys: number;
}

export function coalescePointReads<Row>(
  options: CoalesceOptions & {
    /** One statement for these distinct keys of `group`: the rows found, in any order. */
    readMany(group: string, keys: string[]): Promise<Row[]>;
    /** A row's key, as the reads name it. */
    keyOf(row: Row): string;
  },
): PointReads<Row> {
  const groups = new Map<string, Group<Row>>();

  async function send(name: string, group: Group<Row>, batch: Batch<Row>): Promise<void> {
    group.running++;
    try {
      const rows = await options.readMany(name, [...batch.keys()]);
      const found = new Map<string, Row>();
      for (const row of rows) found.set(options.keyOf(row), row);
      for (const [key, waiters] of batch) {
        const row = found.get(key);
        for (const waiter of waiters) waiter.resolve(row);
      }
    } catch (error) {
      for (const waiters of batch.values()) for (const waiter of waiters) waiter.reject(error);
    } finally {
      group.running--;
      const next = group.waiting.shift();
      if (next !== undefined) void send(name, group, next);
      else if (group.running === 0) groups.delete(name);
    }
  }

  return {
    read(name, key) {
      return new Promise<Row | undefined>((resolve, reject) => {
        const waiter = { resolve, reject };
        let group = groups.get(name);
        if (group === undefined) {
          group = { running: 0, waiting: [] };
          groups.set(name, group);
        }
        if (group.running < options.maxInFlight && group.waiting.length === 0) {
          void send(name, group, new Map([[key, [waiter]]]));
          return;
        }
        const last = group.waiting.at(-1);
        const readers = last?.get(key);
        if (readers !== undefined) readers.push(waiter);
        else if (last !== undefined && last.size < options.maxKeys) last.set(key, [waiter]);
        else group.waiting.push(new Map([[key, [waiter]]]));
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
  options: CoalesceOptions,
): PointReads<Row> {
  return coalescePointReads<Row>({
    async readMany(group, keys) {
      const { one, many } = statements(group);
      const query = keys.length === 1 ? CompiledQuery.raw(one, keys) : CompiledQuery.raw(many, [keys]);
      return (await db.executeQuery(query as CompiledQuery<Row>)).rows;
    },
    keyOf,
    ...options,
  });
}
