// The `workspace` CLI's public-API commands against a live server whose job workers run: their
// output, progress and exit codes. They run in this process (the same code as the binary, see
// test/support/cli-run.ts); the terminal's progress bar runs the binary under a pseudo-terminal.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers.js';
import { runInProcess } from '../support/cli-run.js';
import { BIN } from '../support/process.js';

const folders: string[] = [];
let t: TestApp;
let base = '';

beforeAll(async () => {
  t = await startTestApp({ JOB_POLL_MS: '50', ALLOW_PRIVATE_TARGETS: 'true' }, { startJobs: true });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  await t.close();
});

const run = (args: string[], env: Record<string, string> = {}) =>
  runInProcess(args, { env: { WORKSPACE_URL: base, ...env } });

function folder(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'ws-commit-'));
  folders.push(root);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), content);
  }
  return root;
}

const post = (key: string, url: string, body: unknown) => t.call({ method: 'POST', url, key, body });

describe('apps commit', { timeout: 180_000 }, () => {
  it('commits the text files of a folder, skipping dotfiles, node_modules and binary files; a second commit reports the changes', async () => {
    const { key } = await t.tenant(['apps:write']);
    await post(key, '/api/v1/apps', { name: 'site' });
    const root = folder({
      'index.html': '<h1>Hello</h1>',
      'css/site.css': 'h1 { color: teal }',
      '.env': 'SECRET=1',
      '.git/config': '[core]',
      'node_modules/lib/index.js': 'module.exports = 1',
      'logo.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]),
    });
    const first = await run(['apps', 'commit', 'site', root, '-m', 'first version'], { WORKSPACE_API_KEY: key });
    expect(first.stderr).toContain('skipped logo.png: not UTF-8 text');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('2 files sent, 2 added, 0 modified');
    expect(first.stdout).toContain('Committed 2 files to site in 1 commit(s).');

    const files = await t.call({ url: '/api/v1/apps/site/files', key });
    expect(files.body.data.map((f: { path: string }) => f.path).sort()).toEqual(['css/site.css', 'index.html']);

    writeFileSync(path.join(root, 'index.html'), '<h1>Hello again</h1>');
    const second = await run(['apps', 'commit', 'site', root, '-m', 'second', '--json', '--api-key', key]);
    expect(second.code).toBe(0);
    const output = JSON.parse(second.stdout);
    expect(output.data).toHaveLength(1);
    expect(output.data[0]).toMatchObject({
      object: 'app_commit',
      message: 'second',
      files: [{ path: 'index.html', change: 'modified' }],
    });
  });

  it('committing a folder that matches the app makes no commit: it says "Nothing to commit" and exits 0', async () => {
    const { key } = await t.tenant(['apps:write']);
    await post(key, '/api/v1/apps', { name: 'same' });
    const root = folder({ 'index.html': '<h1>Same</h1>', 'docs/a.md': '# A' });
    expect((await run(['apps', 'commit', 'same', root, '-m', 'first'], { WORKSPACE_API_KEY: key })).code).toBe(0);

    const again = await run(['apps', 'commit', 'same', root, '-m', 'again'], { WORKSPACE_API_KEY: key });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(`Nothing to commit: ${root} matches the files of same.`);
    const json = await run(['apps', 'commit', 'same', root, '-m', 'again', '--json'], { WORKSPACE_API_KEY: key });
    expect(JSON.parse(json.stdout)).toEqual({ object: 'list', data: [] });
    const commits = await t.call({ url: '/api/v1/apps/same/commits', key });
    expect(commits.body.data.map((c: { message: string }) => c.message)).toEqual(['first']);

    // One changed file of two: only it is sent.
    writeFileSync(path.join(root, 'docs/a.md'), '# A, edited');
    const changed = await run(['apps', 'commit', 'same', root, '-m', 'edit'], { WORKSPACE_API_KEY: key });
    expect(changed.stdout).toContain('1 files sent, 0 added, 1 modified');
    expect(changed.stdout).toContain('Committed 1 files to same in 1 commit(s) (1 unchanged).');
  });

  it('splits a folder of more than 200 files into commits of at most 200, numbered in their messages', async () => {
    const { key } = await t.tenant(['apps:write']);
    await post(key, '/api/v1/apps', { name: 'big' });
    const files: Record<string, string> = {};
    for (let i = 0; i < 450; i++) files[`pages/p${String(i).padStart(3, '0')}.md`] = `# Page ${i}`;
    const result = await run(['apps', 'commit', 'big', folder(files), '-m', 'import'], { WORKSPACE_API_KEY: key });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Committed 450 files to big in 3 commit(s).');
    const commits = await t.call({ url: '/api/v1/apps/big/commits?limit=10', key });
    expect(commits.body.data.map((c: { message: string; files: unknown[] }) => [c.message, c.files.length])).toEqual([
      ['import (3/3)', 50],
      ['import (2/3)', 200],
      ['import (1/3)', 200],
    ]);
  });

  it('an API error exits 1 with its code on stderr; a missing key or argument exits 2', async () => {
    const { key } = await t.tenant(['apps:write']);
    const root = folder({ 'a.txt': 'a' });
    const missingApp = await run(['apps', 'commit', 'nope', root, '-m', 'x'], { WORKSPACE_API_KEY: key });
    expect(missingApp.code).toBe(1);
    expect(missingApp.stderr).toContain('404 not_found');

    const owner = await t.tenant(['apps:write']);
    await post(owner.key, '/api/v1/apps', { name: 'read-only' });
    const readOnly = await t.key(owner.tenantId, ['apps:read']);
    const scope = await run(['apps', 'commit', 'read-only', root, '-m', 'x'], { WORKSPACE_API_KEY: readOnly });
    expect(scope.code).toBe(1);
    expect(scope.stderr).toContain('403 insufficient_scope');

    const noKey = await run(['apps', 'commit', 'site', root, '-m', 'x'], { WORKSPACE_API_KEY: '' });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('No API key');
    const noMessage = await run(['apps', 'commit', 'site', root], { WORKSPACE_API_KEY: key });
    expect(noMessage.code).toBe(2);
    expect(noMessage.stderr).toContain('Missing -m <message>');
  });
});

