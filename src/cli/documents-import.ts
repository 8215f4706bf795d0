// `workspace documents import <folder>`: Markdown, HTML and text files, recursively, as documents of
// a manual knowledge source. Each file is the document whose `page_id` is its path in the folder,
// so a second import of the same folder updates or skips, never duplicates. The API has no update
// of a document: a changed file replaces its document (deleted, then created; if the creation is
// refused the old one is put back).
import path from 'node:path';
import { WorkspaceApiError } from '../../client/src/index.js';
import type { CommandSpec, Invocation } from './commands.js';
import { type DocumentText, isImported, MAX_CONTENT_LENGTH, toDocument } from './document-files.js';
import { CommandError, UsageError } from './errors.js';
import { readFolder } from './folder.js';
import { type Connection, call, type Json, listAll } from './http.js';

type Result = 'created' | 'updated' | 'skipped' | 'failed';

interface Outcome {
  path: string;
  result: Result;
  document_id?: string;
  reason?: string;
}

const MAX_CONCURRENCY = 16;

function concurrency(value: unknown): number {
  if (value === undefined) return 4;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_CONCURRENCY) {
    throw new UsageError(
      `--concurrency takes a whole number from 1 to ${MAX_CONCURRENCY}, got '${value}'.`,
      'invalid_value',
      '--concurrency',
    );
  }
  return n;
}

/** The manual source to import into: --source ID, or --source-name NAME (found, or created). */
async function chooseSource(inv: Invocation, connection: Connection): Promise<Json> {
  const id = inv.values.source as string | undefined;
  const name = inv.values['source-name'] as string | undefined;
  if ((id === undefined) === (name === undefined)) {
    throw new UsageError('Pass either --source ID or --source-name NAME.', 'missing_argument', '--source');
  }
  if (id !== undefined) {
    const source = await call(connection, 'GET', `/api/v1/sources/${encodeURIComponent(id)}`);
    if (source.source_type !== 'manual') {
      throw new UsageError(
        `Source ${id} is a ${source.source_type} source: documents are imported into a manual source.`,
        'invalid_value',
        '--source',
      );
    }
    return source;
  }
  const named = (await listAll(connection, '/api/v1/sources')).filter(
    (s) => s.name === name && s.source_type === 'manual',
  );
  if (named.length > 1) {
    throw new UsageError(
      `${named.length} manual sources are named '${name}': pass --source ID.`,
      'invalid_value',
      '--source-name',
    );
  }
  if (named[0]) return named[0];
  const created = await call(connection, 'POST', '/api/v1/sources', { name, source_type: 'manual' });
  inv.io.err.write(`created manual source '${name}' (${created.id})\n`);
  return created;
}

const reasonOf = (error: unknown) =>
  error instanceof WorkspaceApiError || error instanceof CommandError
    ? error.message
    : error instanceof Error
      ? error.message
      : String(error);

/** Creates, replaces or leaves one file's document. */
async function importOne(
  connection: Connection,
  source: Json,
  file: { path: string; document: DocumentText },
  existing: Json | undefined,
  language: string | undefined,
): Promise<Outcome> {
  const { title, content } = file.document;
  if (content === '') return { path: file.path, result: 'skipped', reason: 'empty' };
  if (content.length > MAX_CONTENT_LENGTH && Array.from(content).length > MAX_CONTENT_LENGTH) {
    return { path: file.path, result: 'failed', reason: `longer than ${MAX_CONTENT_LENGTH} characters` };
  }
  const body = { title, content, source_id: source.id, page_id: file.path, ...(language ? { language } : {}) };
  if (!existing) {
    const created = await call(connection, 'POST', '/api/v1/documents', body);
    return { path: file.path, result: 'created', document_id: String(created.id) };
  }
  if (
    existing.title === title &&
    existing.content === content &&
    (!language || existing.language === language.toLowerCase())
  ) {
    return { path: file.path, result: 'skipped', document_id: String(existing.id), reason: 'unchanged' };
  }
  await call(connection, 'DELETE', `/api/v1/documents/${encodeURIComponent(String(existing.id))}`);
  try {
    const created = await call(connection, 'POST', '/api/v1/documents', body);
    return { path: file.path, result: 'updated', document_id: String(created.id) };
  } catch (error) {
    // Put the previous version back, so a refused update loses nothing.
    await call(connection, 'POST', '/api/v1/documents', {
      title: existing.title,
      content: existing.content,
      language: existing.language,
      source_id: source.id,
      page_id: file.path,
    }).catch(() => undefined);
    throw error;
  }
}

