// Reading a folder to send: its text files, recursively, in a stable order; dotfiles, dot-folders
// and node_modules left out silently; symbolic links and files that are not UTF-8 text skipped
// with a reason.
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { UsageError } from './errors.js';

export interface LocalFile {
  /** The path under the folder, with `/` separators, in NFC (the form the server stores). */
  path: string;
  content: string;
}

export interface ReadOptions {
  /** Told of every file left out, with the reason. */
  onSkip: (relative: string, reason: string) => void;
  /** Which files to read (by their relative path); the others are skipped as "not a supported type". */
  include?: (relative: string) => boolean;
}

export async function readFolder(root: string, options: ReadOptions): Promise<LocalFile[]> {
  const files: LocalFile[] = [];
  const decoder = new TextDecoder('utf-8', { fatal: true });
  async function walk(dir: string, prefix: string): Promise<void> {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    for (const entry of entries) {
      if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
      const full = path.join(dir, entry.name);
      const relative = (prefix ? `${prefix}/${entry.name}` : entry.name).normalize('NFC');
      if (entry.isSymbolicLink()) {
        options.onSkip(relative, 'a symbolic link');
      } else if (entry.isDirectory()) {
        await walk(full, relative);
      } else if (entry.isFile()) {
        if (options.include && !options.include(relative)) {
          options.onSkip(relative, 'not a supported type');
          continue;
        }
        const bytes = await readFile(full);
        let content: string;
        try {
          if (bytes.includes(0)) throw new Error('binary');
          content = decoder.decode(bytes);
        } catch {
          options.onSkip(relative, 'not UTF-8 text');
          continue;
        }
        files.push({ path: relative, content });
      }
    }
  }
  const stat = await lstat(root).catch(() => undefined);
  if (!stat?.isDirectory()) throw new UsageError(`${root} is not a folder.`, 'invalid_value', '<folder>');
  await walk(root, '');
  return files;
}