describe('sources sync', { timeout: 180_000 }, () => {
  it('--wait follows a manual source to synced and exits 0; --json prints the source', async () => {
    const { key } = await t.tenant(['knowledge:write']);
    const source = await post(key, '/api/v1/sources', { name: 'Handbook', source_type: 'manual' });
    expect(source.status).toBe(201);
    await post(key, '/api/v1/documents', {
      title: 'Returns',
      content: 'Returns within 30 days.',
      source_id: source.body.id,
    });
    const result = await run(['sources', 'sync', source.body.id, '--wait', '--interval', '0.1', '--json'], {
      WORKSPACE_API_KEY: key,
    });
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(`source ${source.body.id}: pending`);
    expect(result.stderr).toContain(`source ${source.body.id}: synced`);
    expect(JSON.parse(result.stdout)).toMatchObject({ id: source.body.id, sync_status: 'synced', document_count: 1 });
  });

  it('without --wait it prints the acknowledgement at once', async () => {
    const { key } = await t.tenant(['knowledge:write']);
    const source = await post(key, '/api/v1/sources', { name: 'Notes', source_type: 'manual' });
    const result = await run(['sources', 'sync', source.body.id], { WORKSPACE_API_KEY: key });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Sync of source [0-9a-f-]{36} requested: (pending|syncing)\./);
  });

  it('--wait exits 1 with the reason when the sync fails', async () => {
    // A site that closes every connection: the crawl fails.
    const closed: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as { port: number }).port;
    try {
      const { key } = await t.tenant(['knowledge:write']);
      const source = await post(key, '/api/v1/sources', {
        name: 'Broken site',
        source_type: 'website',
        domain: `http://127.0.0.1:${port}/`,
      });
      expect(source.status).toBe(201);
      const result = await run(['sources', 'sync', source.body.id, '--wait', '--interval', '0.1'], {
        WORKSPACE_API_KEY: key,
      });
      expect(result.code).toBe(1);
      expect(result.stdout).toContain('failed');
    } finally {
      closed.close();
    }
  });
});

