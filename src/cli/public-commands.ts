// The `workspace` CLI's public-API commands: what a developer runs from a terminal or a CI job,
// with an API key (`--api-key` or WORKSPACE_API_KEY) against `--url` / WORKSPACE_URL.
//
//   workspace sources sync <source_id> [--wait]
//   workspace apps commit <app> <folder> -m <message>
//   workspace simulations run <dataset_id> [--agent <id>] [--wait] [--min-success-rate 0.8]
//   workspace coverage
//
// Results go to standard output (`--json` for machines); progress goes to standard error, as a bar
// when it is a terminal.
import path from 'node:path';
import type { CommandSpec, Flag, Invocation } from './commands.js';
import { CommandError, UsageError } from './errors.js';
import { type LocalFile, readFolder } from './folder.js';
import { call, type Json, listAll } from './http.js';
import { grid } from './table.js';

/** Files a commit may carry (spec: Commit App Files, 1–200 files). */
export const FILES_PER_COMMIT = 200;
/** JSON bytes a commit request may carry, under the server's default 5 MiB body limit. */
const BYTES_PER_COMMIT = 4 * 1024 * 1024;
const MAX_PATH_LENGTH = 200;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const WAIT_FLAGS: Flag[] = [
  { name: 'interval', value: 'SECONDS', help: 'how often to poll while waiting (default 2)' },
  { name: 'timeout', value: 'SECONDS', help: 'give up waiting after this long, exit 1 (default 1800)' },
];

function seconds(value: unknown, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) {
    throw new UsageError(`${name} takes a number of seconds, got '${value}'.`, 'invalid_value', name);
  }
  return Math.round(n * 1000);
}

/** Polls `read` until `done` says so, or --timeout passes. */
async function poll(inv: Invocation, read: () => Promise<Json>, done: (record: Json) => boolean, what: string) {
  const intervalMs = seconds(inv.values.interval, 2000, '--interval');
  const timeoutMs = seconds(inv.values.timeout, 1_800_000, '--timeout');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const record = await read();
    if (done(record)) return record;
    if (Date.now() >= deadline) {
      throw new CommandError(`Gave up waiting for ${what} after ${Math.round(timeoutMs / 1000)} s.`, 'timeout');
    }
    await sleep(intervalMs);
  }
}

// --- sources sync -------------------------------------------------------------------------------

async function sourcesSync(inv: Invocation): Promise<number> {
  const [sourceId = ''] = inv.args;
  const sid = encodeURIComponent(sourceId);
  const connection = inv.connection();
  // Flags are checked before anything is requested.
  seconds(inv.values.interval, 2000, '--interval');
  seconds(inv.values.timeout, 1_800_000, '--timeout');
  const ack = await call(connection, 'POST', `/api/v1/sources/${sid}/sync`);
  if (!inv.values.wait) {
    inv.print(ack, () => `Sync of source ${ack.source_id} requested: ${ack.status}.`);
    return 0;
  }
  let last = String(ack.status);
  inv.io.err.write(`source ${sourceId}: ${last}\n`);
  const source = await poll(
    inv,
    async () => {
      const record = await call(connection, 'GET', `/api/v1/sources/${sid}`);
      if (record.sync_status !== last) {
        last = String(record.sync_status);
        inv.io.err.write(`source ${sourceId}: ${last}\n`);
      }
      return record;
    },
    (record) => record.sync_status === 'synced' || record.sync_status === 'failed',
    `the sync of source ${sourceId}`,
  );
  const failed = source.sync_status === 'failed';
  inv.print(source, () =>
    failed
      ? `Sync of source ${source.id} (${source.name}) failed: ${source.sync_error ?? 'no reason given'}.`
      : `Source ${source.id} (${source.name}) synced: ${source.document_count} documents.`,
  );
  return failed ? 1 : 0;
}

// --- apps commit --------------------------------------------------------------------------------

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

