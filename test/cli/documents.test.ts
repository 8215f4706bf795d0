// `workspace documents import <folder>`: files become documents of a manual source, a second run
// updates or skips and never duplicates, progress and a summary, bounded concurrency, 429s waited
// out. `workspace chat`: the agent's answers streamed from lines of input. One server for the
// file; the commands run in this process (the same code as the binary), chat once as the binary.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers.js';
import { runInProcess } from '../support/cli-run.js';
import { BIN } from '../support/process.js';

let t: TestApp;
let base = '';
const folders: string[] = [];

beforeAll(async () => {
  // Job workers run: documents are indexed for search by a job, which the agent's answers need.
  t = await startTestApp({ JOB_POLL_MS: '50' }, { startJobs: true });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  await t.close();
});

function folder(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'ws-import-'));
  folders.push(root);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), content);
  }
  return root;
}

const run = (args: string[], key: string, url = base) =>
  runInProcess(['documents', 'import', ...args], { env: { WORKSPACE_URL: url, WORKSPACE_API_KEY: key } });

async function documentsOf(key: string, sourceId: string) {
  const list = await t.call({ url: `/api/v1/documents?source_id=${sourceId}&limit=100`, key });
  return list.body.data as { id: string; title: string; content: string; page_id: string }[];
}

const handbook = {
  'index.md': '---\ntitle: Welcome\n---\n# Handbook\n\nStart here.',
  'billing/refunds.md': '# Refund policy\n\nRefunds take 14 days.',
  'billing/invoices.html':
    '<html><head><title>Invoices</title><script>var x = 1;</script></head><body><nav>Menu</nav><h1>Invoices</h1><p>Invoices are sent monthly.</p><p>By e-mail.</p></body></html>',
  'notes/hours.txt': 'We are open 9 to 5.\n',
  'logo.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00]),
  'empty.md': '   \n',
  '.draft.md': '# Hidden',
};

