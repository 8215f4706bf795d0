#!/usr/bin/env node
// Compiles the server (src/ and client/src/) to JavaScript in dist/, for `npm start`.
//
// Each TypeScript file becomes one JavaScript file at the same place under dist/ (dist/src/cli/
// main.js…), types removed and nothing else changed: esbuild does this in a second or two where
// `tsc` took minutes on a busy 2-core machine. Types are checked by `npm run typecheck`, not here.
// esbuild comes with tsx (a dependency): it is resolved from there.
//
// The build is skipped when the sources are those of the last build (a hash of their contents,
// this script, tsconfig.json and esbuild's version, kept in dist/.build-hash), so a start on
// unchanged sources pays a few milliseconds. Each file is written whole (written aside, then
// renamed), so a server starting meanwhile never reads half of one; files of sources since removed
// are removed. A line on stderr says when a build runs and how long it took.
//
//   node scripts/build.mjs [--force] [--root DIR]   (DIR: the project, by default this one)
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(import.meta.url);
const SOURCE_DIRS = ['src', 'client/src'];

/** The TypeScript files to compile (declaration files hold types only), relative to `root`. */
function sources(root) {
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const relative = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(relative);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) found.push(relative);
    }
  };
  for (const dir of SOURCE_DIRS) if (existsSync(path.join(root, dir))) walk(dir);
  return found.sort();
}

function esbuild() {
  const require = createRequire(import.meta.url);
  const tsx = path.dirname(require.resolve('tsx/package.json'));
  return require(require.resolve('esbuild', { paths: [tsx] }));
}

function hashOf(root, files, esbuildVersion) {
  const hash = createHash('sha256').update(`esbuild ${esbuildVersion}\n`).update(readFileSync(SCRIPT));
  for (const file of ['tsconfig.json', ...files]) {
    hash
      .update(`\n${file}\n`)
      .update(readFileSync(path.join(root, file)))
      .update('\n');
  }
  return hash.digest('hex');
}

/** Removes the compiled files of sources no longer there (and directories left empty). */
function removeStale(out, outputs) {
  const keep = new Set(outputs);
  const sweep = (dir) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        sweep(full);
        if (readdirSync(full).length === 0) rmSync(full, { recursive: true });
      } else if (!keep.has(full) && !entry.name.endsWith('.tmp')) rmSync(full); // .tmp: another build's
    }
  };
  for (const dir of SOURCE_DIRS) sweep(path.join(out, dir));
}

/** Builds `root`'s dist/ unless it is up to date; answers whether it built. */
export async function build({ root = path.resolve(path.dirname(SCRIPT), '..'), force = false } = {}) {
  const out = path.join(root, 'dist');
  const hashFile = path.join(out, '.build-hash');
  const files = sources(root);
  const compiler = esbuild();
  const hash = hashOf(root, files, compiler.version);
  const fresh = existsSync(hashFile) && readFileSync(hashFile, 'utf8').trim() === hash;
  if (fresh && !force) return false;
  const first = !existsSync(hashFile) && !existsSync(path.join(out, 'src'));
  process.stderr.write(`Building the server${first ? ' (first start only)' : fresh ? '' : ' (sources changed)'}… `);
  const started = performance.now();
  rmSync(hashFile, { force: true });
  try {
    const result = await compiler.build({
      absWorkingDir: root,
      entryPoints: files,
      outdir: out,
      outbase: '.',
      bundle: false,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      sourcemap: true,
      tsconfig: 'tsconfig.json',
      logLevel: 'silent',
      write: false,
    });
    for (const file of result.outputFiles) {
      mkdirSync(path.dirname(file.path), { recursive: true });
      const aside = `${file.path}.${process.pid}.tmp`;
      writeFileSync(aside, file.contents);
      renameSync(aside, file.path);
    }
    removeStale(
      out,
      result.outputFiles.map((file) => file.path),
    );
  } catch (error) {
    process.stderr.write('failed\n');
    throw error;
  }
  writeFileSync(hashFile, `${hash}\n`);
  process.stderr.write(`${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === SCRIPT) {
  const at = process.argv.indexOf('--root');
  try {
    await build({
      force: process.argv.includes('--force'),
      ...(at > 0 && process.argv[at + 1] ? { root: path.resolve(process.argv[at + 1]) } : {}),
    });
  } catch (error) {
    // esbuild's errors name the file, line and column of each problem.
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
