// Crash safety: the server takes concurrent writes (commits, custom data source rows,
// task comments), is killed with SIGKILL, restarts, and every write it acknowledged with a 2xx is
// there, whole; a write it never answered is either absent or whole, never half-written.
// On PostgreSQL (TEST_DATABASE_URL) and on PGlite (DATA_DIR on disk).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../src/domain/accounts/scopes.js';
import { api, freshPostgresSchema, startServerProcess } from '../support/process.js';

const WRITERS = 6;
const RUN_MS = 1500;
const MIN_ACKED = 30;

interface Acked {
  commits: { id: string; paths: string[]; content: string }[];
  rows: { externalId: string; value: number }[];
  comments: { id: string; content: string }[];
}

/** Every page of a list, its `data` together. */
// biome-ignore lint/suspicious/noExplicitAny: tests read JSON bodies loosely.
async function listAll(base: string, key: string, pathname: string): Promise<any[]> {
  const all = [];
  let cursor: string | null = null;
  do {
    const page = await api(base, 'GET', `${pathname}?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { key });
    expect(page.status, pathname).toBe(200);
    all.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor);
  return all;
}

async function exercise(database: Record<string, string>) {
  // The rate limit lifted: a writer refused with 429 would prove nothing about a write in flight.
  const env = { RATE_LIMIT_PER_MINUTE: '10000000', ...database };
  let server = await startServerProcess(env);
  const tenant = `crash${Date.now() % 100000}`;
  await api(server.url, 'POST', '/admin/v1/tenants', { body: { tenant_id: tenant, name: tenant } });
  const key = (
    await api(server.url, 'POST', `/admin/v1/tenants/${tenant}/api-keys`, { body: { name: 'k', scopes: ALL_SCOPES } })
  ).body.secret as string;
  expect((await api(server.url, 'POST', '/api/v1/apps', { key, body: { name: 'site' } })).status).toBe(201);
  expect(
    (await api(server.url, 'POST', '/api/v1/custom-data-sources', { key, body: { name: 'Orders', slug: 'orders' } }))
      .status,
  ).toBe(201);
  const task = (await api(server.url, 'POST', '/api/v1/tasks', { key, body: { title: 'crash' } })).body;
  expect(task.identifier).toMatch(/^TASK-\d+$/);

  const acked: Acked = { commits: [], rows: [], comments: [] };
  // Every comment sent, answered or not: one found after the restart must be one of them, whole.
  const sentComments = new Set<string>();
  let stop = false;
  let n = 0;
  const writer = async (w: number) => {
    while (!stop) {
      const i = n++;
      const kind = i % 3;
      try {
        if (kind === 0) {
          const content = `commit ${i} by ${w}`;
          const paths = [`w${w}/a${i}.txt`, `w${w}/b${i}.txt`];
          const r = await api(server.url, 'POST', '/api/v1/apps/site/commits', {
            key,
            body: { message: `c${i}`, files: paths.map((p) => ({ path: p, content })) },
          });
          if (r.status === 200) acked.commits.push({ id: r.body.id, paths, content });
        } else if (kind === 1) {
          const r = await api(server.url, 'PUT', `/api/v1/custom-data-sources/orders/rows/order-${i}`, {
            key,
            body: { data: { value: i, nested: { by: w, items: [i, i + 1] } }, tags: ['crash'] },
          });
          if (r.status === 200 || r.status === 201) acked.rows.push({ externalId: `order-${i}`, value: i });
        } else {
          const content = `comment ${i} by ${w}`;
          sentComments.add(content);
          const r = await api(server.url, 'POST', `/api/v1/tasks/${task.id}/comments`, { key, body: { content } });
          if (r.status === 201) acked.comments.push({ id: r.body.id, content });
        }
      } catch {
        // The connection died with the server: this write was never acknowledged.
        return;
      }
    }
  };
  const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
  // RUN_MS at least, and on a busy machine until enough writes were acknowledged to prove something.
  const killAfter = Date.now() + RUN_MS;
  const ackedCount = () => acked.commits.length + acked.rows.length + acked.comments.length;
  while (Date.now() < killAfter || (ackedCount() < MIN_ACKED && Date.now() < killAfter + 20_000)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  await server.kill('SIGKILL');
  stop = true;
  await Promise.all(writers);
  expect(ackedCount()).toBeGreaterThanOrEqual(MIN_ACKED);

  server = await startServerProcess(env);
  try {
    // Every acknowledged commit is there with all its files.
    const commitIds = new Set((await listAll(server.url, key, '/api/v1/apps/site/commits')).map((c) => c.id));
    const files = new Map<string, string>(
      (await listAll(server.url, key, '/api/v1/apps/site/files')).map((f) => [f.path, f.content]),
    );
    for (const commit of acked.commits) {
      expect(commitIds.has(commit.id), `commit ${commit.id}`).toBe(true);
      for (const p of commit.paths) expect(files.get(p)).toBe(commit.content);
    }
    // No commit is half-applied: both files of every commit, or neither.
    for (const [p, content] of files) {
      const sibling = p.includes('/a') ? p.replace('/a', '/b') : p.replace('/b', '/a');
      expect(files.get(sibling), `${p} without ${sibling}`).toBe(content);
    }
    for (const row of acked.rows) {
      const r = await api(server.url, 'GET', `/api/v1/custom-data-sources/orders/rows/${row.externalId}`, { key });
      expect(r.status, row.externalId).toBe(200);
    }
    // Every row there, answered or not, is whole: its data as sent, and its tags.
    const rows = await listAll(server.url, key, '/api/v1/custom-data-sources/orders/rows');
    expect(rows.length).toBeGreaterThanOrEqual(acked.rows.length);
    for (const row of rows) {
      const value = Number(/^order-(\d+)$/.exec(row.external_id)?.[1]);
      expect(row.data, row.external_id).toEqual({
        value,
        nested: { by: expect.any(Number), items: [value, value + 1] },
      });
      expect(row.tags, row.external_id).toEqual(['crash']);
    }
    // Every comment there, answered or not, is one that was sent, whole; every answered one is there.
    const comments = new Map<string, string>(
      (await listAll(server.url, key, `/api/v1/tasks/${task.id}/comments`)).map((c) => [c.id, c.content]),
    );
    for (const content of comments.values()) expect(sentComments.has(content), content).toBe(true);
    for (const comment of acked.comments) expect(comments.get(comment.id)).toBe(comment.content);
    return acked;
  } finally {
    await server.kill('SIGTERM');
  }
}

describe('crash safety', () => {
  it.runIf(Boolean(process.env.TEST_DATABASE_URL))(
    'PostgreSQL: every write acknowledged before SIGKILL is present and whole after restart',
    async () => {
      const database = await freshPostgresSchema(process.env.TEST_DATABASE_URL as string);
      try {
        const acked = await exercise({ DATABASE_URL: database.url });
        console.log(
          `crash (PostgreSQL): ${acked.commits.length} commits, ${acked.rows.length} rows, ${acked.comments.length} comments acknowledged, all present`,
        );
      } finally {
        await database.drop();
      }
    },
    120_000,
  );

  it('PGlite: every write acknowledged before SIGKILL is present and whole after restart', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ws-crash-'));
    try {
      const acked = await exercise({ DATA_DIR: dataDir });
      console.log(
        `crash (PGlite): ${acked.commits.length} commits, ${acked.rows.length} rows, ${acked.comments.length} comments acknowledged, all present`,
      );
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
