// The folders of src/ and which other folders each imports, as docs/architecture.md draws them:
// `npx tsx scripts/import-picture.ts` prints the table; test/proof/architecture.test.ts checks that
// the page's table is the code's. Type-only imports count: they too are a dependency to read.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SRC = path.join(ROOT, 'src');
const SPECIFIER = /(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g;

/** The top-level folder of a file under src/ (`app.ts` and the other root files: `(root)`). */
function folderOf(file: string): string {
  const parts = path.relative(SRC, file).split(path.sep);
  return parts.length > 1 ? (parts[0] as string) : '(root)';
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'migrations' ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Each folder of src/ with the folders it imports, both sorted. */
export function folderImports(): Map<string, string[]> {
  const edges = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file);
    const targets = edges.get(from) ?? new Set<string>();
    edges.set(from, targets);
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
      const target = path.resolve(path.dirname(file), specifier as string);
      if (!target.startsWith(SRC + path.sep)) continue;
      const to = folderOf(target);
      if (to !== from) targets.add(to);
    }
  }
  return new Map([...edges].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, [...v].sort()]));
}

/** The table as docs/architecture.md holds it. */
export function importTable(): string {
  const rows = [...folderImports()].map(([folder, imports]) => `| \`${folder}\` | ${imports.join(', ') || '—'} |`);
  return ['| folder | imports |', '|---|---|', ...rows].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) console.log(importTable());
