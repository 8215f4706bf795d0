// Work coalesced while the database is busy with it. An item (a point read, a comment to write) is
// sent at once, in a statement of its own, when none of its group's statements runs; when some run
// but fewer than `maxInFlight`, it goes at the end of the event loop's turn, in one statement with
// the items of its group that arrive in that turn; otherwise it waits, with the other items of that
// group that arrive meanwhile, and they go as one statement for all of them when a running one
// returns. A lone item waits for nothing; under load, the items that pile up behind a running
// statement share one round trip, one statement execution, one commit and one pooled connection,
// where each would have taken its own.
// On the row read and the comment write this is most of the database's work and of the driver's
// (bench/README.md).
//
// The items of one batch finish together, when their statement's whole answer has arrived:
// `maxItems` bounds how many that is. A statement that fails fails every item of its batch, each
// of which sees the error as it would have seen its own statement's, unless the caller's statement
// settles its items one by one (`Outcome`).
//
// Written here rather than taken from `dataloader`, which batches every item by turn of the event
// loop: it would hold a lone item until the turn ends even when the database is idle, and never
// wait for a running statement to gather the items behind it.

import { CompiledQuery, type QueryResult } from 'kysely';

/**
 * `DATABASE_COALESCING=off` sends every item in a statement of its own, as soon as it comes: what
 * the coalescing buys is measured against that (bench/database.ts). Read once, at start.
 */
const COALESCING = process.env.DATABASE_COALESCING !== 'off';

/** What one item of a batch came to. */
export type Outcome<Result> = { ok: true; value: Result } | { ok: false; error: unknown };

type Waiter<Result> = { resolve(result: Result): void; reject(error: unknown): void };

/** The items waiting for the same statement, each with who waits for it. */
interface Batch<Item, Result> {
  entries: { item: Item; waiter: Waiter<Result> }[];
  /** Sends it beside the running statements when it has waited `maxWaitMs`. */
  timer?: NodeJS.Timeout;
  /** Its `maxWaitMs` passed while twice `maxInFlight` ran: it goes as soon as fewer do. */
  due?: boolean;
}

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
  /**
   * A batch that has waited this long is sent beside the running statements, while fewer than
   * twice `maxInFlight` run: a statement held up (waiting on a lock, say) then holds up the items
   * behind it no longer than this. Unset: they wait for it.
   */
  maxWaitMs?: number;
}

export interface Coalesced<Item, Result> {
  /** What `item` of `group` comes to, from a statement of its own or one shared with others. */
  run(group: string, item: Item): Promise<Result>;
}

/** A coalescer: how it runs a batch, and its groups by name. */
interface Coalescer<Item, Result> {
  options: CoalesceOptions & {
    /** One statement for these items of `group`: what each came to, in their order. */
    runMany(group: string, items: Item[]): Promise<Outcome<Result>[]>;
  };
  groups: Map<string, Group<Item, Result>>;
}

type Entry<Item, Result> = Batch<Item, Result>['entries'][number];

export function coalesce<Item, Result>(options: Coalescer<Item, Result>['options']): Coalesced<Item, Result> {
  const coalescer: Coalescer<Item, Result> = { options, groups: new Map() };
  return {
    run: (name, item) =>
      new Promise<Result>((resolve, reject) => enqueue(coalescer, name, { item, waiter: { resolve, reject } })),
  };
}

/** Sends `entry` at once, with the items of this turn, or into the batch waiting last. */
function enqueue<Item, Result>(coalescer: Coalescer<Item, Result>, name: string, entry: Entry<Item, Result>): void {
  const { options, groups } = coalescer;
  let group = groups.get(name);
  if (group === undefined) {
    group = { running: 0, waiting: [] };
    groups.set(name, group);
  }
  if (!COALESCING) {
    void send(coalescer, name, group, { entries: [entry] });
    return;
  }
  if (group.running < options.maxInFlight && group.waiting.length === 0) {
    if (group.running === 0) {
      void send(coalescer, name, group, { entries: [entry] });
      return;
    }
    // A statement runs already: the items that arrive in this turn of the event loop (under
    // load, the requests its answers let go, read off their sockets together) share the next
    // one, rather than the first of them going alone and the rest waiting behind it.
    const batch: Batch<Item, Result> = { entries: [entry] };
    group.waiting.push(batch);
    setImmediate(() => {
      // Sent already if a statement ended meanwhile (send's finally takes the first waiting).
      if (group.waiting[0] !== batch || group.running >= options.maxInFlight) return;
      group.waiting.shift();
      void send(coalescer, name, group, batch);
    });
    return;
  }
  const last = group.waiting.at(-1);
  if (last !== undefined && last.entries.length < options.maxItems) last.entries.push(entry);
  else wait(coalescer, name, group, { entries: [entry] });
}

async function send<Item, Result>(
  coalescer: Coalescer<Item, Result>,
  name: string,
  group: Group<Item, Result>,
  batch: Batch<Item, Result>,
): Promise<void> {
  const { options, groups } = coalescer;
  clearTimeout(batch.timer);
  group.running++;
  try {
    const outcomes = await options.runMany(
      name,
      batch.entries.map((entry) => entry.item),
    );
    batch.entries.forEach(({ waiter }, i) => {
      const outcome = outcomes[i];
      if (outcome === undefined) waiter.reject(new Error('a coalesced statement answered fewer items than asked'));
      else if (outcome.ok) waiter.resolve(outcome.value);
      else waiter.reject(outcome.error);
    });
  } catch (error) {
    for (const { waiter } of batch.entries) waiter.reject(error);
  } finally {
    group.running--;
    // Beyond maxInFlight only while batches sent after maxWaitMs run: the next waits for room,
    // unless it has waited maxWaitMs already (timers fire in order: the first is the oldest).
    const room =
      group.running < options.maxInFlight ||
      (group.waiting[0]?.due === true && group.running < 2 * options.maxInFlight);
    const next = room ? group.waiting.shift() : undefined;
    if (next !== undefined) void send(coalescer, name, group, next);
    else if (group.running === 0 && group.waiting.length === 0) groups.delete(name);
  }
}

/** A new batch waiting in `group`, sent after `maxWaitMs` if still waiting then. */
function wait<Item, Result>(
  coalescer: Coalescer<Item, Result>,
  name: string,
  group: Group<Item, Result>,
  batch: Batch<Item, Result>,
): void {
  const { options } = coalescer;
  group.waiting.push(batch);
  if (options.maxWaitMs === undefined) return;
  batch.timer = setTimeout(() => {
    const at = group.waiting.indexOf(batch);
    // At twice maxInFlight it is due: the next statement to end sends it (send's finally).
    if (at === -1) return;
    if (group.running >= 2 * options.maxInFlight) {
      batch.due = true;
      return;
    }
    group.waiting.splice(at, 1);
    void send(coalescer, name, group, batch);
  }, options.maxWaitMs);
  batch.timer.unref();
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
