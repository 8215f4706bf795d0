// The typed client as a package: `npm pack` builds it (prepack → build: JavaScript and .d.ts in
// dist/), the tarball holds what `files` says and no TypeScript source, and a project that has it
// in node_modules imports it with plain `node` (no TypeScript loader) and calls a live server —
// a typed call, a message stream, a typed error — and type-checks against its declarations.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const CLIENT = path.join(ROOT, 'client');

let t: TestApp;
let base = '';
let work = '';
let project = '';
let packed: string[] = [];

/** The environment of a child `node`: no loader or option of the test runner's. */
function plainEnv(extra: Record<string, string> = {}) {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir(), ...extra };
  return env;
}

beforeAll(async () => {
  t = await startTestApp();
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  work = await mkdtemp(path.join(tmpdir(), 'client-package-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], {
    cwd: CLIENT,
    env: { ...process.env, npm_config_loglevel: 'error' },
    maxBuffer: 16 * 1024 * 1024,
  });
  const [info] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  if (!info) throw new Error(`npm pack said: ${stdout}`);
  packed = info.files.map((f) => f.path).sort();

  // A project with the tarball unpacked where `npm install ./workspace-api-client-1.0.0.tgz` puts
  // it, and its dependency linked from this repository (the test reaches no registry).
  project = path.join(work, 'project');
  const modules = path.join(project, 'node_modules');
  const installed = path.join(modules, '@workspace-api', 'client');
  await mkdir(installed, { recursive: true });
  await run('tar', ['-xzf', path.join(work, info.filename), '-C', installed, '--strip-components=1']);
  for (const dependency of ['openapi-fetch', 'openapi-typescript-helpers']) {
    await symlink(path.join(ROOT, 'node_modules', dependency), path.join(modules, dependency), 'dir');
  }
  await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module' }));
}, 300_000);

afterAll(async () => {
  await t.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the client package', () => {
  it('packs the built JavaScript, its declarations, the OpenAPI document and the README, no source', () => {
    expect(packed).toEqual(
      expect.arrayContaining([
        'README.md',
        'dist/index.d.ts',
        'dist/index.js',
        'dist/schema.d.ts',
        'dist/stream.js',
        'dist/transport.js',
        'openapi.json',
        'package.json',
      ]),
    );
    expect(packed.filter((file) => file.startsWith('src/') || /(?<!\.d)\.ts$/.test(file))).toEqual([]);
  });

  it('plain node imports it by name and calls a live server: a typed call, a stream, a typed error', async () => {
    const { key } = await t.tenant();
    await writeFile(
      path.join(project, 'main.mjs'),
      `import { createWorkspaceClient, WorkspaceApiError } from '@workspace-api/client';
const ws = createWorkspaceClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY });
const app = await ws.post('/api/v1/apps', { body: { name: 'from-node' } });
const events = [];
for await (const event of ws.streamMessage({ content: 'Hello' })) events.push(event.event);
let error;
try {
  await ws.get('/api/v1/apps/{name}', { params: { path: { name: 'missing' } } });
} catch (e) {
  error = e instanceof WorkspaceApiError ? { status: e.status, code: e.code } : String(e);
}
console.log(JSON.stringify({ app: app.name, first: events[0], last: events.at(-1), error }));
`,
    );
    const { stdout } = await run(process.execPath, ['main.mjs'], {
      cwd: project,
      env: plainEnv({ BASE_URL: base, API_KEY: key }),
    });
    expect(JSON.parse(stdout)).toEqual({
      app: 'from-node',
      first: 'message.created',
      last: 'done',
      error: { status: 404, code: 'not_found' },
    });
  });

  it('a TypeScript project type-checks against its declarations (the types condition)', async () => {
    await writeFile(
      path.join(project, 'check.ts'),
      `import { createWorkspaceClient, type TurnEvent } from '@workspace-api/client';
const ws = createWorkspaceClient({ baseUrl: 'http://127.0.0.1', apiKey: 'wsk_x' });
export async function firstDelta(): Promise<string> {
  const app = await ws.post('/api/v1/apps', { body: { name: 'typed' } });
  // @ts-expect-error \`nmae\` is not a field of Create App.
  await ws.post('/api/v1/apps', { body: { nmae: 'typo' } });
  for await (const event of ws.streamMessage({ content: 'Hi' })) {
    if (event.event === 'message.delta') return event.data.delta;
    // @ts-expect-error a done event has no delta.
    if (event.event === 'done') return event.data.delta;
  }
  const kinds: TurnEvent['event'][] = ['done'];
  return app.name + kinds.join('');
}
`,
    );
    await writeFile(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          lib: ['ES2023', 'DOM'],
          types: [],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
        },
        files: ['check.ts'],
      }),
    );
    const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const checked = await run(process.execPath, [tsc, '-p', project], { cwd: project, env: plainEnv() }).then(
      () => 'ok',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(checked).toBe('ok');
  }, 120_000);
});