async function appsCommit(inv: Invocation): Promise<number> {
  const [app = '', folder = ''] = inv.args;
  const message = inv.values.message as string | undefined;
  if (!message) throw new UsageError('Missing -m <message>.', 'missing_argument', '--message');
  const connection = inv.connection();
  const files = await readFolder(path.resolve(folder), {
    onSkip: (relative, reason) => inv.io.err.write(`skipped ${relative}: ${reason}\n`),
  });
  const tooLong = files.find((f) => f.path.length > MAX_PATH_LENGTH);
  if (tooLong) throw new CommandError(`${tooLong.path}: paths are at most ${MAX_PATH_LENGTH} characters.`);
  if (files.length === 0) throw new CommandError(`${folder} holds no files to commit.`, 'nothing_to_commit');
  const name = encodeURIComponent(app);
  // The app's current files: only what differs is sent, and an unchanged folder makes no commit.
  const current = new Map(
    (await listAll(connection, `/api/v1/apps/${name}/files`)).map((f) => [String(f.path), String(f.content)]),
  );
  const changed = files.filter((f) => current.get(f.path) !== f.content);
  if (changed.length === 0) {
    inv.print({ object: 'list', data: [] }, () => `Nothing to commit: ${folder} matches the files of ${app}.`);
    return 0;
  }
  const parts = batches(changed);
  const commits: Json[] = [];
  for (const [i, part] of parts.entries()) {
    const partMessage = parts.length > 1 ? `${message} (${i + 1}/${parts.length})` : message;
    const commit = await call(connection, 'POST', `/api/v1/apps/${name}/commits`, {
      message: partMessage,
      files: part,
    });
    commits.push(commit);
    if (!inv.json) {
      const changes = (commit.files as { change: string }[]) ?? [];
      const count = (kind: string) => changes.filter((c) => c.change === kind).length;
      inv.io.out.write(
        `commit ${commit.id}: ${part.length} files sent, ${count('added')} added, ${count('modified')} modified` +
          ` (${i + 1}/${parts.length})\n`,
      );
    }
  }
  const unchanged = files.length - changed.length;
  inv.print(
    { object: 'list', data: commits },
    () =>
      `Committed ${changed.length} files to ${app} in ${commits.length} commit(s)` +
      `${unchanged > 0 ? ` (${unchanged} unchanged)` : ''}.`,
  );
  return 0;
}

// --- simulations run ----------------------------------------------------------------------------

