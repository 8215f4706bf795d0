// The website connector: crawls a source's `domain` and turns each HTML page into a page of text.
// - Pages come from the sitemap (robots.txt `Sitemap:` lines, else /sitemap.xml, sitemap indexes
//   followed one level) when it lists any; otherwise links are followed from the start page.
// - Same host only (scheme, host and port of the start URL); robots.txt rules for our user agent
//   are respected, and pages marked `noindex` are skipped.
// - Caps: pages per crawl, bytes per page, bytes per crawl, and a timeout per request.
// - Every request goes through src/lib/ssrf.ts: private targets are refused unless allowed.
// HTML to text with cheerio (a parser, not regular expressions): navigation, headers, footers,
// scripts, styles and forms are dropped, and the main content (`main`, `article`, else `body`)
// is kept with one line per block (paragraph, heading, list item, table row).
import { TextDecoder } from 'node:util';
import robotsParserModule from 'robots-parser';
import { OutboundRequestError, type SafeResponse, safeRequest } from '../../lib/ssrf.js';
import { cutText } from '../../lib/text.js';
import { MAX_PAGE_ID_LENGTH } from './documents-records.js';

// The HTML parser is loaded with the first crawl: a server that never crawls does not hold it.
let cheerioModule: Promise<typeof import('cheerio')> | undefined;
const loadCheerio = () => {
  cheerioModule ??= import('cheerio');
  return cheerioModule;
};

// robots-parser is CommonJS (`module.exports = function`); its types describe an ES default export.
type Robots = {
  isAllowed(url: string, ua?: string): boolean | undefined;
  getSitemaps(): string[];
};
const robotsParser = robotsParserModule as unknown as (url: string, contents: string) => Robots;

export const CRAWLER_USER_AGENT = 'WorkspaceKnowledgeBot/1.0';

export interface CrawlOptions {
  allowPrivate: boolean;
  maxPages?: number;
  maxPageBytes?: number;
  maxTotalBytes?: number;
  timeoutMs?: number;
  /** Pages fetched at once. */
  concurrency?: number;
  signal?: AbortSignal;
}

export interface CrawledPage {
  /** The URL path, with its query string if it has one. */
  page_id: string;
  url: string;
  title: string;
  content: string;
  language: string;
}

export interface CrawlResult {
  pages: CrawledPage[];
  /** Pages that exist but could not be read this time (server error, timeout): keep what we have. */
  unreadable: string[];
  /** Whether the page cap stopped the crawl (pages it did not reach may still exist). */
  truncated: boolean;
  /** The pages the crawl asked for, whatever they answered. */
  visited: string[];
}

/** A crawl that could not start (bad domain, unreachable or refused host). Its message is for users. */
export class CrawlError extends Error {
  override name = 'CrawlError';
}

export const CRAWL_DEFAULTS = {
  maxPages: 200,
  maxPageBytes: 2 * 1024 * 1024,
  maxTotalBytes: 50 * 1024 * 1024,
  timeoutMs: 10_000,
  concurrency: 4,
};

/** `example.com`, `https://example.com/help` → the URL the crawl starts from. */
export function startUrl(domain: string): URL {
  const text = domain.trim();
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `https://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new CrawlError(`'${domain}' is not a domain or URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CrawlError(`'${domain}' must be an http or https address.`);
  }
  if (url.username || url.password) throw new CrawlError('The domain must not carry credentials.');
  url.hash = '';
  return url;
}

const pageIdOf = (url: URL) => `${url.pathname}${url.search}`;
/** A page whose path and query (percent-encoded: ASCII) are longer cannot be stored: it is left out. */
const storablePage = (url: URL) => pageIdOf(url).length <= MAX_PAGE_ID_LENGTH;

/** Byte order marks, as Latin-1 text, and the encodings they mark. */
const BYTE_ORDER_MARKS = [
  ['\xef\xbb\xbf', 'utf-8'],
  ['\xfe\xff', 'utf-16be'],
  ['\xff\xfe', 'utf-16le'],
] as const;

/**
 * A page's text in the encoding it declares, as a browser reads it: a byte order mark, else the
 * Content-Type's `charset`, else a `<meta>` charset in the first 1024 bytes, else UTF-8. A name the
 * Encoding Standard does not know reads as UTF-8. As the HTML standard's prescan has it, a `<meta>`
 * cannot declare UTF-16 (it could not have been read as ASCII to be found): such a page is UTF-8,
 * and one declaring x-user-defined is windows-1252.
 */