describe('documents import', { timeout: 180_000 }, () => {
  it('imports Markdown, HTML and text files recursively into a manual source it creates by name, with a summary', async () => {
    const { key } = await t.tenant(['knowledge:write']);
    const root = folder(handbook);
    const first = await run([root, '--source-name', 'Handbook'], key);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toMatch(/created manual source 'Handbook' \([0-9a-f-]{36}\)/);
    expect(first.stderr).toMatch(/\[1\/5\] (created|skipped) /);
    expect(first.stderr).toMatch(/\[5\/5\] (created|skipped) /);
    expect(first.stderr).toMatch(/\] created billing\/refunds\.md\n/);
    const sourceId = /\(([0-9a-f-]{36})\)/.exec(first.stdout)?.[1] ?? '';
    expect(first.stdout).toContain(
      `Imported ${root} into source Handbook (${sourceId}): 4 created, 0 updated, 2 skipped, 0 failed.`,
    );
    expect(first.stdout).toContain('  skipped  empty.md: empty');
    expect(first.stdout).toContain('  skipped  logo.png: not a supported type');

    const docs = await documentsOf(key, sourceId);
    const byPage = Object.fromEntries(docs.map((d) => [d.page_id, d]));
    expect(Object.keys(byPage).sort()).toEqual([
      'billing/invoices.html',
      'billing/refunds.md',
      'index.md',
      'notes/hours.txt',
    ]);
    expect(byPage['index.md']).toMatchObject({ title: 'Welcome', content: '# Handbook\n\nStart here.' });
    expect(byPage['billing/refunds.md']?.title).toBe('Refund policy');
    expect(byPage['billing/invoices.html']).toMatchObject({
      title: 'Invoices',
      content: 'Invoices\nInvoices are sent monthly.\nBy e-mail.',
    });
    expect(byPage['notes/hours.txt']).toMatchObject({ title: 'hours', content: 'We are open 9 to 5.' });
  });

  it('a second import skips unchanged files and updates changed ones, never duplicating; --json gives each file', async () => {
    const { key } = await t.tenant(['knowledge:write']);
    const source = await t.call({
      method: 'POST',
      url: '/api/v1/sources',
      key,
      body: { name: 'Docs', source_type: 'manual' },
    });
    const root = folder(handbook);
    expect((await run([root, '--source', source.body.id], key)).code).toBe(0);

    const again = await run([root, '--source', source.body.id], key);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('0 created, 0 updated, 6 skipped, 0 failed.');

    writeFileSync(path.join(root, 'billing/refunds.md'), '# Refund policy\n\nRefunds take 7 days.');
    writeFileSync(path.join(root, 'notes/new.md'), '# New page');
    const third = await run([root, '--source', source.body.id, '--json'], key);
    expect(third.code).toBe(0);
    const report = JSON.parse(third.stdout);
    expect(report).toMatchObject({
      object: 'document_import',
      source: { id: source.body.id, name: 'Docs' },
      created: 1,
      updated: 1,
      skipped: 5,
      failed: 0,
    });
    expect(report.files).toContainEqual(expect.objectContaining({ path: 'billing/refunds.md', result: 'updated' }));
    expect(report.files).toContainEqual(
      expect.objectContaining({ path: 'index.md', result: 'skipped', reason: 'unchanged' }),
    );

    const docs = await documentsOf(key, source.body.id);
    expect(docs).toHaveLength(5);
    expect(docs.find((d) => d.page_id === 'billing/refunds.md')?.content).toBe(
      '# Refund policy\n\nRefunds take 7 days.',
    );
  });

  it('a file the API refuses is reported as failed with the reason (exit 1); the others are imported', async () => {
    const { key } = await t.tenant(['knowledge:write']);
    const root = folder({ 'ok.md': '# Fine', 'huge.md': `# Huge\n${'x'.repeat(1_000_001)}` });
    const result = await run([root, '--source-name', 'Mixed'], key);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('1 created, 0 updated, 0 skipped, 1 failed.');
    expect(result.stdout).toContain('  failed   huge.md: longer than 1000000 characters');
    // The name finds the same source the next time: no second source is made.
    const again = await run([root, '--source-name', 'Mixed'], key);
    expect(again.stderr).not.toContain('created manual source');
    const sources = await t.call({ url: '/api/v1/sources', key });
    expect(sources.body.data.filter((s: { name: string }) => s.name === 'Mixed')).toHaveLength(1);
  });

  it('usage errors: no source chosen, a website source, a bad --concurrency, a missing folder (exit 2)', async () => {
    const { key } = await t.tenant(['knowledge:write']);
    const root = folder({ 'a.md': '# A' });
    const website = await t.call({
      method: 'POST',
      url: '/api/v1/sources',
      key,
      body: { name: 'Site', source_type: 'website', domain: 'help.example.com' },
    });
    const cases: [string[], string][] = [
      [[root], 'Pass either --source ID or --source-name NAME.'],
      [[root, '--source', website.body.id], 'is a website source: documents are imported into a manual source.'],
      [[root, '--source-name', 'X', '--concurrency', '0'], "--concurrency takes a whole number from 1 to 16, got '0'."],
      [[path.join(root, 'nope'), '--source-name', 'X'], 'is not a folder.'],
      [[], 'Missing <folder>.'],
    ];
    for (const [args, message] of cases) {
      const result = await run(args, key);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toContain(message);
    }
  });

  it('sends at most --concurrency requests at a time and waits out a 429 for its Retry-After', async () => {
    const { key } = await t.tenant(['knowledge:write']);
    const files: Record<string, string> = {};
    for (let i = 0; i < 12; i++) files[`page-${i}.md`] = `# Page ${i}\n\nText ${i}.`;
    const root = folder(files);
    // A proxy in front of the server: counts creations in flight, answers the first two with 429.
    let inFlight = 0;
    let most = 0;
    let refused = 0;
    const proxy: Server = createServer(async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const creating = req.method === 'POST' && req.url === '/api/v1/documents';
      if (creating && refused < 2) {
        refused += 1;
        res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ error: { type: 'rate_limit_error', code: 'rate_limit_exceeded', message: 'Slow down.' } }),
        );
        return;
      }
      if (creating) most = Math.max(most, ++inFlight);
      try {
        const answer = await fetch(`${base}${req.url}`, {
          method: req.method ?? 'GET',
          headers: { 'x-api-key': String(req.headers['x-api-key'] ?? ''), 'content-type': 'application/json' },
          ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
        });
        // Held a moment, so requests sent together overlap here.
        await new Promise((resolve) => setTimeout(resolve, 300));
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(Buffer.from(await answer.arrayBuffer()));
      } finally {
        if (creating) inFlight -= 1;
      }
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
      const result = await run([root, '--source-name', 'Paced', '--concurrency', '3'], key, url);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toContain('rate limited: retrying in 1 s');
      expect(result.stdout).toContain('12 created, 0 updated, 0 skipped, 0 failed.');
      expect(refused).toBe(2);
      expect(most).toBeGreaterThan(1);
      expect(most).toBeLessThanOrEqual(3);
    } finally {
      proxy.close();
    }
  });
});

