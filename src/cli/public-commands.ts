// The `workspace` CLI's public-API commands (issue 11): what a developer runs from a terminal or a
// CI job, with an API key (`--api-key` or WORKSPACE_API_KEY) against `--url` / WORKSPACE_URL.
//
//   workspace sources sync <source_id> [--wait]
//   workspace apps commit <app> <folder> -m <message>
//   workspace simulations run <dataset_id> [--agent <id>] [--wait] [--min-success-rate 0.8]
//   workspace coverage
//
// Exit codes: 0 done; 1 the work failed (a failed sync or run, a success rate under
// --min-success-rate, an API error, a timeout); 2 a usage error. Results go to standard output
// (`--json` for machines); progress goes to standard error, as a bar when it is a terminal.
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { retryingFetch, WorkspaceApiError } from '../../client/src/index.js';

export const PUBLIC_COMMANDS = new Set(['sources', 'apps', 'simulations', 'coverage']);

export const PUBLIC_USAGE = `  sources sync <source_id> [--wait]       sync a knowledge source; --wait follows it to the end
  apps commit <app> <folder> -m MESSAGE   commit a folder's files to an app (≤ 200 files a commit)
  simulations run <dataset_id> [--agent ID] [--wait] [--min-success-rate 0.8]
                                          run a simulation; --wait shows progress and gates on the rate
  coverage                                print the latest knowledge coverage per domain

  Public-API commands take --api-key KEY (default $WORKSPACE_API_KEY), --url URL (default
  $WORKSPACE_URL or http://127.0.0.1:$PORT), --json, and with --wait: --interval SECONDS (default 2),
  --timeout SECONDS (default 1800).`;

/** Files a commit may carry (spec: Commit App Files, 1–200 files). */
export const FILES_PER_COMMIT = 200;
/** JSON bytes a commit request may carry, under the server's default 5 MiB body limit. */
const BYTES_PER_COMMIT = 4 * 1024 * 1024;
const MAX_PATH_LENGTH = 200;

class UsageError extends Error {}
class CommandError extends Error {}

interface Context {
  url: string;
  apiKey: string;
  json: boolean;
  intervalMs: number;
  timeoutMs: number;
  out: NodeJS.WritableStream;
  err: NodeJS.WriteStream | NodeJS.WritableStream;
}

type Json = Record<string, unknown>;

