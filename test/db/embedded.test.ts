// The embedded database (src/db/pglite-thread.ts): PGlite in a thread of its own, reached by
// node-postgres. Transactions never interleave on its one session, a client that goes away inside
// a transaction gives the session back, and a long statement does not stop HTTP.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, PGLITE_OPTIONS } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createDataDir, PGliteThread } from '../../src/db/pglite-thread.js';
import { startTestApp, type TestApp, usingPostgres } from '../helpers.js';

let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(() => t.close());

describe('database handle', () => {
  it('a new PGlite data directory is created (initdb, in a process of its own) and opened again later', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-pgdata-'));
    try {
      const first = await openDatabase({ dataDir });
      expect(existsSync(path.join(dataDir, 'pgdata', 'PG_VERSION'))).toBe(true);
      await sql`create table kept (n int)`.execute(first.db);
      await sql`insert into kept values (7)`.execute(first.db);
      await first.close();
      const again = await openDatabase({ dataDir });
      const { rows } = await sql<{ n: number }>`select n from kept`.execute(again.db);
      expect(rows).toEqual([{ n: 7 }]);
      await again.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("a data directory is one process's: a second opening is refused until the first closes; a dead owner's lock is taken over, our own pid's too when another life of it left it", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-pgdata-'));
    try {
      const first = await openDatabase({ dataDir });
      // Another opening (a second server, `workspace migrate`) would write over the first one's files.
      await expect(openDatabase({ dataDir })).rejects.toThrow(
        new RegExp(`DATA_DIR .* is in use by process ${process.pid}`),
      );
      await first.close();
      expect(existsSync(path.join(dataDir, 'workspace.lock'))).toBe(false);
      // A lock left by a process that is gone (killed): taken over.
      const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
      writeFileSync(path.join(dataDir, 'workspace.lock'), `${gone}\n`);
      const again = await openDatabase({ dataDir });
      expect(readFileSync(path.join(dataDir, 'workspace.lock'), 'utf8')).toBe(`${process.pid}\n`);
      await again.close();
      // A lock naming our own pid that this process did not take: left by a killed process whose
      // pid this one was given again (a container's pid 1 at every start). Taken over.
      writeFileSync(path.join(dataDir, 'workspace.lock'), `${process.pid}\n`);
      const reborn = await openDatabase({ dataDir });
      await expect(openDatabase({ dataDir })).rejects.toThrow(/is in use by process/);
      await reborn.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a data directory that cannot be created fails with initdb’s reason', async () => {
    const parent = mkdtempSync(path.join(os.tmpdir(), 'ws-pgdata-'));
    try {
      const notADirectory = path.join(parent, 'file');
      writeFileSync(notADirectory, 'not a directory');
      await expect(createDataDir(path.join(notADirectory, 'pgdata'), PGLITE_OPTIONS)).rejects.toThrow(
        /creating the database in .*file\/pgdata failed \(exit 1\): .*\S/s,
      );
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it('initdb writes beside the data directory, which appears only once complete', async () => {
    const parent = mkdtempSync(path.join(os.tmpdir(), 'ws-pgdata-'));
    const dir = path.join(parent, 'pgdata');
    try {
      // What a start stopped during initdb left: its staging directory, and an empty `pgdata`.
      mkdirSync(path.join(`${dir}.initdb`, 'base'), { recursive: true });
      writeFileSync(path.join(`${dir}.initdb`, 'base', 'half-written'), 'x');
      mkdirSync(dir);
      const seen: string[][] = [];
      const watch = setInterval(() => {
        if (existsSync(dir)) seen.push(readdirSync(dir));
      }, 2);
      await createDataDir(dir, PGLITE_OPTIONS).finally(() => clearInterval(watch));
      // While initdb ran, `pgdata` stayed as it was (empty); then it came whole, PG_VERSION and all.
      const complete = readdirSync(dir).sort().join();
      expect(complete).toContain('PG_VERSION');
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.filter((entries) => entries.length > 0 && entries.sort().join() !== complete)).toEqual([]);
      expect(existsSync(path.join(dir, 'base', 'half-written'))).toBe(false);
      expect(existsSync(`${dir}.initdb`)).toBe(false);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it('a data directory holding files but no database is refused and left as it is', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-pgdata-'));
    try {
      mkdirSync(path.join(dataDir, 'pgdata'));
      writeFileSync(path.join(dataDir, 'pgdata', 'notes.txt'), 'not a database');
      await expect(openDatabase({ dataDir })).rejects.toThrow(/pgdata holds files but no database \(no PG_VERSION\)/);
      expect(readdirSync(path.join(dataDir, 'pgdata'))).toEqual(['notes.txt']);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it.skipIf(usingPostgres)(
    'PGlite runs with 16 MB of shared buffers (its memory), not PostgreSQL’s 128 MB',
    async () => {
      const { rows } = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(t.database.db);
      expect(rows[0]?.shared_buffers).toBe('16MB');
    },
  );

  it('a database migrated by a newer version is refused in one line naming what it holds, nothing changed', async () => {
    const future = '9999-from-a-newer-version';
    await sql`insert into kysely_migration (name, timestamp) values (${future}, ${new Date().toISOString()})`.execute(
      t.database.db,
    );
    try {
      const applied = () =>
        sql<{ name: string }>`select name from kysely_migration order by name`.execute(t.database.db);
      const before = (await applied()).rows;
      const refused = await migrateToLatest(t.database.db).catch((error: unknown) => error);
      expect(refused).toMatchObject({
        code: 'EDBNEWER',
        message: expect.stringContaining(`newer version of this server (migrations ${future})`),
      });
      expect((await applied()).rows).toEqual(before);
    } finally {
      await sql`delete from kysely_migration where name = ${future}`.execute(t.database.db);
    }
    expect(await migrateToLatest(t.database.db)).toEqual([]);
  });

  it('a long chain of queries (a background job) leaves room for HTTP requests', async () => {
    let chainDone = false;
    const chain = (async () => {
      for (let i = 0; i < 3000; i++) await sql`select ${i}::int as n`.execute(t.database.db);
      chainDone = true;
    })();
    await new Promise((r) => setTimeout(r, 20));
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(chainDone).toBe(false);
    await chain;
  });

  it('concurrent transactions do not see each other’s uncommitted writes', async () => {
    await sql`create table dialect_probe (n int)`.execute(t.database.db);
    const inside = t.database.db.transaction().execute(async (trx) => {
      await sql`insert into dialect_probe values (1)`.execute(trx);
      await new Promise((r) => setTimeout(r, 50));
      throw new Error('roll back');
    });
    const outside = sql<{ n: number }>`select count(*)::int as n from dialect_probe`.execute(t.database.db);
    await expect(inside).rejects.toThrow('roll back');
    expect((await outside).rows[0]?.n).toBe(0);
    expect(
      (await sql<{ n: number }>`select count(*)::int as n from dialect_probe`.execute(t.database.db)).rows[0]?.n,
    ).toBe(0);
  });

  it.skipIf(usingPostgres)(
    'a long statement runs in the database thread while HTTP requests are answered',
    async () => {
      const slow = sql<{ n: number }>`select count(*)::int as n from generate_series(1, 3000000)`.execute(
        t.database.db,
      );
      let slowDone = false;
      void slow.then(() => {
        slowDone = true;
      });
      await new Promise((r) => setTimeout(r, 20));
      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);
      // Answered while the statement was still running (it takes far longer than the probe).
      expect(slowDone).toBe(false);
      expect((await slow).rows[0]?.n).toBe(3_000_000);
    },
  );
});

describe.skipIf(usingPostgres)('the database thread', () => {
  let thread: PGliteThread;
  const clients: pg.Client[] = [];
  const connect = async () => {
    const client = new pg.Client({ stream: () => thread.connect() });
    client.on('error', () => {});
    await client.connect();
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    thread = await PGliteThread.open(undefined, PGLITE_OPTIONS);
    const setup = await connect();
    await setup.query('create table probe (n int primary key)');
  });
  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => {});
    await thread.close();
  });

  it("holds other clients' statements while a transaction is open, and runs them after it", async () => {
    const a = await connect();
    const b = await connect();
    await a.query('begin');
    await a.query('insert into probe values ($1)', [1]);
    let seen: number | undefined;
    const read = b.query<{ n: number }>('select count(*)::int as n from probe').then((r) => {
      seen = r.rows[0]?.n;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(seen).toBeUndefined(); // waiting: it must not run inside a's transaction
    await a.query('commit');
    await read;
    expect(seen).toBe(1);
  });

  it('gives the session back, rolled back, when a client goes away inside a transaction', async () => {
    const a = await connect();
    const b = await connect();
    await a.query('begin');
    await a.query('insert into probe values ($1)', [2]);
    const read = b.query<{ n: number }>('select count(*)::int as n from probe where n = 2');
    (a as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    expect((await read).rows[0]?.n).toBe(0);
    expect((await b.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
  });

  it("answers PostgreSQL's errors with their fields, and the client goes on", async () => {
    const a = await connect();
    await a.query('insert into probe values ($1)', [3]);
    const error = await a.query('insert into probe values ($1)', [3]).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: '23505', constraint: 'probe_pkey' });
    expect((await a.query('select count(*)::int as n from probe where n = 3')).rows).toEqual([{ n: 1 }]);
  });

  it('prepared statements run again without being parsed again', async () => {
    const a = await connect();
    for (let i = 0; i < 3; i++) {
      const { rows } = await a.query({ name: 'probe_read', text: 'select $1::int + 1 as m', values: [i] });
      expect(rows).toEqual([{ m: i + 1 }]);
    }
    const { rows } = await a.query<{ name: string }>('select name from pg_prepared_statements');
    expect(rows.map((r) => r.name)).toContain('probe_read');
  });

  it('deallocates the statements of a client that goes away (they live in the shared session)', async () => {
    const a = await connect();
    const b = await connect();
    await a.query({ name: 'probe_gone', text: 'select $1::int as m', values: [1] });
    await a.query({ name: 'probe_gone_2', text: 'select $1::text as m', values: ['x'] });
    const names = async () =>
      (await b.query<{ name: string }>('select name from pg_prepared_statements')).rows.map((r) => r.name);
    expect(await names()).toEqual(expect.arrayContaining(['probe_gone', 'probe_gone_2']));
    await a.end();
    expect(await names()).not.toContain('probe_gone');
    expect(await names()).not.toContain('probe_gone_2');
  });

  it('a copy (dump) waits for an open transaction to end, and a database started from it has what was committed, apart', async () => {
    const a = await connect();
    await a.query('insert into probe values ($1)', [10]);
    await a.query('begin');
    await a.query('insert into probe values ($1)', [11]);
    // Asked for inside a's transaction, before its commit is sent: taken only after the commit.
    const copy = thread.dump();
    await a.query('commit');
    const copied = await copy;
    const other = await PGliteThread.open(undefined, PGLITE_OPTIONS, copied);
    const client = new pg.Client({ stream: () => other.connect() });
    try {
      await client.connect();
      const rows = async (on: pg.Client) =>
        (await on.query<{ n: number }>('select n from probe where n >= 10 order by n')).rows.map((r) => r.n);
      expect(await rows(client)).toEqual([10, 11]);
      await client.query('insert into probe values ($1)', [12]);
      expect(await rows(client)).toEqual([10, 11, 12]);
      expect(await rows(a)).toEqual([10, 11]);
    } finally {
      await client.end();
      await other.close();
    }
  });
});