describe('simulations run', { timeout: 180_000 }, () => {
  async function dataset() {
    const { key } = await t.tenant();
    await post(key, '/api/v1/documents', {
      title: 'Refund policy',
      content: 'Refunds are processed within 14 days of receiving the returned item.',
    });
    const agent = await post(key, '/api/v1/agents', { name: 'Front desk' });
    const ds = await post(key, '/api/v1/simulation/datasets', { name: 'smoke', agent_id: agent.body.id });
    const cases = [
      {
        question: 'How long do refunds take?',
        expected_type: 'answer',
        expected_answer: 'Refunds are processed in 14 days.',
      },
      { question: 'What is the airspeed velocity of an unladen swallow?', expected_type: 'no_answer' },
      // This one fails: the agent does answer it.
      { question: 'How long do refunds take?', expected_type: 'no_answer' },
    ];
    for (const body of cases) {
      expect((await post(key, `/api/v1/simulation/datasets/${ds.body.id}/test-cases`, body)).status).toBe(201);
    }
    return { key, datasetId: ds.body.id as string };
  }

  it('--wait prints progress lines (cases done of total, pass rate) and exits 0 when the rate reaches --min-success-rate', async () => {
    const { key, datasetId } = await dataset();
    const result = await run(
      ['simulations', 'run', datasetId, '--wait', '--min-success-rate', '0.6', '--interval', '0.1'],
      { WORKSPACE_API_KEY: key },
    );
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/simulation [0-9a-f-]{36}: 0\/3 cases done · pass rate — · queued/);
    expect(result.stderr).toMatch(/3\/3 cases done · pass rate 66\.7% · completed/);
    expect(result.stdout).toContain('2 passed, 1 failed of 3; success rate 66.7%.');
  });

  it('exits 1 when the success rate is below --min-success-rate, so CI can gate on it', async () => {
    const { key, datasetId } = await dataset();
    const result = await run(
      ['simulations', 'run', datasetId, '--wait', '--min-success-rate', '0.8', '--interval', '0.1', '--json'],
      { WORKSPACE_API_KEY: key },
    );
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({
      object: 'simulation_run',
      status: 'completed',
      passed_tests: 2,
      failed_tests: 1,
    });
  });

  it('on a terminal, progress is one redrawn bar with cases done of total and the pass rate', async () => {
    const { key, datasetId } = await dataset();
    // util-linux `script` gives the command a pseudo-terminal, as a developer's shell would.
    const command = `'${process.execPath}' '${BIN}' simulations run ${datasetId} --wait --interval 0.1`;
    const result = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        env: { ...process.env, WORKSPACE_URL: base, WORKSPACE_API_KEY: key },
      });
      let output = '';
      child.stdout.on('data', (d) => {
        output += d;
      });
      child.on('exit', (code) => resolve({ code, output }));
    });
    expect(result.code).toBe(0);
    expect(result.output).toContain('\r\x1b[2K[..............................] 0/3 cases done · pass rate — · queued');
    expect(result.output).toContain(
      '\r\x1b[2K[##############################] 3/3 cases done · pass rate 66.7% · completed',
    );
    expect(result.output).not.toContain('simulation '); // no plain progress lines on a terminal
    expect(result.output).toContain('2 passed, 1 failed of 3; success rate 66.7%.');
  });

  it('--min-success-rate outside 0–1 or without --wait is a usage error (exit 2)', async () => {
    const { key, datasetId } = await dataset();
    expect(
      (await run(['simulations', 'run', datasetId, '--wait', '--min-success-rate', '80'], { WORKSPACE_API_KEY: key }))
        .code,
    ).toBe(2);
    expect(
      (await run(['simulations', 'run', datasetId, '--min-success-rate', '0.8'], { WORKSPACE_API_KEY: key })).code,
    ).toBe(2);
  });
});

describe('coverage', { timeout: 180_000 }, () => {
  it('prints the latest coverage as a table of domain and percentage, with the overall row', async () => {
    const { key } = await t.tenant();
    const none = await run(['coverage'], { WORKSPACE_API_KEY: key });
    expect(none.code).toBe(0);
    expect(none.stdout).toContain('No coverage evaluation has completed yet.');

    await post(key, '/api/v1/documents', {
      title: 'Refund policy',
      content: 'Refunds are processed within 14 days of receiving the returned item.',
    });
    const referential = await post(key, '/api/v1/coverage/referentials', { name: 'FAQ' });
    await post(key, `/api/v1/coverage/referentials/${referential.body.id}/questions`, {
      questions: [
        { question: 'How long do refunds take?', domain: 'billing' },
        { question: 'Do you accept bitcoin?', domain: 'billing' },
        { question: 'How do I reset my password?', domain: 'account' },
      ],
    });
    const started = await post(key, '/api/v1/coverage/evaluations', { referential_id: referential.body.id });
    expect(started.status).toBe(202);
    // Waited for as long as a loaded machine needs: the test's own timeout is the bound.
    for (;;) {
      const evaluation = await t.call({ url: `/api/v1/coverage/evaluations/${started.body.id}`, key });
      if (evaluation.body.status === 'completed') break;
      expect(evaluation.body.status).not.toBe('failed');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const result = await run(['coverage'], { WORKSPACE_API_KEY: key });
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^domain\s+coverage\s+covered\s+questions$/);
    expect(lines.slice(2).map((line) => line.split(/\s+/))).toEqual([
      ['account', '0.0%', '0', '1'],
      ['billing', '50.0%', '1', '2'],
      ['(overall)', '33.3%', '1', '3'],
    ]);
    const json = JSON.parse((await run(['coverage', '--json'], { WORKSPACE_API_KEY: key })).stdout);
    expect(json).toMatchObject({ object: 'coverage', has_evaluation: true });
  });
});
