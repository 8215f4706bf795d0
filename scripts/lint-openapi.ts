// Lints the OpenAPI document the app serves (taken as scripts/generate-client.ts takes it: the app
// built in-process on an in-memory database, default configuration) with Redocly CLI (redocly.yaml,
// its `recommended` rules) and Spectral (.spectral.yaml, `spectral:oas`). Both run offline; either
// finding an error or a warning fails the run.
//
//   npm run lint:openapi
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openApiDocument } from './generate-client.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name: string) => path.join(ROOT, 'node_modules/.bin', name);

interface RedoclyProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location?: { pointer?: string }[];
}

/** Redocly's findings, printed one a line; the number of errors and warnings. */
function redocly(file: string): number {
  const result = spawnSync(
    bin('redocly'),
    ['lint', file, '--config', path.join(ROOT, 'redocly.yaml'), '--format=json'],
    {
      cwd: ROOT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      // No telemetry, no update check: the linter runs offline.
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    },
  );
  let report: { problems: RedoclyProblem[] };
  try {
    report = JSON.parse(result.stdout.slice(result.stdout.indexOf('{')));
  } catch {
    process.stderr.write(`redocly lint did not report: ${result.stderr}\n`);
    return 1;
  }
  for (const problem of report.problems) {
    const where = problem.location?.[0]?.pointer ?? '';
    process.stdout.write(`  ${problem.severity} ${problem.ruleId}: ${problem.message} (${where})\n`);
  }
  return report.problems.length;
}

/** Spectral's findings as it prints them; 1 when any is a warning or worse. */
function spectral(file: string): number {
  const result = spawnSync(
    bin('spectral'),
    ['lint', file, '--ruleset', path.join(ROOT, '.spectral.yaml'), '--format', 'text', '--fail-severity', 'warn'],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  const output = `${result.stdout}${result.stderr}`.trim();
  if (output) process.stdout.write(`${output.replace(/^/gm, '  ')}\n`);
  return result.status === 0 ? 0 : 1;
}

async function main(): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'openapi-lint-'));
  try {
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(await openApiDocument(), null, 2));
    process.stdout.write('Redocly (recommended):\n');
    const redoclyProblems = redocly(file);
    process.stdout.write(`  ${redoclyProblems === 0 ? 'no problems' : `${redoclyProblems} problem(s)`}\n`);
    process.stdout.write('Spectral (spectral:oas):\n');
    const spectralFailed = spectral(file);
    if (spectralFailed === 0) process.stdout.write('  no problems\n');
    return redoclyProblems === 0 && spectralFailed === 0 ? 0 : 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`lint-openapi: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