export function decodePage(body: Buffer, contentType: string): string {
  const head = body.subarray(0, 1024).toString('latin1');
  const sent =
    BYTE_ORDER_MARKS.find(([mark]) => head.startsWith(mark))?.[1] ??
    /charset\s*=\s*["']?([\w.:-]+)/i.exec(contentType)?.[1];
  const meta = /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(head)?.[1];
  let encoding = decoderFor(sent ?? meta ?? 'utf-8').encoding;
  if (sent === undefined && meta !== undefined) {
    if (encoding.startsWith('utf-16')) encoding = 'utf-8';
    else if (meta.toLowerCase() === 'x-user-defined') encoding = 'windows-1252';
  }
  return decoderFor(encoding).decode(body);
}

/** A decoder for an encoding's label, or for UTF-8 when the Encoding Standard does not know it. */
function decoderFor(label: string): TextDecoder {
  try {
    return new TextDecoder(label);
  } catch {
    return new TextDecoder('utf-8');
  }
}

/** A crawlable form of a link: same origin, http(s), no fragment; undefined otherwise. */
function sameOrigin(href: string, base: URL, origin: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(href, base);
  } catch {
    return undefined;
  }
  if (url.origin !== origin) return undefined;
  url.hash = '';
  return url;
}

// Links to files that are not pages.
const NOT_A_PAGE =
  /\.(?:png|jpe?g|gif|webp|svg|ico|pdf|zip|gz|tgz|rar|7z|mp3|mp4|m4v|mov|avi|webm|woff2?|ttf|eot|css|js|json|xml|txt|csv|docx?|xlsx?|pptx?)$/i;

const DROPPED =
  'script, style, noscript, template, iframe, svg, canvas, nav, footer, aside, form, button, ' +
  '[role=navigation], [role=banner], [role=contentinfo], [aria-hidden=true], [hidden]';
const BLOCKS =
  'p, div, section, article, main, li, ul, ol, dl, dt, dd, h1, h2, h3, h4, h5, h6, br, tr, table, pre, blockquote, figure, figcaption, hr';

/** The page's title, main text, language and links (links before anything is dropped). */
export async function extractPage(
  html: string,
  url: URL,
): Promise<{
  title: string;
  content: string;
  language: string | undefined;
  links: string[];
  noindex: boolean;
  nofollow: boolean;
}> {
  const $ = (await loadCheerio()).load(html);
  const links = $('a[href]')
    .filter((_, el) => !/\bnofollow\b/i.test($(el).attr('rel') ?? ''))
    .map((_, el) => $(el).attr('href') ?? '')
    .get()
    .filter((href) => href !== '');
  const robots = ($('meta[name="robots" i]').attr('content') ?? '').toLowerCase();
  const language = $('html').attr('lang')?.trim() || undefined;
  const title =
    $('title').first().text().replace(/\s+/g, ' ').trim() ||
    $('h1').first().text().replace(/\s+/g, ' ').trim() ||
    pathTitle(url.pathname);

  $(DROPPED).remove();
  // A page's header (logo, menu) goes; an article's own header (its heading) stays.
  $('header')
    .filter((_, el) => $(el).parents('main, article').length === 0)
    .remove();
  const main = $('main').first().length
    ? $('main').first()
    : $('article').first().length
      ? $('article').first()
      : $('[role=main]').first().length
        ? $('[role=main]').first()
        : $('body');
  main.find(BLOCKS).each((_, el) => {
    $(el).before('\n').after('\n');
  });
  const content = main
    .text()
    .split('\n')
    .map((line) => line.replace(/[ \t\u00a0]+/g, ' ').trim())
    .filter((line) => line !== '')
    .join('\n')
    .trim();
  return {
    title,
    content,
    language: language && /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/.test(language) ? language : undefined,
    links,
    noindex: /\bnoindex\b|\bnone\b/.test(robots),
    nofollow: /\bnofollow\b|\bnone\b/.test(robots),
  };
}

/** A path as a title: percent-decoded where it decodes (`/%ff` does not, and is kept as it is). */
function pathTitle(pathname: string): string {
  try {
    return decodeURIComponent(pathname);
  } catch {
    return pathname;
  }
}

type FetchText = (url: URL, accept: string) => Promise<SafeResponse>;

