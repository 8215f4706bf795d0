// Vitest's global setup, once per run on the embedded database: a database made and migrated,
// whose files every test app's database then starts from (helpers.ts, startTestApp), rather than
// each running initdb and every migration again (4 to 7 s an app on a 2-core machine; 82 apps).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A file holding the migrated template's files (PGliteThread.dump); absent on PostgreSQL runs. */
    pgliteTemplate?: string;
  }
}

export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  if (process.env.TEST_DATABASE_URL) return undefined;
  const database = await openDatabase({});
  let bytes: Uint8Array;
  try {
    await migrateToLatest(database.db);
    bytes = await (database.dump as () => Promise<Uint8Array>)();
  } finally {
    await database.close();
  }
  const folder = mkdtempSync(path.join(os.tmpdir(), 'ws-template-'));
  const file = path.join(folder, 'pgdata.tar');
  writeFileSync(file, bytes);
  project.provide('pgliteTemplate', file);
  return () => rmSync(folder, { recursive: true, force: true });
}
