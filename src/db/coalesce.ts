// Work coalesced while the database is busy with it. An item (a point read, a comment to write) is
// sent at once, in a statement of its own, when fewer than `maxInFlight` statements of its group
// are running; otherwise it waits, with the other items of that group that arrive meanwhile, and
// they go as one statement for all of them when a running one returns. A lone item waits for
// nothing; under load, the items that pile up behind a running statement share one round trip, one
// statement execution, one commit and one pooled connection, where each would have taken its own.
// On the row read and the comment write this is most of the database's work and of the driver's
// (bench/README.md).
//
// The items of one batch finish together, when their statement's whole answer has arrived:
// `maxItems` bounds how many that is. A statement that fails fails every item of its batch, each
// of which sees the error as it would have seen its own statement's, unless the caller's statement
// settles its items one by one (`Outcome`).
//
// Written here rather than taken from `dataloader`, which batches by turn of the event loop: it
// would hold a lone item until the turn ends, and send a turn's items as one statement even when
// the database is idle and could run them side by side.

import { CompiledQuery, type QueryResult } from 'kysely';

/** What one item of a batch came to. */
export type Outcome<Result> = { ok: true; value: Result } | { ok: false; error: unknown };

type Waiter<Result> = { resolve(result: Result): void; reject(error: unknown): void };

/** The items waiting for the same statement, each with who waits for it. */
type Batch<Item, Result> = { item: Item; waiter: Waiter<Result> }[];

/** A group's statements running, and its batches waiting in order (the last one still filling). */
interface Group<Item, Result> {
  running: number;
  waiting: Batch<Item, Result>[];
}

export interface CoalesceOptions {
  /** Statements of one group running at once; the items beyond them wait and are coalesced. */
  maxInFlight: number;
  /** Items in one statement at most. */
  maxItems: number;
}

export interface Coalesced<Item, Result> {
  /** What `item` of `group` comes to, from a statement of its own or one shared with others. */
  run(group: string, item: Item): Promise<Result>;
}

export function coalesce<Item, Result>(
  options: CoalesceOptions & {
    /** One statement for these items of `group`: what each came to, in their order. */
    runMany(group: string, items: Item[]): Promise<Outcome<Result>[]>;
  },
): Coalesced<Item, Result> {
  const groups = new Map<string, Group<Item, Result>>();

  async function send(name: string, group: Group<Item, Result>, batch: Batch<Item, Result>): Promise<void> {
    group.running++;
    try {
      const outcomes = await options.runMany(
        name,
        batch.map((entry) => entry.item),
      );
      batch.forEach(({ waiter }, i) => {
        const outcome = outcomes[i];
        if (outcome === undefined) waiter.reject(new Error('a coalesced statement answered fewer items than asked'));
        else if (outcome.ok) waiter.resolve(outcome.value);
        else waiter.reject(outcome.error);
      });
    } catch (error) {
      for (const { waiter } of batch) waiter.reject(error);
    } finally {
      group.running--;
      const next = group.waiting.shift();
      if (next !== undefined) void send(name, group, next);
      else if (group.running === 0) groups.delete(name);
    }
  }

  return {
    run(name, item) {
      return new Promise<Result>((resolve, reject) => {
        const entry = { item, waiter: { resolve, reject } };
        let group = groups.get(name);
        if (group === undefined) {
          group = { running: 0, waiting: [] };
          groups.set(name, group);
        }
        if (group.running < options.maxInFlight && group.waiting.length === 0) {
          void send(name, group, [entry]);
          return;
        }
        const last = group.waiting.at(-1);
        if (last !== undefined && last.length < options.maxItems) last.push(entry);
        else group.waiting.push([entry]);
      });
    },
  };
}

export interface PointReads<Row> {
  /** The row of `group` whose key is `key`, or undefined. */
  read(group: string, key: string): Promise<Row | undefined>;
}

/**
 * Point reads by key, coalesced. A key read twice in one batch is asked once; every read of it gets
 * the row, or undefined when the statement returned none.
 */
export function coalescePointReads<Row>(
  options: CoalesceOptions & {
    /** One statement for these distinct keys of `group`: the rows found, in any order. */
    readMany(group: string, keys: string[]): Promise<Row[]>;
    /** A row's key, as the reads name it. */
    keyOf(row: Row): string;
  },
): PointReads<Row> {
  const reads = coalesce<string, Row | undefined>({
    ...options,
    async runMany(group, keys) {
      const rows = await options.readMany(group, [...new Set(keys)]);
      const found = new Map<string, Row>();
      for (const row of rows) found.set(options.keyOf(row), row);
      return keys.map((key) => ({ ok: true, value: found.get(key) }));
    },
  });
  return { read: (group, key) => reads.run(group, key) };
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
