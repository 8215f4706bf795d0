// Prepared statements on PostgreSQL. Kysely hands pg every query as text and parameters, which pg
// sends as an unnamed statement: PostgreSQL parses, analyses and plans it again on every call. On
// a point read that is more than half of the database's work (bench/README.md). Here each pooled
// connection prepares a parameterised statement under a name the first time it sees its text, and
// later calls only bind and execute it. A connection keeps at most `max` statements and
// deallocates the least recently used quarter when full, so statements whose text varies
// (multi-row inserts, a source's own table) cannot grow a session without bound.
import pg from 'pg';

const PgQuery = pg.Query;

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

interface Connection {
  parsedStatements: Record<string, string>;
}

let counter = 0;

/** Makes `client.query(text, values)` run `text` as a named statement of this connection. */
export function prepareStatements(client: pg.ClientBase, max = 200): void {
  const plain = client.query.bind(client) as (...args: unknown[]) => unknown;
  // text → its name and when it was last used; the least recently used goes when the map is full.
  const names = new Map<string, { name: string; used: number }>();
  let tick = 0;

  const run = (text: string, values: unknown[], name?: string) =>
    new Promise<pg.QueryResult>((resolve, reject) => {
      // A Query made from text and values, named afterwards: pg copies a config object property
      // by property, which cost more than the rest of this module.
      const query = new PgQuery(text, values) as pg.Query & { name?: string };
      if (name !== undefined) query.name = name;
      (query as unknown as { callback: (error: Error | null, result: pg.QueryResult) => void }).callback = (
        error,
        result,
      ) => (error ? reject(error) : resolve(result));
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
        const parsed = (client as unknown as { connection: Connection }).connection.parsedStatements;
        for (const name of gone) delete parsed[name];
      },
      () => {},
    );
  };

  const nameFor = (text: string) => {
    const entry = names.get(text);
    if (entry !== undefined) {
      entry.used = ++tick;
      return entry.name;
    }
    if (names.size >= max) {
      // The least recently used quarter goes at once: one scan and one round trip serve many
      // new statements when many texts are in use (a source's table each, say).
      const byAge = [...names].sort((a, b) => a[1].used - b[1].used);
      deallocate(byAge.slice(0, Math.max(1, Math.floor(max / 4))).map(([key]) => key));
    }
    const name = `ws_${(++counter).toString(36)}`;
    names.set(text, { name, used: ++tick });
    return name;
  };

  const prepared = async (text: string, values: unknown[]): Promise<pg.QueryResult> => {
    const outsideTransaction = client.getTransactionStatus() === 'I';
    try {
      return await run(text, values, nameFor(text));
    } catch (error) {
      if (!isPlanChanged(error)) throw error;
      deallocate([text]);
      // Outside a transaction nothing was done: prepare afresh against the table as it is now.
      if (!outsideTransaction) throw error;
      return run(text, values, nameFor(text));
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
