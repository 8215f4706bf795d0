// Apps: create, list, commit files within the spec's bounds, history and current files.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallResult, expectError, startTestApp, type TestApp } from '../helpers.js';

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

describe('app file paths: one form stored, look-alikes refused', () => {
  const nfc = 'caf\u00e9.txt';
  const nfd = 'cafe\u0301.txt';
  const filesOf = async (app: string) =>
    (await t.call({ url: `/api/v1/apps/${app}/files`, key })).body.data.map((f: { path: string; content: string }) => [
      f.path,
      f.content,
    ]);

  it('a path sent decomposed (NFD) and composed (NFC) is one file, stored in NFC', async () => {
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'nfc' } });
    const first = await commit('nfc', { message: 'nfd', files: [{ path: `docs/${nfd}`, content: 'one' }] });
    expect(first.status, first.text).toBe(200);
    expect(first.body.files).toEqual([{ path: `docs/${nfc}`, change: 'added' }]);
    const second = await commit('nfc', { message: 'nfc', files: [{ path: `docs/${nfc}`, content: 'two' }] });
    expect(second.body.files).toEqual([{ path: `docs/${nfc}`, change: 'modified' }]);
    const third = await commit('nfc', { message: 'nfd again', files: [{ path: `docs/${nfd}`, content: 'three' }] });
    expect(third.body.files).toEqual([{ path: `docs/${nfc}`, change: 'modified' }]);
    expect(await filesOf('nfc')).toEqual([[`docs/${nfc}`, 'three']]);
    // Deleting by the other form deletes the same file.
    const deleted = await commit('nfc', { message: 'rm', files: [{ path: `docs/${nfd}`, content: null }] });
    expect(deleted.body.files).toEqual([{ path: `docs/${nfc}`, change: 'deleted' }]);
    expect(await filesOf('nfc')).toEqual([]);
  });

  it('both forms of one path in one commit are a repeated path: 422 naming the second, nothing written', async () => {
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'nfc-twins' } });
    const both = await commit('nfc-twins', {
      message: 'twins',
      files: [
        { path: nfc, content: 'a' },
        { path: nfd, content: 'b' },
      ],
    });
    const error = expectError(both, 422, 'validation_error', 'files[1].path');
    expect(error.message).toContain('repeats files[0].path once normalised to NFC');
    expect(await filesOf('nfc-twins')).toEqual([]);
  });

  it.each([
    ['a bidi override (U+202E)', 'invoice\u202etxt.exe', 'U+202E'],
    ['a byte order mark (U+FEFF)', '\ufeffindex.html', 'U+FEFF'],
    ['a zero-width space (U+200B)', 'a\u200b/b.txt', 'U+200B'],
    ['an isolate (U+2066)', 'a/\u2066b.txt', 'U+2066'],
    ['a control character (U+0007)', 'bell\u0007.txt', 'U+0007'],
    ['a line separator (U+2028)', 'a\u2028b.txt', 'U+2028'],
    ['a format character hiding a dot-dot segment', '.\u200b./x', 'U+200B'],
    ['fullwidth dots that fold (NFKC) to ..', '\uff0e\uff0e/x', "'../x'"],
    ['a two-dot leader that folds (NFKC) to ..', 'a/\u2025/b', "'a/../b'"],
    ['a fullwidth solidus that folds (NFKC) to a .. segment', '\uff0e\uff0e\uff0fx', "'../x'"],
  ])('a path with %s is refused: 422 validation_error naming the path, nothing committed', async (_, bad, named) => {
    const app = `refuse-${Buffer.from(bad).toString('hex').slice(0, 40)}`;
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: app } });
    const refused = await commit(app, {
      message: 'bad',
      files: [
        { path: 'ok.txt', content: 'ok' },
        { path: 'also-ok.txt', content: 'ok' },
        { path: bad, content: 'x' },
      ],
    });
    const error = expectError(refused, 422, 'validation_error', 'files[2].path');
    expect(error.message).toContain(named);
    expect(await filesOf(app)).toEqual([]);
    expect((await t.call({ url: `/api/v1/apps/${app}`, key })).body.head_commit_id).toBeNull();
  });

  it('the 200-character bound holds for the stored (NFC) form too', async () => {
    await t.call({ method: 'POST', url: '/api/v1/apps', key, body: { name: 'nfc-long' } });
    // U+2ADC has no composed form: NFC writes it as two characters, so 101 of them become 202.
    const grows = '\u2adc'.repeat(101);
    const tooLong = expectError(
      await commit('nfc-long', { message: 'long', files: [{ path: grows, content: 'x' }] }),
      422,
      'validation_error',
      'files[0].path',
    );
    expect(tooLong.message).toContain('longer than 200 characters once normalised to NFC');
    // Composing shortens: 200 characters sent in NFD, 100 once composed, is accepted.
    const shrinks = 'e\u0301'.repeat(100);
    const ok = await commit('nfc-long', { message: 'long', files: [{ path: shrinks, content: 'x' }] });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.files).toEqual([{ path: '\u00e9'.repeat(100), change: 'added' }]);
  });
});
