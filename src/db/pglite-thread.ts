// PGlite in a worker thread of its own. The embedded database is WebAssembly that runs to the end
// of each statement on the thread that calls it; in the server's thread every query stopped HTTP
// for its whole length (a slow report froze the API), and the database and the API shared one
// core. In a worker, the API serves requests while the database works on the other core.
//
// PGlite is one session. The worker runs the statements it is sent in the order they arrive, but
// while a transaction is open only that transaction's statements run: the others wait in the
// queue, so two transactions never interleave and no statement lands inside another's transaction.
// Statements outside a transaction are sent as soon as they are asked for: the worker has the next
// one before it finishes the current one, and never sits idle waiting for the API's thread.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

export interface ThreadResult {
  rows: unknown[];
  affectedRows?: number;
}

/** How a statement bears on the session: 0 outside a transaction, else its transaction's number. */
export interface Statement {
  sql: string;
  params: readonly unknown[];
  session: number;
  /** `begin`: the session is this transaction's once it succeeds. */
  opens?: boolean;
  /** `commit` / `rollback`: the session is free again, whatever the outcome. */
  closes?: boolean;
}

// Plain JavaScript, evaluated as the worker (the server runs compiled, tests run TypeScript; a
// string runs the same under both). Errors travel as plain objects: a structured clone of an
// Error keeps its message but drops PostgreSQL's fields (`code`, `detail`, `constraint`...).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
function plain(error) {
  const out = { message: String(error && error.message || error), name: (error && error.name) || 'Error' };
  if (error && typeof error === 'object') {
    for (const [key, value] of Object.entries(error)) {
      if (typeof value === 'string' || typeof value === 'number') out[key] = value;
    }
  }
  return out;
}
import(workerData.module).then(async ({ PGlite }) => {
  let pglite;
  try {
    pglite = workerData.dir ? new PGlite(workerData.dir, workerData.options) : new PGlite(workerData.options);
    await pglite.waitReady;
  } catch (error) {
    parentPort.postMessage({ ready: false, error: plain(error) });
    return;
  }
  if (workerData.initOnly) {
    await pglite.close();
    parentPort.postMessage({ ready: true });
    return;
  }
  const queue = [];
  let owner = 0; // the transaction holding the session; 0: none
  let running = false;
  let closing = null;
  // The first waiting statement that may run now: any when the session is free, else the owner's.
  function next() {
    const at = owner === 0 ? 0 : queue.findIndex((m) => m.session === owner);
    return at < 0 || at >= queue.length ? undefined : queue.splice(at, 1)[0];
  }
  async function drain() {
    running = true;
    for (let m = next(); m !== undefined; m = next()) {
      if (m.release) {
        // A transaction given back without commit or rollback: end it, free the session.
        if (owner === m.session) {
          owner = 0;
          await pglite.query('rollback').catch(() => {});
        }
        continue;
      }
      try {
        const result = await pglite.query(m.sql, m.params, { rowMode: 'object' });
        if (m.opens) owner = m.session;
        if (m.closes) owner = 0;
        parentPort.postMessage({ id: m.id, rows: result.rows, affectedRows: result.affectedRows });
      } catch (error) {
        if (m.closes) {
          owner = 0;
          await pglite.query('rollback').catch(() => {});
        }
        parentPort.postMessage({ id: m.id, error: plain(error) });
      }
    }
    running = false;
    if (closing && queue.length === 0) closing();
  }
  parentPort.on('message', (m) => {
    if (m.close) {
      const finish = () => pglite.close().then(() => parentPort.close(), () => parentPort.close());
      if (running || queue.length > 0) closing = finish;
      else finish();
      return;
    }
    queue.push(m);
    if (!running) drain();
  });
  parentPort.postMessage({ ready: true });
});
`;

interface Pending {
  resolve(result: ThreadResult): void;
  reject(error: Error): void;
}

type Reply =
  | { id: number; rows: unknown[]; affectedRows?: number; error?: undefined }
  | { id: number; error: Record<string, unknown> & { message: string } }
  | { ready: boolean; error?: Record<string, unknown> & { message: string } };

const revive = (error: Record<string, unknown> & { message: string }) => Object.assign(new Error(error.message), error);

function startWorker(workerData: Record<string, unknown>): Promise<Worker> {
  const module = pathToFileURL(createRequire(import.meta.url).resolve('@electric-sql/pglite')).href;
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { module, ...workerData } });
  return new Promise((resolve, reject) => {
    const failed = (error: Error) => reject(error);
    const exited = (code: number) => reject(new Error(`the database thread exited with ${code} while starting`));
    worker.once('error', failed);
    worker.once('exit', exited);
    worker.once('message', (reply: Reply) => {
      worker.off('error', failed);
      worker.off('exit', exited);
      if ('ready' in reply && reply.ready) resolve(worker);
      else reject(revive(reply.error ?? { message: 'the database thread did not start' }));
    });
  });
}

/**
 * Creates a PGlite data directory (initdb) in a worker of its own that then ends. initdb takes
 * some 500 MB of WebAssembly memory, which WebAssembly never gives back while its thread lives.
 */
export async function createDataDir(dir: string, options: object): Promise<void> {
  const worker = await startWorker({ dir, options, initOnly: true });
  await new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb thread exited with ${code}`))));
  });
}

/** PGlite running in its own thread (files under `dir`, or in memory). */
export class PGliteThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #nextSession = 1;
  #failure: Error | undefined;
  #closed: Promise<void> | undefined;

  private constructor(worker: Worker) {
    this.#worker = worker;
    // The thread keeps the process alive only while a statement is out: an idle database does not
    // hold a finished CLI command or test open.
    worker.unref();
    worker.on('message', (reply: Reply) => {
      if (!('id' in reply)) return;
      const pending = this.#pending.get(reply.id);
      if (!pending) return;
      this.#pending.delete(reply.id);
      if (this.#pending.size === 0) worker.unref();
      if (reply.error) pending.reject(revive(reply.error));
      else
        pending.resolve({
          rows: reply.rows,
          ...(reply.affectedRows !== undefined ? { affectedRows: reply.affectedRows } : {}),
        });
    });
    const fail = (error: Error) => {
      this.#failure ??= error;
      for (const pending of this.#pending.values()) pending.reject(this.#failure);
      this.#pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the database thread exited (code ${code})`)));
  }

  static async open(dir: string | undefined, options: object): Promise<PGliteThread> {
    return new PGliteThread(await startWorker({ dir, options }));
  }

  /** A number for a new transaction's statements. */
  newSession(): number {
    return this.#nextSession++;
  }

  query(statement: Statement): Promise<ThreadResult> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, ...statement });
    });
  }

  /** Frees the session of a transaction that ended without commit or rollback. */
  release(session: number): void {
    if (!this.#failure) this.#worker.postMessage({ release: true, session });
  }

  get closed(): boolean {
    return this.#closed !== undefined || this.#failure !== undefined;
  }

  /** Closes the database once the statements already sent have run, and ends the thread. */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      if (this.#worker.threadId < 0 || this.#failure) return resolve();
      this.#worker.ref();
      this.#worker.once('exit', () => resolve());
      this.#worker.postMessage({ close: true });
    });
    return this.#closed;
  }
}