/** Fetches for one crawl: same-origin redirects only, within the page and the crawl's byte caps. */
function crawlFetcher(options: CrawlOptions, limits: typeof CRAWL_DEFAULTS, origin: string): FetchText {
  let totalBytes = 0;
  return async (url, accept) => {
    if (options.signal?.aborted) throw new CrawlError('The sync was stopped.');
    const remaining = limits.maxTotalBytes - totalBytes;
    if (remaining <= 0) throw new OutboundRequestError('The crawl reached its byte cap.', 'too_large');
    const response = await safeRequest(url, {
      allowPrivate: options.allowPrivate,
      headers: { 'user-agent': CRAWLER_USER_AGENT, accept },
      timeoutMs: limits.timeoutMs,
      maxBytes: Math.min(limits.maxPageBytes, remaining),
      maxRedirects: 5,
      redirectAllowed: (to) => to.origin === origin,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    totalBytes += response.body.length;
    return response;
  };
}

/**
 * The site's robots.txt: a missing file (4xx) allows everything; an unreadable one (5xx, network)
 * also does not stop the crawl, but a refused host does.
 */
async function readRobots(fetchText: FetchText, origin: string): Promise<Robots> {
  let robotsText = '';
  try {
    const robots = await fetchText(new URL('/robots.txt', origin), 'text/plain');
    if (robots.status === 200) robotsText = robots.body.toString('utf8');
  } catch (error) {
    if (error instanceof OutboundRequestError && error.reason === 'blocked') throw new CrawlError(error.message);
  }
  return robotsParser(new URL('/robots.txt', origin).href, robotsText);
}

/** A crawl under way: where it started, what it queues, and what it has read or could not read. */
interface Crawl {
  start: URL;
  origin: string;
  fetchText: FetchText;
  /** Links are followed only when no sitemap lists the pages. */
  followLinks: boolean;
  enqueue(url: URL): void;
  pages: Map<string, CrawledPage>;
  unreadable: Set<string>;
  visited: Set<string>;
  firstError: string | undefined;
}

/** The page could not be read this time: its document stays; the sync reports the first reason. */
function markUnreadable(crawl: Crawl, url: URL, reason: string): void {
  crawl.firstError ??= reason;
  crawl.unreadable.add(pageIdOf(url));
}

// A page that is not part of the site (404, 410, other 4xx, a refused redirect, not HTML, a path
// too long to store) is left out. The start page, though, is unreadable, never gone (sent
// elsewhere, as from http:// to https://; refused, as by a firewall; a maintenance notice): read
// as empty, it would remove every document of the source. When links are followed from it,
// nothing else is read, and the sync fails below, saying why; with a sitemap, its document is kept.
function leaveOut(crawl: Crawl, url: URL, reason: string): void {
  if (url.href === crawl.start.href) markUnreadable(crawl, url, reason);
}

/** Fetches one page and, when it is an HTML page of the site, reads it. */
async function visit(crawl: Crawl, url: URL): Promise<void> {
  crawl.visited.add(pageIdOf(url));
  let response: SafeResponse;
  try {
    response = await crawl.fetchText(url, 'text/html,application/xhtml+xml');
  } catch (error) {
    if (error instanceof OutboundRequestError && error.reason === 'blocked' && url.href === crawl.start.href) {
      throw new CrawlError(error.message);
    }
    markUnreadable(crawl, url, error instanceof Error ? error.message : String(error));
    return;
  }
  if (response.status >= 500 || response.status === 429) {
    markUnreadable(crawl, url, `${url.href} answered ${response.status}`);
    return;
  }
  if (response.status !== 200) {
    const location = String(response.headers.location ?? '');
    leaveOut(
      crawl,
      url,
      response.status >= 300 && response.status < 400
        ? `${url.href} redirects to ${location}, outside ${crawl.origin}; give that address as the domain`
        : `${url.href} answered ${response.status}`,
    );
    return;
  }
  const type = String(response.headers['content-type'] ?? '');
  if (!/text\/html|application\/xhtml\+xml/i.test(type)) {
    leaveOut(crawl, url, `${url.href} answered ${type.split(';')[0]?.trim() || 'no content type'}, not HTML`);
    return;
  }
  const finalUrl = response.url;
  if (finalUrl.origin !== crawl.origin) return;
  if (!storablePage(finalUrl)) {
    leaveOut(crawl, url, `${url.href} redirects to a path longer than ${MAX_PAGE_ID_LENGTH} characters`);
    return;
  }
  await readPage(crawl, finalUrl, decodePage(response.body, type));
}

/** Queues the page's links (when links are followed) and keeps its text (unless `noindex`). */
async function readPage(crawl: Crawl, finalUrl: URL, html: string): Promise<void> {
  const page = await extractPage(html, finalUrl);
  if (crawl.followLinks && !page.nofollow) {
    for (const href of page.links) {
      const link = sameOrigin(href, finalUrl, crawl.origin);
      if (link) crawl.enqueue(link);
    }
  }
  if (page.noindex || page.content === '') return;
  const pageId = pageIdOf(finalUrl);
  if (!crawl.pages.has(pageId)) {
    crawl.pages.set(pageId, {
      page_id: pageId,
      url: finalUrl.href,
      title: cutText(page.title, 500),
      content: page.content,
      language: page.language ?? 'en',
    });
  }
}

/** Crawls a website. Throws CrawlError when nothing could be read at all. */
export async function crawlWebsite(domain: string, options: CrawlOptions): Promise<CrawlResult> {
  const limits = { ...CRAWL_DEFAULTS, ...stripUndefined(options) };
  const start = startUrl(domain);
  const origin = start.origin;
  const fetchText = crawlFetcher(options, limits, origin);
  const robots = await readRobots(fetchText, origin);
  const allowed = (url: URL) => robots.isAllowed(url.href, CRAWLER_USER_AGENT) !== false;

  const fromSitemap = await sitemapUrls(robots.getSitemaps(), origin, fetchText);
  const queue: URL[] = [];
  const queued = new Set<string>();
  const crawl: Crawl = {
    start,
    origin,
    fetchText,
    followLinks: fromSitemap.length === 0,
    enqueue: (url) => {
      if (queued.has(url.href) || NOT_A_PAGE.test(url.pathname) || !allowed(url) || !storablePage(url)) return;
      queued.add(url.href);
      queue.push(url);
    },
    pages: new Map(),
    unreadable: new Set(),
    visited: new Set(),
    firstError: undefined,
  };
  if (crawl.followLinks) crawl.enqueue(start);
  else for (const url of fromSitemap) crawl.enqueue(url);

  let fetched = 0;
  let truncated = false;
  while (queue.length > 0) {
    if (options.signal?.aborted) throw new CrawlError('The sync was stopped.');
    const room = limits.maxPages - fetched;
    if (room <= 0) {
      truncated = true;
      break;
    }
    const batch = queue.splice(0, Math.min(limits.concurrency, room));
    fetched += batch.length;
    await Promise.all(batch.map((url) => visit(crawl, url)));
  }
  // A page cut off by the stop reads as unreadable: a stopped crawl never answers, since an answer
  // missing pages would have their documents removed.
  if (options.signal?.aborted) throw new CrawlError('The sync was stopped.');

  const { pages, unreadable, visited, firstError } = crawl;
  if (pages.size === 0 && firstError !== undefined) {
    throw new CrawlError(`No page of ${origin} could be read: ${firstError}`);
  }
  return {
    pages: [...pages.values()],
    unreadable: [...unreadable].filter((id) => !pages.has(id)),
    truncated,
    visited: [...visited],
  };
}

/** Page URLs listed by the sitemaps (robots.txt's, else /sitemap.xml), same origin only. */
async function sitemapUrls(declared: string[], origin: string, fetchText: FetchText): Promise<URL[]> {
  const candidates = declared
    .map((href) => sameOrigin(href, new URL(origin), origin))
    .filter((u): u is URL => u !== undefined);
  if (candidates.length === 0) candidates.push(new URL('/sitemap.xml', origin));
  const pages: URL[] = [];
  const seen = new Set<string>();
  const read = async (url: URL, depth: number) => {
    if (seen.has(url.href) || seen.size > 50) return;
    seen.add(url.href);
    let response: SafeResponse;
    try {
      response = await fetchText(url, 'application/xml,text/xml');
    } catch {
      return;
    }
    if (response.status !== 200) return;
    const $ = (await loadCheerio()).load(response.body.toString('utf8'), { xml: true });
    const nested = $('sitemapindex > sitemap > loc')
      .map((_, el) => $(el).text().trim())
      .get();
    if (depth < 1) {
      for (const href of nested) {
        const child = sameOrigin(href, url, origin);
        if (child) await read(child, depth + 1);
      }
    }
    for (const href of $('urlset > url > loc')
      .map((_, el) => $(el).text().trim())
      .get()) {
      const page = sameOrigin(href, url, origin);
      if (page) pages.push(page);
    }
  };
  for (const candidate of candidates) await read(candidate, 0);
  return pages;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