/** One call of the public API: JSON in, JSON out; a 429 waits for Retry-After; errors throw. */
async function api(ctx: Context, method: 'GET' | 'POST', pathname: string, body?: unknown): Promise<Json> {
  const send = retryingFetch((request) => fetch(request), {
    maxRetries: 3,
    onRetry: ({ delayMs }) => ctx.err.write(`rate limited: retrying in ${Math.ceil(delayMs / 1000)} s\n`),
  });
  let response: Response;
  try {
    response = await send(
      new Request(`${ctx.url}${pathname}`, {
        method,
        headers: {
          'x-api-key': ctx.apiKey,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      }),
    );
  } catch {
    throw new CommandError(`Cannot reach the API at ${ctx.url}: is the URL right and the server running?`);
  }
  if (!response.ok) throw await WorkspaceApiError.fromResponse(response);
  return (await response.json()) as Json;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `read` until `done` says so, or the timeout passes. */
async function poll(ctx: Context, read: () => Promise<Json>, done: (record: Json) => boolean, what: string) {
  const deadline = Date.now() + ctx.timeoutMs;
  for (;;) {
    const record = await read();
    if (done(record)) return record;
    if (Date.now() >= deadline) {
      throw new CommandError(`Gave up waiting for ${what} after ${Math.round(ctx.timeoutMs / 1000)} s.`);
    }
    await sleep(ctx.intervalMs);
  }
}

function print(ctx: Context, result: unknown, human: () => string): void {
  ctx.out.write(`${ctx.json ? JSON.stringify(result, null, 2) : human()}\n`);
}

function table(rows: string[][], header: string[], alignRight: number[] = []): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (alignRight.includes(i) ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

const id = (value: string | undefined, what: string): string => {
  if (!value) throw new UsageError(`Missing ${what}.`);
  return encodeURIComponent(value);
};

// --- sources sync -------------------------------------------------------------------------------

async function sourcesSync(ctx: Context, sourceId: string | undefined, wait: boolean): Promise<number> {
  const sid = id(sourceId, '<source_id>');
  const ack = await api(ctx, 'POST', `/api/v1/sources/${sid}/sync`);
  if (!wait) {
    print(ctx, ack, () => `Sync of source ${ack.source_id} requested: ${ack.status}.`);
    return 0;
  }
  let last = String(ack.status);
  ctx.err.write(`source ${sourceId}: ${last}\n`);
  const source = await poll(
    ctx,
    async () => {
      const record = await api(ctx, 'GET', `/api/v1/sources/${sid}`);
      if (record.sync_status !== last) {
        last = String(record.sync_status);
        ctx.err.write(`source ${sourceId}: ${last}\n`);
      }
      return record;
    },
    (record) => record.sync_status === 'synced' || record.sync_status === 'failed',
    `the sync of source ${sourceId}`,
  );
  const failed = source.sync_status === 'failed';
  print(ctx, source, () =>
    failed
      ? `Sync of source ${source.id} (${source.name}) failed: ${source.sync_error ?? 'no reason given'}.`
      : `Source ${source.id} (${source.name}) synced: ${source.document_count} documents.`,
  );
  return failed ? 1 : 0;
}

// --- apps commit --------------------------------------------------------------------------------

interface LocalFile {
  path: string;
  content: string;
}

/** The folder's text files, recursively, in a stable order; dotfiles, node_modules and links skipped. */
export async function readFolder(root: string, warn: (message: string) => void): Promise<LocalFile[]> {
  const files: LocalFile[] = [];
  const decoder = new TextDecoder('utf-8', { fatal: true });
  async function walk(dir: string, prefix: string): Promise<void> {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    for (const entry of entries) {
      if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
      const full = path.join(dir, entry.name);
      const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
      if (entry.isSymbolicLink()) {
        warn(`skipped ${relative}: a symbolic link`);
      } else if (entry.isDirectory()) {
        await walk(full, relative);
      } else if (entry.isFile()) {
        const bytes = await readFile(full);
        let content: string;
        try {
          if (bytes.includes(0)) throw new Error('binary');
          content = decoder.decode(bytes);
        } catch {
          warn(`skipped ${relative}: not UTF-8 text`);
          continue;
        }
        if (relative.length > MAX_PATH_LENGTH) {
          throw new CommandError(`${relative}: paths are at most ${MAX_PATH_LENGTH} characters.`);
        }
        files.push({ path: relative, content });
      }
    }
  }
  const stat = await lstat(root).catch(() => undefined);
  if (!stat?.isDirectory()) throw new UsageError(`${root} is not a folder.`);
  await walk(root, '');
  return files;
}

/** Batches of at most FILES_PER_COMMIT files and about BYTES_PER_COMMIT bytes of JSON. */
export function batches(files: LocalFile[]): LocalFile[][] {
  const out: LocalFile[][] = [];
  let current: LocalFile[] = [];
  let bytes = 0;
  for (const file of files) {
    const size = Buffer.byteLength(JSON.stringify(file));
    if (current.length > 0 && (current.length >= FILES_PER_COMMIT || bytes + size > BYTES_PER_COMMIT)) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(file);
    bytes += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}

async function appsCommit(
  ctx: Context,
  app: string | undefined,
  folder: string | undefined,
  message: string | undefined,
): Promise<number> {
  const name = id(app, '<app>');
  if (!folder) throw new UsageError('Missing <folder>.');
  if (!message) throw new UsageError('Missing -m <message>.');
  const files = await readFolder(path.resolve(folder), (warning) => ctx.err.write(`${warning}\n`));
  if (files.length === 0) throw new CommandError(`${folder} holds no files to commit.`);
  const parts = batches(files);
  const commits: Json[] = [];
  for (const [i, part] of parts.entries()) {
    const partMessage = parts.length > 1 ? `${message} (${i + 1}/${parts.length})` : message;
    const commit = await api(ctx, 'POST', `/api/v1/apps/${name}/commits`, { message: partMessage, files: part });
    commits.push(commit);
    if (!ctx.json) {
      const changes = (commit.files as { change: string }[]) ?? [];
      const count = (kind: string) => changes.filter((c) => c.change === kind).length;
      ctx.out.write(
        `commit ${commit.id}: ${part.length} files sent, ${count('added')} added, ${count('modified')} modified` +
          ` (${i + 1}/${parts.length})\n`,
      );
    }
  }
  print(
    ctx,
    { object: 'list', data: commits },
    () => `Committed ${files.length} files to ${app} in ${commits.length} commit(s).`,
  );
  return 0;
}

// --- simulations run ----------------------------------------------------------------------------

/** Progress of a run: a redrawn bar on a terminal, a line per change otherwise. */
function progressReporter(err: Context['err']) {
  const tty = 'isTTY' in err && err.isTTY === true;
  let lastLine = '';
  return {
    update(run: Json) {
      const total = Number(run.total_tests ?? 0);
      const done = Number(run.passed_tests ?? 0) + Number(run.failed_tests ?? 0);
      const rate = typeof run.success_rate === 'number' ? `${(run.success_rate * 100).toFixed(1)}%` : '—';
      const text = `${done}/${total} cases done · pass rate ${rate} · ${run.status}`;
      if (tty) {
        const width = 30;
        const filled = total > 0 ? Math.round((done / total) * width) : 0;
        err.write(`\r\x1b[2K[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${text}`);
      } else if (text !== lastLine) {
        err.write(`simulation ${run.id}: ${text}\n`);
      }
      lastLine = text;
    },
    end() {
      if (tty && lastLine) err.write('\n');
    },
  };
}

async function simulationsRun(
  ctx: Context,
  datasetId: string | undefined,
  options: { agent: string | undefined; wait: boolean; minSuccessRate: number | undefined },
): Promise<number> {
  const dataset = id(datasetId, '<dataset_id>');
  const started = await api(ctx, 'POST', `/api/v1/simulation/datasets/${dataset}/runs`, {
    ...(options.agent ? { agent_id: options.agent } : {}),
  });
  if (!options.wait) {
    print(ctx, started, () => `Simulation run ${started.id} ${started.status} (${started.total_tests} cases).`);
    return 0;
  }
  const progress = progressReporter(ctx.err);
  progress.update(started);
  let run: Json;
  try {
    run = await poll(
      ctx,
      async () => {
        const record = await api(ctx, 'GET', `/api/v1/simulation/runs/${encodeURIComponent(String(started.id))}`);
        progress.update(record);
        return record;
      },
      (record) => record.status === 'completed' || record.status === 'failed',
      `simulation run ${started.id}`,
    );
  } finally {
    progress.end();
  }
  const rate = typeof run.success_rate === 'number' ? run.success_rate : null;
  const below = options.minSuccessRate !== undefined && (rate === null || rate < options.minSuccessRate);
  const failed = run.status === 'failed';
  print(ctx, run, () => {
    const pct = rate === null ? 'n/a' : `${(rate * 100).toFixed(1)}%`;
    const summary = `Simulation run ${run.id} ${run.status}: ${run.passed_tests} passed, ${run.failed_tests} failed of ${run.total_tests}; success rate ${pct}.`;
    if (failed) return `${summary}\nThe run failed: ${run.error_message ?? 'no reason given'}.`;
    if (below)
      return `${summary}\nBelow the minimum success rate of ${((options.minSuccessRate ?? 0) * 100).toFixed(1)}%.`;
    return summary;
  });
  return failed || below ? 1 : 0;
}

// --- coverage -----------------------------------------------------------------------------------

async function coverage(ctx: Context): Promise<number> {
  const result = await api(ctx, 'GET', '/api/v1/coverage');
  const pct = (value: unknown) => (typeof value === 'number' ? `${value.toFixed(1)}%` : 'n/a');
  print(ctx, result, () => {
    if (result.has_evaluation === false) return 'No coverage evaluation has completed yet.';
    const domains =
      (result.domains as { domain: string; covered: number; total: number; percentage: number | null }[]) ?? [];
    const rows = domains.map((d) => [d.domain, pct(d.percentage), String(d.covered), String(d.total)]);
    const overall = result.overall as { covered: number; total: number; percentage: number | null } | null;
    if (overall) rows.push(['(overall)', pct(overall.percentage), String(overall.covered), String(overall.total)]);
    return table(rows, ['domain', 'coverage', 'covered', 'questions'], [1, 2, 3]);
  });
  return 0;
}

// --- dispatch -----------------------------------------------------------------------------------

function seconds(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${name} takes a number of seconds, got '${value}'.`);
  return Math.round(n * 1000);
}

/** Runs a public-API command; answers the exit code. Never throws. */
export async function runPublicCommand(
  argv: string[],
  io: { out?: NodeJS.WritableStream; err?: NodeJS.WriteStream | NodeJS.WritableStream; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  const out = io.out ?? process.stdout;
  const err = io.err ?? process.stderr;
  const env = io.env ?? process.env;
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        url: { type: 'string' },
        'api-key': { type: 'string' },
        wait: { type: 'boolean', default: false },
        message: { type: 'string', short: 'm' },
        agent: { type: 'string' },
        'min-success-rate': { type: 'string' },
        interval: { type: 'string' },
        timeout: { type: 'string' },
      },
    });
    const [command, sub, ...rest] = positionals;
    const apiKey = values['api-key'] ?? env.WORKSPACE_API_KEY;
    if (!apiKey) throw new UsageError('No API key: pass --api-key or set WORKSPACE_API_KEY.');
    const port = env.PORT && /^\d+$/.test(env.PORT) ? env.PORT : '8080';
    const ctx: Context = {
      url: (values.url ?? env.WORKSPACE_URL ?? `http://127.0.0.1:${port}`).replace(/\/+$/, ''),
      apiKey,
      json: values.json ?? false,
      intervalMs: seconds(values.interval, 2000, '--interval'),
      timeoutMs: seconds(values.timeout, 1_800_000, '--timeout'),
      out,
      err,
    };
    if (command === 'sources' && sub === 'sync') return await sourcesSync(ctx, rest[0], values.wait ?? false);
    if (command === 'apps' && sub === 'commit') return await appsCommit(ctx, rest[0], rest[1], values.message);
    if (command === 'simulations' && sub === 'run') {
      const raw = values['min-success-rate'];
      const minSuccessRate = raw === undefined ? undefined : Number(raw);
      if (minSuccessRate !== undefined && !(minSuccessRate >= 0 && minSuccessRate <= 1)) {
        throw new UsageError(`--min-success-rate takes a number from 0 to 1, got '${raw}'.`);
      }
      if (minSuccessRate !== undefined && !values.wait) {
        throw new UsageError('--min-success-rate needs --wait: the rate is known when the run ends.');
      }
      return await simulationsRun(ctx, rest[0], { agent: values.agent, wait: values.wait ?? false, minSuccessRate });
    }
    if (command === 'coverage' && sub === undefined) return await coverage(ctx);
    throw new UsageError(`Unknown command: ${positionals.join(' ')}`);
  } catch (error) {
    if (error instanceof WorkspaceApiError) {
      err.write(
        `workspace: ${error.status} ${error.code}: ${error.body.message}${error.param ? ` (${error.param})` : ''}\n`,
      );
      return 1;
    }
    if (
      error instanceof UsageError ||
      (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))
    ) {
      err.write(`workspace: ${error.message}\n\nUsage:\n${PUBLIC_USAGE}\n`);
      return 2;
    }
    if (error instanceof CommandError) {
      err.write(`workspace: ${error.message}\n`);
      return 1;
    }
    err.write(`workspace: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return 1;
  }
}
