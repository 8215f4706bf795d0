#!/usr/bin/env node
// Keeps `npm ci` working against a registry that serves only this platform's binaries.
//
// Packages such as Biome, esbuild and Rollup ship one optional dependency per platform. When the
// registry answers 404 for the other platforms' ones, `npm install` leaves them out of
// package-lock.json, and `npm ci` then refuses that very lockfile as "out of sync"
// (npm/cli#9846). This script asks `npm ci --dry-run` which entries it misses and adds each as an
// optional entry at the version its parent asks for; npm ci then skips them as the wrong
// platform, as it would have anyway. Run it after changing dependencies:
//   npm install && node scripts/lockfile-optionals.mjs
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const LOCK = 'package-lock.json';

function missing() {
  try {
    execFileSync('npm', ['ci', '--dry-run', '--no-audit', '--no-fund', '--ignore-scripts'], { stdio: 'pipe' });
    return [];
  } catch (error) {
    const output = `${error.stdout ?? ''}${error.stderr ?? ''}`;
    const names = [...output.matchAll(/Missing: (\S+?)@\S* from lock file/g)].map((m) => m[1]);
    if (names.length === 0) throw new Error(`npm ci --dry-run failed for another reason:\n${output.slice(-2000)}`);
    return names;
  }
}

for (let round = 0; round < 3; round++) {
  const names = missing();
  if (names.length === 0) {
    console.log('package-lock.json: npm ci accepts it');
    process.exit(0);
  }
  const lock = JSON.parse(readFileSync(LOCK, 'utf8'));
  for (const name of names) {
    let spec;
    let dev = true;
    for (const [location, entry] of Object.entries(lock.packages)) {
      const wanted = entry.optionalDependencies?.[name];
      if (wanted) {
        spec = wanted;
        dev = dev && (location === '' ? false : Boolean(entry.dev));
      }
    }
    if (!spec) throw new Error(`no package in the lockfile asks for ${name}`);
    lock.packages[`node_modules/${name}`] = {
      version: spec.replace(/^[\^~=]/, ''),
      ...(dev ? { dev: true } : {}),
      optional: true,
    };
  }
  lock.packages = Object.fromEntries(
    Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))),
  );
  writeFileSync(LOCK, `${JSON.stringify(lock, null, 2)}\n`);
  console.log(`package-lock.json: added ${names.length} platform packages the registry does not serve`);
}
console.error('package-lock.json: npm ci still refuses it');
process.exit(1);
