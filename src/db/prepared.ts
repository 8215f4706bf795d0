// Prepared statements on PostgreSQL. Kysely hands pg every query as text and parameters, which pg
// sends as an unnamed statement: PostgreSQL parses, analyses and plans it again on every call. On
// a point read that is more than half of the database's work (docs/database.md). Here each pooled
// connection prepares a parameterised statement under a name the first time it sees its text, and
// later calls only bind and execute it. A connection keeps at most `max` statements and
// deallocates the least recently used quarter when full, so statements whose text varies
// (multi-row inserts, a source's own table) cannot grow a session without bound.
//
// A named statement's result cannot change shape while it lives: PostgreSQL refuses to run it
// once its tables have changed ("cached plan must not change result type", below), and it is then
// prepared afresh under a new name.
import pg from 'pg';

/** pg's connection (lib/connection.js), as far as deallocating uses it. */
interface WireConnection {
  parsedStatements: Record<string, string>;
}

/** The parts of pg's Query (lib/query.js) used here; they are not in its type declarations. */
interface PgQuery {
  name?: string;
  callback: (error: Error | null, result: pg.QueryResult) => void;
}

const PgQuery = pg.Query as unknown as new (text: string, values: unknown[]) => PgQuery;

/** Longer texts (large batch inserts) are rarely repeated: they go unnamed, as before. */
const MAX_TEXT = 4096;

/** PostgreSQL's answer when a table behind a prepared `select *` or `returning *` changed shape. */
function isPlanChanged(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as { code?: unknown }).code === '0A000' &&
    String((error as { message?: unknown }).message).includes('cached plan must not change result type')
  );
}

interface Statement {
  name: string;
  used: number;
}

let counter = 0;

/** Makes `client.query(text, values)` run `text` as a named statement of this connection. */
export function prepareStatements(client: pg.ClientBase, max = 200): void {
  const plain = client.query.bind(client) as (...args: unknown[]) => unknown;
  // text → its name and when it was last used; the least recently used goes when the map is full.
  const names = new Map<string, Statement>();
  let tick = 0;

  const run = (text: string, values: unknown[], statement?: Statement) =>
    new Promise<pg.QueryResult>((resolve, reject) => {
      // A Query made from text and values, named afterwards: pg copies a config object property
      // by property, which cost more than the rest of this module.
      const query = new PgQuery(text, values);
      if (statement !== undefined) query.name = statement.name;
      query.callback = (error, result) => (error ? reject(error) : resolve(result));
      plain(query);
    });

  /** Deallocates statements in one round trip and forgets their texts. */
  const deallocate = (texts: string[]) => {
    const gone: string[] = [];
    for (const text of texts) {
      const entry = names.get(text);
      if (entry === undefined) continue;
      names.delete(text);
      gone.push(entry.name);
    }
    if (gone.length === 0) return;
    // After a failed statement inside a transaction the session refuses everything until the
    // rollback, so this can fail: the names are then left prepared, unused, until the session ends.
    run(gone.map((name) => `deallocate ${name}`).join('; '), []).then(
      () => {
        const parsed = (client as unknown as { connection: WireConnection }).connection.parsedStatements;
        for (const name of gone) delete parsed[name];
      },
      () => {},
    );
  };

  const statementFor = (text: string): Statement => {
    const entry = names.get(text);
    if (entry !== undefined) {
      entry.used = ++tick;
      return entry;
    }
    if (names.size >= max) {
      // The least recently used quarter goes at once: one scan and one round trip serve many
      // new statements when many texts are in use (a source's table each, say).
      const byAge = [...names].sort((a, b) => a[1].used - b[1].used);
      deallocate(byAge.slice(0, Math.max(1, Math.floor(max / 4))).map(([key]) => key));
    }
    const statement: Statement = { name: `ws_${(++counter).toString(36)}`, used: ++tick };
    names.set(text, statement);
    return statement;
  };

  const prepared = async (text: string, values: unknown[]): Promise<pg.QueryResult> => {
    const outsideTransaction = client.getTransactionStatus() === 'I';
    try {
      return await run(text, values, statementFor(text));
    } catch (error) {
      if (!isPlanChanged(error)) throw error;
      deallocate([text]);
      // Outside a transaction nothing was done: prepare afresh against the table as it is now.
      if (!outsideTransaction) throw error;
      return run(text, values, statementFor(text));
    }
  };

  client.query = ((config: unknown, values?: unknown, callback?: unknown) => {
    if (
      typeof config === 'string' &&
      Array.isArray(values) &&
      values.length > 0 &&
      callback === undefined &&
      config.length <= MAX_TEXT
    ) {
      return prepared(config, values);
    }
    return plain(config, values, callback);
  }) as typeof client.query;
}