/** Runs `work` over `items`, at most `limit` at a time. */
async function eachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function summary(folder: string, source: Json, outcomes: Outcome[]): string {
  const count = (r: Result) => outcomes.filter((o) => o.result === r).length;
  const lines = [
    `Imported ${folder} into source ${source.name} (${source.id}): ${count('created')} created, ` +
      `${count('updated')} updated, ${count('skipped')} skipped, ${count('failed')} failed.`,
  ];
  for (const o of outcomes) {
    if (o.result === 'failed' || (o.result === 'skipped' && o.reason !== 'unchanged')) {
      lines.push(`  ${o.result.padEnd(7)}  ${o.path}: ${o.reason}`);
    }
  }
  return lines.join('\n');
}

async function documentsImport(inv: Invocation): Promise<number> {
  const [folder = ''] = inv.args;
  const limit = concurrency(inv.values.concurrency);
  const language = inv.values.language as string | undefined;
  const connection = inv.connection();
  const outcomes: Outcome[] = [];
  const files = await readFolder(path.resolve(folder), {
    include: isImported,
    onSkip: (relative, reason) => outcomes.push({ path: relative, result: 'skipped', reason }),
  });
  const source = await chooseSource(inv, connection);
  const existing = new Map(
    (await listAll(connection, `/api/v1/documents?source_id=${encodeURIComponent(String(source.id))}`))
      .filter((d) => typeof d.page_id === 'string')
      .map((d) => [String(d.page_id), d]),
  );
  let done = 0;
  await eachLimited(files, limit, async (file) => {
    let outcome: Outcome;
    try {
      outcome = await importOne(
        connection,
        source,
        { path: file.path, document: toDocument(file.path, file.content) },
        existing.get(file.path),
        language,
      );
    } catch (error) {
      outcome = { path: file.path, result: 'failed', reason: reasonOf(error) };
    }
    outcomes.push(outcome);
    done += 1;
    inv.io.err.write(
      `[${done}/${files.length}] ${outcome.result} ${file.path}${outcome.result === 'failed' ? `: ${outcome.reason}` : ''}\n`,
    );
  });
  outcomes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const count = (r: Result) => outcomes.filter((o) => o.result === r).length;
  inv.print(
    {
      object: 'document_import',
      source: { id: source.id, name: source.name },
      created: count('created'),
      updated: count('updated'),
      skipped: count('skipped'),
      failed: count('failed'),
      files: outcomes,
    },
    () => summary(folder, source, outcomes),
  );
  return count('failed') > 0 ? 1 : 0;
}

export const DOCUMENTS_IMPORT_COMMAND: CommandSpec = {
  name: 'documents import',
  args: ['<folder>'],
  summary: 'Import a folder of Markdown, HTML and text files as documents of a knowledge source',
  details:
    'Reads .md, .markdown, .mdx, .html, .htm, .txt and .text files recursively (dotfiles, dot-folders and\n' +
    'node_modules left out). Each becomes the document of a manual source whose page_id is its path in the\n' +
    "folder; its title is the Markdown front matter's title or first '# heading', the HTML <title> or\n" +
    "first <h1>, else the file's name. A second import updates changed files and skips unchanged ones:\n" +
    'it never duplicates. Documents whose file is gone are left alone.\n' +
    '\n' +
    'Progress goes to standard error, a summary (created, updated, skipped, failed with reasons) to\n' +
    'standard output. Exits 1 when a file failed.',
  auth: 'api-key',
  flags: [
    { name: 'source', value: 'ID', help: 'the manual source to import into' },
    { name: 'source-name', value: 'NAME', help: 'or: the manual source of this name, created if there is none' },
    { name: 'language', value: 'LANG', help: "the documents' language (default: the API's, en)" },
    { name: 'concurrency', value: 'N', help: `requests at a time, 1 to ${MAX_CONCURRENCY} (default 4)` },
  ],
  examples: [
    'workspace documents import ./handbook --source-name Handbook',
    'workspace documents import ./help --source 0190c6a1-… --language fr --json',
  ],
  run: documentsImport,
};
