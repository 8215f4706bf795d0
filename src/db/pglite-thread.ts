// PGlite in a worker thread of its own, reached by the same driver as PostgreSQL.
//
// The embedded database is WebAssembly that runs each statement to its end on the thread that
// calls it. In the server's thread every query stopped HTTP for its whole length (a slow report
// froze the API), and the database and the API shared one core. In a worker the API serves
// requests while the database works on the other core.
//
// The server talks to it as to PostgreSQL: node-postgres clients whose "socket" (ThreadSocket)
// carries the wire protocol to the worker, which hands it to PGlite (`execProtocolRawStream`) and
// sends back PostgreSQL's answer. So both databases get the same driver, type parsing, errors and
// prepared statements (prepared.ts), and a query costs one round trip to the worker.
//
// PGlite is one session; the pool's clients share it. The worker runs the batches it is sent
// (a client's messages up to Sync or a simple Query) in the order they arrive, except that once a
// client's batch leaves the session inside a transaction (ReadyForQuery 'T' or 'E') only that
// client's batches run until its transaction ends: transactions never interleave, and no statement
// lands in another client's transaction. The others wait in the worker's queue, so the worker has
// the next batch at hand as soon as it finishes one.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Duplex } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

// Plain JavaScript, evaluated as the worker (the server runs compiled, tests run TypeScript; a
// string runs the same under both).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const readInt32 = (bytes, at) => ((bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3]);
// A simple Query message, for the thread's own clean-up after a client that went away.
function simpleQuery(text) {
  const message = Buffer.concat([Buffer.from('Q'), Buffer.alloc(4), Buffer.from(text + '\\0')]);
  message.writeInt32BE(message.length - 1, 1);
  return message;
}
const describe = (error) => String((error && error.stack) || error);
import(workerData.module).then(async ({ PGlite }) => {
  let pglite;
  try {
    // A template's files in place of initdb's (PGliteThread.dump), not kept once read.
    const template = workerData.template;
    workerData.template = undefined;
    const options = template ? { ...workerData.options, loadDataDir: new Blob([template]) } : workerData.options;
    pglite = workerData.dir ? new PGlite(workerData.dir, options) : new PGlite(options);
    await pglite.waitReady;
  } catch (error) {
    parentPort.postMessage({ ready: false, error: describe(error) });
    return;
  }
  const queue = [];
  let owner = 0; // the client whose transaction holds the session; 0: none
  // The named statements each client prepared: they live in the shared session, so they are
  // deallocated when the client goes (a PostgreSQL backend would take them with it).
  const named = new Map();
  const DEALLOCATE = /\\bdeallocate\\s+(?:prepare\\s+)?"?([^";\\s]+)"?/gi;
  function noteStatements(client, bytes) {
    let names = named.get(client);
    if (names === undefined) named.set(client, (names = new Set()));
    for (let at = 0; at + 5 <= bytes.length; at += 1 + readInt32(bytes, at + 1)) {
      const type = bytes[at];
      const text = () => Buffer.from(bytes.buffer, bytes.byteOffset + at + 5, readInt32(bytes, at + 1) - 4).toString();
      if (type === 0x50 && bytes[at + 5] !== 0) {
        // Parse, with a name: the name up to its NUL.
        const body = text();
        names.add(body.slice(0, body.indexOf('\\0')));
      } else if (type === 0x51) {
        // A simple query deallocating statements (prepared.ts evicts so): they are gone already.
        for (const match of text().matchAll(DEALLOCATE)) names.delete(match[1]);
      }
    }
  }
  async function forget(client) {
    const names = named.get(client);
    named.delete(client);
    for (const name of names ?? []) await run(simpleQuery('DEALLOCATE "' + name.replace(/"/g, '""') + '"'));
  }
  // The first waiting batch that may run now: any while the session is free, else the owner's.
  function next() {
    const at = owner === 0 ? 0 : queue.findIndex((m) => m.client === owner);
    return at < 0 || at >= queue.length ? undefined : queue.splice(at, 1)[0];
  }
  // PostgreSQL's answer to a batch, as bytes. Through the streaming call: PGlite's plain raw call
  // also parses every answer in JavaScript and keeps the parsed messages (about 500 bytes a call,
  // never freed); this one hands over the bytes and keeps nothing.
  async function exchange(bytes) {
    const chunks = [];
    let size = 0;
    await pglite.execProtocolRawStream(bytes, {
      syncToFs: false,
      onRawData: (chunk) => {
        chunks.push(chunk.slice()); // a view of WebAssembly memory: copied
        size += chunk.length;
      },
    });
    if (chunks.length === 1) return chunks[0];
    const reply = new Uint8Array(size);
    let at = 0;
    for (const chunk of chunks) {
      reply.set(chunk, at);
      at += chunk.length;
    }
    return reply;
  }
  const run = (bytes) => exchange(bytes).catch(() => {});
  let draining = false;
  async function drain() {
    if (draining) return;
    draining = true;
    for (let m = next(); m !== undefined; m = next()) {
      if (m.dump) {
        // Checkpointed first, so that a database started from the copy has no WAL to replay.
        let bytes;
        try {
          await pglite.exec('CHECKPOINT');
          bytes = new Uint8Array(await (await pglite.dumpDataDir('none')).arrayBuffer());
        } catch (error) {
          parentPort.postMessage({ dump: true, error: describe(error) });
          continue;
        }
        parentPort.postMessage({ dump: true, bytes }, [bytes.buffer]);
        continue;
      }
      if (m.gone) {
        if (owner === m.client) {
          owner = 0;
          await run(simpleQuery('ROLLBACK'));
        }
        await forget(m.client);
        continue;
      }
      noteStatements(m.client, m.bytes);
      let reply;
      try {
        reply = await exchange(m.bytes);
      } catch (error) {
        parentPort.postMessage({ client: m.client, error: describe(error) });
        continue;
      }
      // A batch ends with ReadyForQuery ('Z', length 5, status): 'I' is outside a transaction.
      const n = reply.length;
      const idle = n >= 6 && reply[n - 6] === 0x5a && reply[n - 1] === 0x49;
      owner = idle ? 0 : m.client;
      parentPort.postMessage({ client: m.client, bytes: reply }, [reply.buffer]);
    }
    draining = false;
    if (closing) finish();
  }
  let closing = false;
  const finish = () => pglite.close().finally(() => parentPort.close());
  parentPort.on('message', (m) => {
    if (m.close) {
      closing = true;
      if (!draining) finish();
      return;
    }
    queue.push(m);
    drain();
  });
  parentPort.postMessage({ ready: true });
});
`;

type Reply =
  | { client: number; bytes?: Uint8Array; error?: string }
  | { ready: boolean; error?: string }
  | { dump: true; bytes?: Uint8Array<ArrayBuffer>; error?: string };

/** PGlite's module, as a URL the worker's and initdb's `import()` can load. */
const pgliteModule = () => pathToFileURL(createRequire(import.meta.url).resolve('@electric-sql/pglite')).href;

function startWorker(workerData: Record<string, unknown>): Promise<Worker> {
  const module = pgliteModule();
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
      else reject(new Error(`the database did not start: ${reply.error ?? 'no reason given'}`));
    });
  });
}

// initdb, as its own short-lived process: argv[1] is JSON [module, dir, options].
const INITDB_SOURCE = `
const [module, dir, options] = JSON.parse(process.argv[1]);
import(module)
  .then(async ({ PGlite }) => {
    const pglite = new PGlite(dir, options);
    await pglite.waitReady;
    await pglite.close();
  })
  .catch((error) => {
    console.error(String((error && error.stack) || error));
    process.exit(1);
  });
`;

/**
 * Creates a PGlite data directory (initdb) in a process of its own that then ends. initdb peaks at
 * some 670 MB; a thread of the server gave the WebAssembly memory back when it ended, but not the
 * C heap it had fragmented (an idle server on a new directory held 388 MB rather than 296 MB).
 *
 * initdb writes into `<dir>.initdb`, renamed to `dir` once complete, so a start stopped meanwhile
 * (a kill, a crash) leaves no half-made database at `dir` for the next start to open; the next
 * start removes what it left and begins again. A `dir` that holds files but no database is not
 * touched: it is refused, since those files are not this function's to remove.
 */
export async function createDataDir(dir: string, options: object): Promise<void> {
  if (existsSync(dir) && readdirSync(dir).length > 0) {
    throw new Error(`${dir} holds files but no database (no PG_VERSION): move them away, or set DATA_DIR elsewhere`);
  }
  const staging = `${dir}.initdb`;
  const removeStaging = () => existsSync(staging) && rmSync(staging, { recursive: true });
  removeStaging();
  const module = pgliteModule();
  // On V8's baseline compiler only, as the server runs (--liftoff-only): initdb is a short run of
  // much WebAssembly, which the optimising compiler would compile at more cost than it saves.
  const args = ['--liftoff-only', '-e', INITDB_SOURCE, JSON.stringify([module, staging, options])];
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) {
    removeStaging();
    throw new Error(`creating the database in ${dir} failed (exit ${code}): ${stderr.trim()}`);
  }
  // An empty `dir` (made by hand, or by a version that made it before initdb) gives way.
  if (existsSync(dir)) rmdirSync(dir);
  renameSync(staging, dir);
}

/** PGlite running in its own thread (files under `dir`, or in memory). */
export class PGliteThread {
  readonly #worker: Worker;
  readonly #sockets = new Map<number, ThreadSocket>();
  #nextClient = 1;
  /** Batches sent and not yet answered: the thread keeps the process alive only while any are. */
  #outstanding = 0;
  #failure: Error | undefined;
  #closed: Promise<void> | undefined;
  /** The dumps asked for and not yet answered, in the order asked (the thread answers in order). */
  readonly #dumps: { resolve: (bytes: Uint8Array<ArrayBuffer>) => void; reject: (error: Error) => void }[] = [];

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.unref();
    worker.on('message', (reply: Reply) => {
      if ('dump' in reply) {
        if (--this.#outstanding === 0) worker.unref();
        const dump = this.#dumps.shift();
        if (reply.bytes) dump?.resolve(reply.bytes);
        else dump?.reject(new Error(`the database could not be copied: ${reply.error}`));
        return;
      }
      if (!('client' in reply)) return;
      if (--this.#outstanding === 0) worker.unref();
      const socket = this.#sockets.get(reply.client);
      if (reply.bytes) socket?.receive(reply.bytes);
      else socket?.destroy(new Error(`the database failed: ${reply.error}`));
    });
    const fail = (error: Error) => {
      this.#failure ??= error;
      for (const socket of this.#sockets.values()) socket.destroy(this.#failure);
      for (const dump of this.#dumps.splice(0)) dump.reject(this.#failure);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the database thread exited (code ${code})`)));
  }

  /**
   * `template`, if given, is a database's files as `dump` answers them: the new database starts as
   * a copy of that one rather than from initdb (in memory, in about a third of initdb's time).
   */
  static async open(dir: string | undefined, options: object, template?: Uint8Array): Promise<PGliteThread> {
    return new PGliteThread(await startWorker({ dir, options, ...(template ? { template } : {}) }));
  }

  /**
   * The database's files as a tarball (PGlite's `dumpDataDir`, after a checkpoint), once the
   * batches sent before have run and no transaction is open: what `open` takes as a template.
   */
  dump(): Promise<Uint8Array<ArrayBuffer>> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#closed) return Promise.reject(new Error('the database is closed'));
    return new Promise((resolve, reject) => {
      this.#dumps.push({ resolve, reject });
      if (this.#outstanding++ === 0) this.#worker.ref();
      this.#worker.postMessage({ dump: true });
    });
  }

  /** A new connection to the database, for a node-postgres client (`stream` option). */
  connect(): ThreadSocket {
    const client = this.#nextClient++;
    const socket = new ThreadSocket({
      send: (bytes: Uint8Array<ArrayBuffer>) => {
        if (this.#failure) throw this.#failure;
        if (this.#outstanding++ === 0) this.#worker.ref();
        this.#worker.postMessage({ client, bytes }, [bytes.buffer]);
      },
      gone: () => {
        this.#sockets.delete(client);
        if (!this.#failure && !this.#closed) this.#worker.postMessage({ client, gone: true });
      },
    });
    this.#sockets.set(client, socket);
    return socket;
  }

  /** Closes the database once the batches already sent have run, and ends the thread. */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      if (this.#failure) return resolve();
      this.#worker.ref();
      this.#worker.once('exit', () => resolve());
      this.#worker.postMessage({ close: true });
    });
    return this.#closed;
  }
}

