// The database layer in the metrics and traces: the pool's clients counted at scrape time, and,
// with tracing on when the database is opened, a client span per statement run where an ambient
// span is kept (a job's run, an agent turn; every request with TRACE_DATABASE_STATEMENTS): its SQL text, which
// holds placeholders, never the values. Off, the dialect is Kysely's own, untouched.
import { SpanKind } from '@opentelemetry/api';
import type { CompiledQuery, DatabaseConnection, Dialect, Driver } from 'kysely';
import type pg from 'pg';
import { type DatabaseKind, watchPool } from './scrape-gauges.js';
import { ambientSpan, tracingEnabled, withSpan } from './tracing.js';

/** Characters of a statement's text kept on its span. */
const STATEMENT_TEXT_MAX = 2_000;

function traceStatements(connection: DatabaseConnection, system: string): DatabaseConnection {
  const execute = connection.executeQuery.bind(connection);
  connection.executeQuery = <R>(query: CompiledQuery) => {
    const parent = ambientSpan();
    if (parent === undefined) return execute<R>(query);
    const text = query.sql;
    const verb = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? 'SQL';
    return withSpan(
      `db ${verb}`,
      {
        'db.system.name': system,
        'db.operation.name': verb,
        'db.query.text': text.length > STATEMENT_TEXT_MAX ? `${text.slice(0, STATEMENT_TEXT_MAX)}…` : text,
      },
      () => execute<R>(query),
      { kind: SpanKind.CLIENT, parent },
    );
  };
  return connection;
}

/** The driver, its connections' statements traced (each connection patched once, when first handed out). */
function tracedDriver(driver: Driver, system: string): Driver {
  const traced = new WeakSet<DatabaseConnection>();
  const acquire = driver.acquireConnection.bind(driver);
  driver.acquireConnection = async () => {
    const connection = await acquire();
    if (!traced.has(connection)) {
      traced.add(connection);
      traceStatements(connection, system);
    }
    return connection;
  };
  return driver;
}

/** `dialect` over `pool`, observed: the pool's gauges, and statement spans when tracing is on. */
export function observedDialect(dialect: Dialect, pool: pg.Pool, kind: DatabaseKind): Dialect {
  watchPool(pool, kind);
  if (!tracingEnabled()) return dialect;
  const createDriver = dialect.createDriver.bind(dialect);
  // PGlite speaks PostgreSQL's protocol (src/db/pglite-thread.ts): the same system to a tracer.
  dialect.createDriver = () => tracedDriver(createDriver(), 'postgresql');
  return dialect;
}
