// Apps: create, list, commit files within the spec's bounds, history and current files.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallResult, expectError, startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let key: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ key } = await t.tenant());
});
afterAll(() => t.close());

const commit = (app: string, body: unknown) =>
  t.call({ method: 'POST', url: `/api/v1/apps/${app}/commits`, key, body });

describe('apps', () => {
  it('creates an app (201) and refuses a second with the same name (409 conflict, param name)', async () => {
    const created = await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'site' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ object: 'app', name: 'site', file_count: 0, head_commit_id: null });
    expectError(
      await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'site' } }),
      409,
      'conflict',
      'name',
    );
  });

  it('lists apps in the list shape', async () => {
    const list = await t.call({ url: '/api/v1/apps', key });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(list.body.data.map((a: { name: string }) => a.name)).toContain('site');
  });

  it('commits added, modified and deleted files and keeps the history as a line', async () => {
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'hist' } });
    const first = await commit('hist', {
      message: 'first',
      files: [
        { path: 'index.html', content: '<h1>hi</h1>' },
        { path: 'src/app.js', content: 'x' },
      ],
    });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ object: 'app_commit', message: 'first', parent_id: null });
    expect(first.body.files).toEqual([
      { path: 'index.html', change: 'added' },
      { path: 'src/app.js', change: 'added' },
    ]);
    const second = await commit('hist', {
      message: 'second',
      files: [
        { path: 'index.html', content: '<h1>hello</h1>' },
        { path: 'src/app.js', content: null },
        { path: 'same.txt', content: 'a' },
      ],
    });
    expect(second.body.parent_id).toBe(first.body.id);
    expect(second.body.files).toEqual([
      { path: 'index.html', change: 'modified' },
      { path: 'src/app.js', change: 'deleted' },
      { path: 'same.txt', change: 'added' },
    ]);
    const third = await commit('hist', { message: 'no-op', files: [{ path: 'same.txt', content: 'a' }] });
    expect(third.body.files).toEqual([]);

    const files = await t.call({ url: '/api/v1/apps/hist/files', key });
    expect(files.body.data.map((f: { path: string; content: string }) => [f.path, f.content])).toEqual([
      ['index.html', '<h1>hello</h1>'],
      ['same.txt', 'a'],
    ]);
    const commits = await t.call({ url: '/api/v1/apps/hist/commits', key });
    expect(commits.body.data.map((c: { message: string }) => c.message)).toEqual(['no-op', 'second', 'first']);
    const app = await t.call({ url: '/api/v1/apps/hist', key });
    expect(app.body).toMatchObject({ head_commit_id: third.body.id, file_count: 2 });
  });

  it('pages through files in path order with the cursor; a cursor it did not issue is 422 naming cursor', async () => {
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'paged' } });
    const paths = ['a.txt', 'b/c.txt', 'b/d.txt', 'z.txt'];
    await commit('paged', { message: 'four', files: paths.map((path) => ({ path, content: path })) });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { data: { path: string }[]; next_cursor: string | null } } = await t.call({
        url: `/api/v1/apps/paged/files?limit=3${cursor ? `&cursor=${cursor}` : ''}`,
        key,
      });
      seen.push(...page.body.data.map((f) => f.path));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(paths);
    const base64url = (text: string) => Buffer.from(text).toString('base64url');
    // Not base64url; NUL; not UTF-8; a path no commit could hold; too long.
    for (const bad of [
      '~~~',
      base64url('\u0000'),
      Buffer.from([0xff, 0xfe]).toString('base64url'),
      base64url('../x'),
      base64url('x'.repeat(201)),
    ]) {
      expectError(
        await t.call({ url: `/api/v1/apps/paged/files?cursor=${bad}`, key }),
        422,
        'validation_error',
        'cursor',
      );
    }
  });

  it('pages past the longest paths a commit may hold: 200 characters of four UTF-8 bytes each', async () => {
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'long-paths' } });
    const paths = ['文'.repeat(196), '本'.repeat(196), '😀'.repeat(196)].map((stem) => `${stem}.txt`).sort();
    const committed = await commit('long-paths', {
      message: 'long',
      files: paths.map((path) => ({ path, content: 'x' })),
    });
    expect(committed.status, committed.text).toBe(200);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: CallResult = await t.call({
        url: `/api/v1/apps/long-paths/files?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
        key,
      });
      expect(page.status, page.text).toBe(200);
      seen.push(...page.body.data.map((f: { path: string }) => f.path));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(paths);
  });

  it('a path cannot be a file and hold files at once: 422 naming the path of the commit, nothing written', async () => {
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'tree' } });
    expect((await commit('tree', { message: 'file', files: [{ path: 'x.txt', content: 'x' }] })).status).toBe(200);
    const under = await commit('tree', {
      message: 'under a file',
      files: [
        { path: 'ok.txt', content: 'ok' },
        { path: 'x.txt/inner', content: 'i' },
      ],
    });
    expectError(under, 422, 'invalid_parameters', 'files[1].path');
    expect(under.body.error.message).toContain("'x.txt' would be a file and hold 'x.txt/inner'");
    // Both in one commit; a file over an existing directory.
    const both = await commit('tree', {
      message: 'both',
      files: [
        { path: 'a/b', content: 'b' },
        { path: 'a', content: 'a' },
      ],
    });
    expectError(both, 422, 'invalid_parameters');
    expect((await commit('tree', { message: 'dir', files: [{ path: 'd/e.txt', content: 'e' }] })).status).toBe(200);
    expectError(
      await commit('tree', { message: 'over', files: [{ path: 'd', content: 'd' }] }),
      422,
      'invalid_parameters',
      'files[0].path',
    );
    const files = await t.call({ url: '/api/v1/apps/tree/files', key });
    expect(files.body.data.map((f: { path: string }) => f.path)).toEqual(['d/e.txt', 'x.txt']);
    // Deleting the file and writing under its name in one commit is a move: allowed. So is a
    // name that only starts like the file (`x.txt2`), and a modified file is no new clash.
    const moved = await commit('tree', {
      message: 'move',
      files: [
        { path: 'x.txt', content: null },
        { path: 'x.txt/inner', content: 'i' },
        { path: 'd.txt', content: 'not under d' },
      ],
    });
    expect(moved.status).toBe(200);
    expect((await commit('tree', { message: 'edit', files: [{ path: 'd/e.txt', content: 'e2' }] })).status).toBe(200);
  });
});