// What a freshly started PostgreSQL says to a client that needs no password. PGlite's session is
// up before any client arrives, so each client's startup is answered here.
const STARTUP_REPLY = (() => {
  const message = (type: string, body: Buffer) => {
    const head = Buffer.alloc(5);
    head.write(type, 0, 'latin1');
    head.writeInt32BE(body.length + 4, 1);
    return Buffer.concat([head, body]);
  };
  const int32s = (...values: number[]) => {
    const body = Buffer.alloc(values.length * 4);
    for (const [i, value] of values.entries()) body.writeInt32BE(value, i * 4);
    return body;
  };
  const parameter = (name: string, value: string) => message('S', Buffer.from(`${name}\0${value}\0`));
  return Buffer.concat([
    message('R', int32s(0)), // AuthenticationOk
    parameter('client_encoding', 'UTF8'),
    parameter('standard_conforming_strings', 'on'),
    parameter('integer_datetimes', 'on'),
    message('K', int32s(0, 0)), // BackendKeyData: nothing to cancel with
    message('Z', Buffer.from('I')), // ReadyForQuery, idle
  ]);
})();

// Frontend message types after which the client waits for the server: Sync, simple Query, Flush.
const SYNC = 0x53;
const QUERY = 0x51;
const FLUSH = 0x48;
const TERMINATE = 0x58;

