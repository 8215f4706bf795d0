// The database layer's one door (docs/database.md): the database and its opening, its schema's
// types, the migrations, what its errors mean, its outages, heavy queries and coalesced
// statements. How a statement reaches the database (the pool, prepared statements, PGlite's
// thread) stays inside.

export {
  type DatabaseHandle,
  type DatabaseOptions,
  DatabaseStartError,
  type Db,
  openDatabase,
  openDatabaseAtStart,
} from './client.js';
export {
  type Coalesced,
  type CoalesceOptions,
  coalesce,
  coalescedStatements,
  coalescePointReads,
  type Outcome,
  type PointReads,
} from './coalesce.js';
export {
  isDatabaseUnreachable,
  isDataRefusal,
  isForeignKeyViolation,
  isInputRejected,
  isQueryCanceled,
  isUniqueViolation,
} from './errors.js';
export {
  createFairSlots,
  createHeavyQueries,
  type HeavyQueries,
  type HeavyQueryLimits,
  type TimeLimit,
} from './heavy-queries.js';
export { migrateToLatest } from './migrate.js';
export { type DatabaseOutages, reportDatabaseOutages } from './outage.js';
export type * from './schema.js';