describe('chat', { timeout: 180_000 }, () => {
  async function workspaceWithKnowledge() {
    const { key } = await t.tenant();
    const document = await t.call({
      method: 'POST',
      url: '/api/v1/documents',
      key,
      body: { title: 'Refund policy', content: 'Refunds are processed within 14 days of receiving the returned item.' },
    });
    return { key, documentId: document.body.id as string };
  }
  const chat = (args: string[], key: string, stdin: string) =>
    runInProcess(['chat', ...args], { env: { WORKSPACE_URL: base, WORKSPACE_API_KEY: key }, stdin });

  it('reads messages line by line from piped input, prints each answer, its sources and the conversation id', async () => {
    const { key, documentId } = await workspaceWithKnowledge();
    const result = await chat([], key, 'What is your refund policy?\n\nWhat is the airspeed of a swallow?\n');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('Refunds are processed within 14 days of receiving the returned item.\n');
    expect(result.stdout).toContain(`Sources:\n  [1] Refund policy — document ${documentId}\n`);
    expect(result.stdout).toContain("I don't know the answer to that yet.");
    const conversationId = /^conversation ([0-9a-f-]{36})$/m.exec(result.stderr)?.[1] ?? '';
    // Both messages went to one conversation: two customer messages, two answers.
    const messages = await t.call({ url: `/api/v1/conversations/${conversationId}/messages`, key });
    expect(messages.body.data.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
  });

  it('streams the answer as events (--json: one JSON line each, deltas before done), and stops at /exit', async () => {
    const { key } = await workspaceWithKnowledge();
    const result = await chat(['--json'], key, 'What is your refund policy?\n/exit\nThis line is never sent.\n');
    expect(result.code, result.stderr).toBe(0);
    const events = result.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { event: string; data: Record<string, unknown> });
    const names = events.map((e) => e.event);
    expect(names[0]).toBe('message.created');
    expect(names.at(-1)).toBe('done');
    expect(names.filter((n) => n === 'message.delta').length).toBeGreaterThan(0);
    expect(names.indexOf('message.delta')).toBeLessThan(names.indexOf('done'));
    expect(names).toContain('citation');
    expect(names.filter((n) => n === 'done')).toHaveLength(1);
  });

  it('shows the functions the agent called, and goes on with --conversation', async () => {
    const { key } = await workspaceWithKnowledge();
    const workflow = await t.call({
      method: 'POST',
      url: '/api/v1/workflows',
      key,
      body: { name: 'check_order', description: 'Looks an order up.' },
    });
    await t.call({ method: 'PUT', url: `/api/v1/workflows/${workflow.body.id}/enabled`, key, body: { enabled: true } });
    const first = await chat([], key, 'Please check order order=A-7\n');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(
      /Function calls:\n {2}check_order\(\{"order":"A-7"\}\) · workflow · (completed|failed)\n/,
    );
    const conversationId = /^conversation ([0-9a-f-]{36})$/m.exec(first.stderr)?.[1] ?? '';

    const second = await chat(['--conversation', conversationId], key, 'What is your refund policy?\n');
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain(`conversation ${conversationId}`);
    const messages = await t.call({ url: `/api/v1/conversations/${conversationId}/messages`, key });
    expect(messages.body.data).toHaveLength(4);
  });

  it('the binary reads piped standard input to its end and exits', { timeout: 180_000 }, async () => {
    const { key, documentId } = await workspaceWithKnowledge();
    const child = spawn(process.execPath, [BIN, 'chat'], {
      env: { ...process.env, WORKSPACE_URL: base, WORKSPACE_API_KEY: key },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const code = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.stdin.end('What is your refund policy?\n');
    expect(await code, stderr).toBe(0);
    expect(stdout).toBe(
      '> What is your refund policy?\n' +
        'Refunds are processed within 14 days of receiving the returned item.\n' +
        `Sources:\n  [1] Refund policy — document ${documentId}\n\n`,
    );
    expect(stderr).toMatch(/^conversation [0-9a-f-]{36}\n$/);
  });

  it('a refused message ends the chat with the API error (exit 1); no API key is a usage error (exit 2)', async () => {
    const { key } = await workspaceWithKnowledge();
    const refused = await chat(['--agent', '00000000-0000-4000-8000-000000000000'], key, 'Hello\n');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('422 invalid_parameters');
    const noKey = await chat([], '', 'Hello\n');
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('No API key');
  });
});