/** Progress of a run: a redrawn bar on a terminal, a line per change otherwise. */
function progressReporter(err: NodeJS.WritableStream) {
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

function minSuccessRate(inv: Invocation): number | undefined {
  const raw = inv.values['min-success-rate'] as string | undefined;
  if (raw === undefined) return undefined;
  const rate = Number(raw);
  if (!(rate >= 0 && rate <= 1)) {
    throw new UsageError(
      `--min-success-rate takes a number from 0 to 1, got '${raw}'.`,
      'invalid_value',
      '--min-success-rate',
    );
  }
  if (!inv.values.wait) {
    throw new UsageError(
      '--min-success-rate needs --wait: the rate is known when the run ends.',
      'invalid_usage',
      '--min-success-rate',
    );
  }
  return rate;
}

async function simulationsRun(inv: Invocation): Promise<number> {
  const [datasetId = ''] = inv.args;
  const minimum = minSuccessRate(inv);
  seconds(inv.values.interval, 2000, '--interval');
  seconds(inv.values.timeout, 1_800_000, '--timeout');
  const connection = inv.connection();
  const agent = inv.values.agent as string | undefined;
  const started = await call(connection, 'POST', `/api/v1/simulation/datasets/${encodeURIComponent(datasetId)}/runs`, {
    ...(agent ? { agent_id: agent } : {}),
  });
  if (!inv.values.wait) {
    inv.print(started, () => `Simulation run ${started.id} ${started.status} (${started.total_tests} cases).`);
    return 0;
  }
  const progress = progressReporter(inv.io.err);
  progress.update(started);
  let run: Json;
  try {
    run = await poll(
      inv,
      async () => {
        const record = await call(
          connection,
          'GET',
          `/api/v1/simulation/runs/${encodeURIComponent(String(started.id))}`,
        );
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
  const below = minimum !== undefined && (rate === null || rate < minimum);
  const failed = run.status === 'failed';
  inv.print(run, () => {
    const pct = rate === null ? 'n/a' : `${(rate * 100).toFixed(1)}%`;
    const summary = `Simulation run ${run.id} ${run.status}: ${run.passed_tests} passed, ${run.failed_tests} failed of ${run.total_tests}; success rate ${pct}.`;
    if (failed) return `${summary}\nThe run failed: ${run.error_message ?? 'no reason given'}.`;
    if (below) return `${summary}\nBelow the minimum success rate of ${((minimum ?? 0) * 100).toFixed(1)}%.`;
    return summary;
  });
  return failed || below ? 1 : 0;
}

// --- coverage -----------------------------------------------------------------------------------

async function coverage(inv: Invocation): Promise<number> {
  const result = await call(inv.connection(), 'GET', '/api/v1/coverage');
  const pct = (value: unknown) => (typeof value === 'number' ? `${value.toFixed(1)}%` : 'n/a');
  inv.print(result, () => {
    if (result.has_evaluation === false) return 'No coverage evaluation has completed yet.';
    const domains =
      (result.domains as { domain: string; covered: number; total: number; percentage: number | null }[]) ?? [];
    const rows = domains.map((d) => [d.domain, pct(d.percentage), String(d.covered), String(d.total)]);
    const overall = result.overall as { covered: number; total: number; percentage: number | null } | null;
    if (overall) rows.push(['(overall)', pct(overall.percentage), String(overall.covered), String(overall.total)]);
    return grid(rows, ['domain', 'coverage', 'covered', 'questions'], [1, 2, 3]);
  });
  return 0;
}

export const PUBLIC_COMMANDS: CommandSpec[] = [
  {
    name: 'sources sync',
    args: ['<source_id>'],
    summary: 'Sync a knowledge source; --wait follows it to the end',
    details: 'With --wait it prints each status change on standard error and exits 1 when the sync fails.',
    auth: 'api-key',
    flags: [{ name: 'wait', help: 'wait until the sync is synced or failed' }, ...WAIT_FLAGS],
    examples: ['workspace sources sync 0190c6a1-… --wait'],
    run: sourcesSync,
  },
  {
    name: 'apps commit',
    args: ['<app>', '<folder>'],
    summary: "Commit a folder's files to an app",
    details:
      'Reads the folder recursively (dotfiles, dot-folders and node_modules left out; symbolic links and\n' +
      'files that are not UTF-8 text skipped, each named on standard error) and sends the files that\n' +
      'differ from the app\'s current ones, in commits of at most 200 files ("MESSAGE (1/3)", …).\n' +
      'A folder that matches the app makes no commit: it says "Nothing to commit" and exits 0.',
    auth: 'api-key',
    flags: [{ name: 'message', short: 'm', value: 'MESSAGE', help: "(required) the commit's message" }],
    examples: ['workspace apps commit help-center ./site -m "Release 42"'],
    run: appsCommit,
  },
  {
    name: 'simulations run',
    args: ['<dataset_id>'],
    summary: 'Run a simulation; --wait shows progress and gates on the success rate',
    details:
      'With --wait, progress (cases done of total, pass rate so far) goes to standard error: a redrawn\n' +
      'bar on a terminal, one line per change otherwise. Exits 1 when the run fails or its success rate\n' +
      'is below --min-success-rate.',
    auth: 'api-key',
    flags: [
      { name: 'agent', value: 'ID', help: "the agent to test (default: the dataset's)" },
      { name: 'wait', help: 'wait until the run completes or fails' },
      { name: 'min-success-rate', value: 'RATE', help: 'with --wait: exit 1 below this rate, from 0 to 1' },
      ...WAIT_FLAGS,
    ],
    examples: ['workspace simulations run 0190c6b2-… --wait --min-success-rate 0.8'],
    run: simulationsRun,
  },
  {
    name: 'coverage',
    args: [],
    summary: 'Print the latest knowledge coverage per domain',
    auth: 'api-key',
    flags: [],
    examples: ['workspace coverage', 'workspace coverage --json'],
    run: coverage,
  },
];
