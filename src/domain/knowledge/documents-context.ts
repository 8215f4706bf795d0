// What every document operation works with: the database, the search runner, and the hook told of
// documents whose passages changed, in the transaction that changed them.
import type { Transaction } from 'kysely';
import type { Database, Db } from '../../db/index.js';
import type { PassagesWritten } from './embeddings/index.js';
import type { SearchRunner } from './text-search.js';

export type Executor = Db | Transaction<Database>;

export interface DocumentContext {
  db: Db;
  search: SearchRunner;
  /** Tells the passages hook, in `executor`'s transaction, of documents whose passages changed. */
  written(executor: Executor, tenantId: string, documentIds: string[]): Promise<void>;
  /** `write` in a transaction when something must be told of it in the same one. */
  writing<T>(write: (executor: Executor) => Promise<T>): Promise<T>;
}

export function documentContext(db: Db, search: SearchRunner, passagesWritten?: PassagesWritten): DocumentContext {
  return {
    db,
    search,
    written: (executor, tenantId, documentIds) =>
      passagesWritten && documentIds.length > 0 ? passagesWritten(executor, tenantId, documentIds) : Promise.resolve(),
    writing: (write) => (passagesWritten ? db.transaction().execute(write) : write(db)),
  };
}
