// A local file as a document: its title and text. Markdown and plain text are kept as written;
// HTML is read for its text (scripts, styles and navigation left out), one block a line.
import { load } from 'cheerio';

export const IMPORTED_EXTENSIONS = ['.md', '.markdown', '.mdx', '.html', '.htm', '.txt', '.text'];

/** The longest document title and body the API takes (createDocument), in characters. */
export const MAX_TITLE_LENGTH = 500;
export const MAX_CONTENT_LENGTH = 1_000_000;

export const isImported = (relative: string) => IMPORTED_EXTENSIONS.some((ext) => relative.toLowerCase().endsWith(ext));

export interface DocumentText {
  title: string;
  content: string;
}

const baseName = (relative: string) => (relative.split('/').pop() ?? relative).replace(/\.[^.]+$/, '');

const clip = (title: string) => {
  const chars = Array.from(title.replace(/\s+/g, ' ').trim());
  return chars.length > MAX_TITLE_LENGTH ? `${chars.slice(0, MAX_TITLE_LENGTH - 1).join('')}…` : chars.join('');
};

/** Markdown: the front matter's `title:`, else the first `# heading`, else the file's name. */
function markdown(relative: string, source: string): DocumentText {
  const front = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(source);
  const fromFront = front?.[1] ? /^title:\s*["']?(.+?)["']?\s*$/m.exec(front[1])?.[1] : undefined;
  const body = front ? source.slice(front[0].length) : source;
  const heading = /^#\s+(.+?)\s*#*\s*$/m.exec(body)?.[1];
  return { title: clip(fromFront ?? heading ?? baseName(relative)), content: body.trim() };
}

const BLOCKS = 'p, div, section, article, header, footer, li, tr, br, pre, blockquote, h1, h2, h3, h4, h5, h6, dt, dd';

/** HTML: `<title>`, else the first `<h1>`, else the file's name; the body's text. */
function html(relative: string, source: string): DocumentText {
  const $ = load(source);
  const title = $('head > title').first().text().trim() || $('h1').first().text().trim() || baseName(relative);
  $('script, style, noscript, template, nav, svg').remove();
  $(BLOCKS).after('\n');
  const text = ($('body').length > 0 ? $('body').text() : $.root().text())
    .split('\n')
    .map((line) => line.replace(/\s+/g, ' ').trim())
    .filter(Boolean)
    .join('\n');
  return { title: clip(title), content: text };
}

export function toDocument(relative: string, source: string): DocumentText {
  const lower = relative.toLowerCase();
  if (lower.endsWith('.html') || lower.endsWith('.htm')) return html(relative, source);
  if (lower.endsWith('.txt') || lower.endsWith('.text'))
    return { title: clip(baseName(relative)), content: source.trim() };
  return markdown(relative, source);
}
