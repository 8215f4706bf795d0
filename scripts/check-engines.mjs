#!/usr/bin/env node
// Checks that `npm ci` installs no package whose Node.js versions (its `engines.node`) leave out a
// version the project supports (package.json `engines.node`): on such a version npm prints an
// EBADENGINE warning, and the package may not work there. Every package of package-lock.json is
// checked, those of other platforms included, and so is the Node.js running this script.
// semver (installed with the dependencies) reads the ranges as npm does.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const semver = createRequire(path.join(ROOT, 'package.json'))('semver');

const readJson = (file) => JSON.parse(readFileSync(path.join(ROOT, file), 'utf8'));
const supported = readJson('package.json').engines?.node;
if (!supported) {
  process.stderr.write('package.json states no Node.js versions (engines.node)\n');
  process.exit(1);
}

const problems = [];
if (!semver.satisfies(process.version, supported)) {
  problems.push(`this Node.js (${process.version}) is not one the project supports (${supported})`);
}
for (const [where, entry] of Object.entries(readJson('package-lock.json').packages ?? {})) {
  const wants = entry.engines?.node;
  if (where === '' || !wants) continue;
  const name = `${where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length)}@${entry.version}`;
  if (!semver.validRange(wants)) problems.push(`${name}: engines.node "${wants}" is not a version range`);
  else if (!semver.subset(supported, wants)) {
    problems.push(`${name} (${where}) runs on Node.js ${wants}, not on every supported version (${supported})`);
  }
}

if (problems.length > 0) {
  process.stderr.write(`Node.js versions: ${problems.length} problem(s)\n${problems.map((p) => `  ${p}\n`).join('')}`);
  process.stderr.write(
    'Pin a release of the package that runs on every supported version (package.json "overrides"), or change engines.node.\n',
  );
  process.exit(1);
}
process.stdout.write(`Node.js versions: every package runs on ${supported} (this one: ${process.version})\n`);