/**
 * The socket a node-postgres client writes to: its messages go to the database thread a batch at
 * a time (up to a Sync, a simple Query or a Flush), and the thread's answers come back as data.
 */
export class ThreadSocket extends Duplex {
  #started = false;
  #buffered: Buffer[] = [];
  #gone = false;

  constructor(private readonly thread: { send(bytes: Uint8Array): void; gone(): void }) {
    super();
  }

  // The net.Socket surface node-postgres uses.
  connect(): this {
    process.nextTick(() => this.emit('connect'));
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }

  receive(bytes: Uint8Array): void {
    this.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }

  override _read(): void {}

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#take([chunk], callback);
  }

  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    this.#take(
      chunks.map((c) => c.chunk),
      callback,
    );
  }

  #take(chunks: Buffer[], callback: (error?: Error | null) => void): void {
    try {
      if (!this.#started) {
        // The startup message (no type byte): answered here, as PGlite's session is running.
        this.#started = true;
        process.nextTick(() => this.push(STARTUP_REPLY));
        callback();
        return;
      }
      this.#buffered.push(...chunks);
      const bytes = this.#buffered.length === 1 ? (this.#buffered[0] as Buffer) : Buffer.concat(this.#buffered);
      // Cut after the last message that waits for an answer; keep the rest for the next write.
      let cut = 0;
      let terminated = false;
      for (let at = 0; at + 5 <= bytes.length; ) {
        const type = bytes[at] as number;
        const end = at + 1 + bytes.readInt32BE(at + 1);
        if (end > bytes.length) break;
        if (type === TERMINATE) {
          terminated = true;
          cut = at;
          break;
        }
        if (type === SYNC || type === QUERY || type === FLUSH) cut = end;
        at = end;
      }
      this.#buffered = cut < bytes.length && !terminated ? [bytes.subarray(cut)] : [];
      // A copy the thread can own: the client may reuse its buffers.
      if (cut > 0) this.thread.send(new Uint8Array(bytes.subarray(0, cut)));
      if (terminated) this.#leave();
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#leave();
    this.push(null);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#leave();
    callback(error);
  }

  #leave(): void {
    if (this.#gone) return;
    this.#gone = true;
    this.thread.gone();
  }
}
