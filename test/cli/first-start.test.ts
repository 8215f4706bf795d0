// What a newcomer sees on `npm start`: the build (scripts/build.mjs) runs only when the sources
// changed, and the server says on stderr each stage of a first start (creating and migrating the
// embedded database) with its duration, then where it is ready and in how long; a later start says
// two lines, LOG_LEVEL=silent none.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/db/migrate.js';
import { freePort } from '../support/process.js';

const ROOT = path.resolve('.');
const BUILD = path.join(ROOT, 'scripts/build.mjs');
const folders: string[] = [];
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.pid) killGroup(child.pid, 'SIGKILL');
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

function tempFolder(prefix: string): string {
  const folder = mkdtempSync(path.join(os.tmpdir(), prefix));
  folders.push(folder);
  return folder;
}

function killGroup(pid: number, signal: NodeJS.Signals) {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], options: { cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: options.cwd ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the build npm start runs', () => {
  const root = tempFolder('ws-build-');
  const source = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  };
  const build = () => run(process.execPath, [BUILD, '--root', root]);
  source('tsconfig.json', JSON.stringify({ compilerOptions: { target: 'ES2022', verbatimModuleSyntax: true } }));
  source('src/a.ts', 'export const a: number = 1;\n');
  source('src/lib/b.ts', "import { a } from '../a.js';\nconst b: number = a + 1;\nconsole.log(b);\n");
  // The compiled files are ES modules, as the project's package.json declares.
  source('package.json', JSON.stringify({ type: 'module' }));

  it('compiles every source to dist/ once, then skips until a source changes, and drops removed ones', async () => {
    const first = await build();
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toMatch(/^Building the server \(first start only\)… \d+\.\d s\n$/);
    expect((await run(process.execPath, [path.join(root, 'dist/src/lib/b.js')])).stdout).toBe('2\n');

    const unchanged = await build();
    expect(unchanged).toEqual({ code: 0, stdout: '', stderr: '' });

    source('src/a.ts', 'export const a: number = 41;\n');
    const changed = await build();
    expect(changed.stderr).toMatch(/^Building the server \(sources changed\)… \d+\.\d s\n$/);
    expect((await run(process.execPath, [path.join(root, 'dist/src/lib/b.js')])).stdout).toBe('42\n');

    // A file another build is writing (aside, before its rename) is not taken for a stale one.
    writeFileSync(path.join(root, 'dist/src/a.js.999.tmp'), '');
    unlinkSync(path.join(root, 'src/lib/b.ts'));
    expect((await build()).code).toBe(0);
    expect(existsSync(path.join(root, 'dist/src/a.js'))).toBe(true);
    expect(existsSync(path.join(root, 'dist/src/lib'))).toBe(false);
    expect(existsSync(path.join(root, 'dist/src/a.js.999.tmp'))).toBe(true);
  });

  it('a source that does not compile fails the build with its place, and the next start builds again', async () => {
    source('src/a.ts', 'export const a: number = ;\n');
    const broken = await build();
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain('failed\n');
    expect(broken.stderr).toContain('src/a.ts:1:');

    // Back to the sources of the last build that succeeded: built again all the same.
    source('src/a.ts', 'export const a: number = 41;\n');
    const again = await build();
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/^Building the server \(sources changed\)… /);
  });
});

interface Start {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
}

/** `npm start` as a newcomer runs it, on `dataDir` and a free port of 127.0.0.1. */
async function npmStart(dataDir: string, env: Record<string, string> = {}): Promise<Start & { url: string }> {
  const port = await freePort();
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group: npm, the shell and the server are stopped together
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => {
    stdout += d;
  });
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, stdout: () => stdout, stderr: () => stderr, exited, url: `http://127.0.0.1:${port}` };
}

/** Waits until the server answers /healthz (or stops: then fails with what it said). */
async function answering(start: Start & { url: string }): Promise<void> {
  for (let waited = 0; ; waited += 200) {
    if (start.child.exitCode !== null) throw new Error(`npm start exited: ${start.stderr()}${start.stdout()}`);
    if (waited > 240_000) throw new Error(`not up in 240 s: ${start.stderr()}${start.stdout()}`);
    const ok = await fetch(`${start.url}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function stop(start: Start): Promise<void> {
  if (start.child.pid) killGroup(start.child.pid, 'SIGTERM');
  await start.exited;
}

/** The server's lines on stderr: npm's own and a build line (the sources may change meanwhile) left out. */
const serverLines = (stderr: string) =>
  stderr
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('npm ') && !line.startsWith('Building the server'));

describe('npm start says what it is doing', () => {
  const dataDir = path.join(tempFolder('ws-first-start-'), 'data');
  const seconds = String.raw`\d+\.\d s`;

  it('a first start shows the database created and migrated, then where it is ready and how long it took', async () => {
    const start = await npmStart(dataDir);
    try {
      await answering(start);
      // The ready line is written right after listening, with the banner: both are there by now.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const lines = serverLines(start.stderr());
      const origin = start.url.replace(/[.]/g, '\\.');
      expect(lines).toHaveLength(4);
      expect(lines[0]).toMatch(new RegExp(`^Creating the database at ${dataDir.replace(/[.]/g, '\\.')}… ${seconds}$`));
      expect(lines[1]).toMatch(
        new RegExp(`^Migrating the database \\(${MIGRATIONS.length} migrations\\)… ${seconds}$`),
      );
      expect(lines[2]).toBe('Starting the server…');
      expect(lines[3]).toMatch(new RegExp(`^Ready on ${origin} in ${seconds}$`));
      // The first start's banner is still there, once.
      expect(start.stdout()).toContain('Workspace API is ready.');
      expect(start.stdout()).toMatch(/Demo API key \(every scope, shown once\): wsk_/);
    } finally {
      await stop(start);
    }
  }, 300_000);

  it('a later start on the same database says two lines: starting, and ready', async () => {
    const start = await npmStart(dataDir);
    try {
      await answering(start);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const lines = serverLines(start.stderr());
      expect(lines).toHaveLength(2);
      expect(lines[0]).toBe('Starting the server…');
      expect(lines[1]).toMatch(new RegExp(`^Ready on http://127\\.0\\.0\\.1:\\d+ in ${seconds}$`));
      expect(start.stdout()).not.toContain('Workspace API is ready.');
    } finally {
      await stop(start);
    }
  }, 300_000);

  it('with LOG_LEVEL=silent the start says nothing', async () => {
    const start = await npmStart(dataDir, { LOG_LEVEL: 'silent' });
    try {
      await answering(start);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(serverLines(start.stderr())).toEqual([]);
    } finally {
      await stop(start);
    }
  }, 300_000);

  it('a stage that fails says so on its line, and the reason follows on the next', async () => {
    // Files that are no database where the database would be created: refused, nothing removed.
    const taken = path.join(tempFolder('ws-first-start-'), 'data');
    mkdirSync(path.join(taken, 'pgdata'), { recursive: true });
    writeFileSync(path.join(taken, 'pgdata', 'notes.txt'), 'mine');
    const start = await npmStart(taken);
    expect(await start.exited).not.toBe(0);
    const lines = serverLines(start.stderr());
    expect(lines[0]).toBe(`Creating the database at ${taken}… failed`);
    expect(lines[1]).toContain('holds files but no database');
    expect(existsSync(path.join(taken, 'pgdata', 'notes.txt'))).toBe(true);
  }, 300_000);
});
