// The architecture as docs/architecture.md draws it is the code's: its table of folders and their
// imports is generated from src/ (scripts/import-picture.ts), and the layers' rules hold.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { folderImports, importTable } from '../../scripts/import-picture.js';

const imports = folderImports();
const importsOf = (folder: string) => imports.get(folder) ?? [];

describe('architecture', () => {
  it("docs/architecture.md's table of folders and their imports is the code's", () => {
    const page = readFileSync('docs/architecture.md', 'utf8');
    expect(page).toContain(importTable());
  });

  it('the domain knows no protocol: it imports neither HTTP, MCP, the operations nor the control plane', () => {
    for (const layer of ['http', 'mcp', 'operations', 'settings', 'cli'])
      expect(importsOf('domain')).not.toContain(layer);
  });

  it('operations are reached through one pipeline: they import no adapter, and MCP reaches the domain only through them', () => {
    for (const adapter of ['http', 'mcp', 'settings']) expect(importsOf('operations')).not.toContain(adapter);
    expect(importsOf('mcp')).not.toContain('domain');
  });

  it('observability is a leaf every layer may use: it imports nothing of the service', () => {
    expect(importsOf('observability')).toEqual([]);
  });
});
