// Builds the answer benchmark's corpora from Debian's manual pages, in English, French, German and
// Spanish (packages manpages, manpages-fr, manpages-de, manpages-es; rendered with man-db's `man`).
// Real text no one here wrote, with translations made by people: each page becomes a help-centre
// article in Markdown, its sections as `##` headings and each option as a paragraph of its own.
//
//   npx tsx bench/answers/build-corpus.ts      (writes bench/answers/corpus/<corpus>/<language>.json)
//
// Two corpora: `files` (GNU coreutils: files, text and the shell's helpers), on which retrieval is
// tuned, and `system` (everything else: packages, users and groups, manuals, networking, searching,
// compression, configuration files), held out to report on. Only pages present in all four
// languages are taken, so every question has its answer in every language.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const LANGUAGES = ['en', 'fr', 'de', 'es'] as const;
export type Language = (typeof LANGUAGES)[number];
const SECTIONS = ['1', '5', '8'];
const MAN_ROOT = '/usr/share/man';
/** Pages that repeat another word for word (`dir` and `vdir` are `ls`; the `-tcp` builds the `-sysv`). */
const DUPLICATES = new Set(['dir.1', 'vdir.1', 'faked-tcp.1', 'fakeroot-tcp.1']);
const OUT = path.resolve(import.meta.dirname, 'corpus');

export interface CorpusDocument {
  /** `ls.1`: the page and its section, the same in every language. */
  slug: string;
  title: string;
  content: string;
}

function pageDir(language: Language, section: string): string {
  return language === 'en' ? `${MAN_ROOT}/man${section}` : `${MAN_ROOT}/${language}/man${section}`;
}

/** Pages (`ls.1`) present in every language, with the package that ships the English one. */
function commonPages(): { slug: string; file: string; pkg: string }[] {
  const pages: { slug: string; file: string; pkg: string }[] = [];
  for (const section of SECTIONS) {
    const sets = LANGUAGES.map((l) => new Set(existsSync(pageDir(l, section)) ? readdirSync(pageDir(l, section)) : []));
    for (const file of [...(sets[0] ?? [])].sort()) {
      if (!file.endsWith('.gz') || !sets.every((s) => s.has(file))) continue;
      const slug = file.replace(/\.gz$/, '');
      if (!/^[a-z][a-z0-9._+-]*\.[0-9]$/.test(slug) || slug.startsWith('intro.') || DUPLICATES.has(slug)) continue;
      // Links (`egrep`, alternatives) repeat another page.
      if (LANGUAGES.some((l) => lstatSync(`${pageDir(l, section)}/${file}`).isSymbolicLink())) continue;
      const owner = execFileSync('dpkg', ['-S', `${pageDir('en', section)}/${file}`], { encoding: 'utf8' });
      pages.push({ slug, file, pkg: owner.split(':')[0] ?? '' });
    }
  }
  return pages;
}

/** The page as man-db renders it, without hyphenation or justification, one line per paragraph. */
function render(language: Language, section: string, file: string): string {
  return execFileSync('man', ['--nj', '--nh', '-l', `${pageDir(language, section)}/${file}`], {
    encoding: 'utf8',
    env: { ...process.env, MANWIDTH: '4000', LANG: 'C.UTF-8' }, // to a pipe: plain text, no overstrikes
    stdio: ['ignore', 'pipe', 'ignore'],
  });
}

/** Rendered page → `{title, content}`: headings at column 0, paragraphs indented, options as tags. */
export function toArticle(slug: string, text: string): { title: string; content: string } {
  const lines = text.split('\n').slice(1, -2); // the running header and footer
  const blocks: string[] = [];
  let title = slug;
  let heading = '';
  let tag: string | undefined;
  const para: string[] = [];
  const flush = () => {
    if (para.length === 0 && tag === undefined) return;
    const body = para.join(' ').replace(/\s+/g, ' ').trim();
    blocks.push(tag === undefined ? body : body === '' ? tag : `${tag}: ${body}`);
    para.length = 0;
    tag = undefined;
  };
  for (const raw of lines) {
    const line = raw.replace(/\s+$/, '');
    if (line === '') {
      flush();
      continue;
    }
    const indent = line.length - line.trimStart().length;
    const words = line.trim();
    if (indent === 0) {
      flush();
      heading = words;
      blocks.push(`## ${words.charAt(0)}${words.slice(1).toLowerCase()}`);
      continue;
    }
    if (blocks.length === 1 && title === slug && words.includes(' - ')) title = words;
    const inline = /^(-\S.*?)\s{2,}(\S.*)$/.exec(words);
    if (indent <= 8 && inline && heading !== '') {
      flush();
      tag = inline[1];
      para.push(inline[2] ?? '');
    } else if (indent <= 8 && /^-{1,2}\S/.test(words) && para.length === 0) {
      flush();
      tag = words;
    } else {
      para.push(words);
    }
  }
  flush();
  return { title, content: blocks.join('\n\n') };
}

/** Coreutils pages form the tuning corpus, every other package's the held-out one. */
export const corpusOf = (pkg: string): 'files' | 'system' => (pkg === 'coreutils' ? 'files' : 'system');

function main(): void {
  const pages = commonPages();
  for (const language of LANGUAGES) {
    const byCorpus: Record<string, CorpusDocument[]> = { files: [], system: [] };
    for (const page of pages) {
      const section = page.slug.split('.').pop() ?? '1';
      const { title, content } = toArticle(page.slug, render(language, section, page.file));
      if (content.length < 200) continue;
      byCorpus[corpusOf(page.pkg)]?.push({ slug: page.slug, title, content });
    }
    for (const [corpus, documents] of Object.entries(byCorpus)) {
      mkdirSync(path.join(OUT, corpus), { recursive: true });
      const file = path.join(OUT, corpus, `${language}.json`);
      writeFileSync(file, `${JSON.stringify({ corpus, language, documents }, null, 1)}\n`);
      console.log(`${file}: ${documents.length} documents`);
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main();
