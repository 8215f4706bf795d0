// Time to interactive of the API reference at /docs: builds the app in-process on an in-memory
// database (as scripts/generate-client.ts does), listens on 127.0.0.1, and drives Debian's Chromium
// (playwright-core, /usr/bin/chromium) with an empty cache: the time from navigation until the first
// operation's "Try it out" button can be clicked (its block opened), and the bytes the page took.
// Each network profile runs ROUNDS times; the median is printed.
//
//   npx tsx scripts/docs-page-timing.ts            local link, then links of 20 and 4 Mbit/s
//   DOCS_TIMING_ROUNDS=5 npx tsx scripts/docs-page-timing.ts
import { chromium } from 'playwright-core';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/index.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ROUNDS = Number(process.env.DOCS_TIMING_ROUNDS ?? 3);

interface Profile {
  name: string;
  /** Chrome DevTools network emulation; none on the local link. */
  conditions?: { latency: number; downloadThroughput: number; uploadThroughput: number };
}

const PROFILES: Profile[] = [
  { name: 'local link' },
  {
    name: '20 Mbit/s, 40 ms RTT',
    conditions: { latency: 40, downloadThroughput: (20e6 / 8) | 0, uploadThroughput: (5e6 / 8) | 0 },
  },
  {
    name: '4 Mbit/s, 100 ms RTT',
    conditions: { latency: 100, downloadThroughput: (4e6 / 8) | 0, uploadThroughput: (1e6 / 8) | 0 },
  },
];

async function measure(url: string, profile: Profile): Promise<{ listed: number; ms: number; kb: number }[]> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
  const results: { listed: number; ms: number; kb: number }[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send('Network.enable');
      await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
      if (profile.conditions) {
        await cdp.send('Network.emulateNetworkConditions', { offline: false, ...profile.conditions });
      }
      let bytes = 0;
      cdp.on('Network.loadingFinished', (event) => {
        bytes += event.encodedDataLength;
      });
      const start = performance.now();
      await page.goto(url, { waitUntil: 'commit' });
      await page.locator('.opblock-summary').first().waitFor({ state: 'visible', timeout: 120_000 });
      const listed = performance.now() - start;
      await page.locator('.opblock-summary').first().click({ timeout: 120_000 });
      await page.locator('.try-out__btn').first().waitFor({ state: 'visible', timeout: 120_000 });
      await page.locator('.try-out__btn').first().click({ trial: true, timeout: 120_000 });
      results.push({ listed, ms: performance.now() - start, kb: bytes / 1024 });
      await context.close();
    }
  } finally {
    await browser.close();
  }
  return results;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

async function main() {
  const config = loadConfig({ LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '100000' });
  const database = await openDatabase({ url: undefined });
  await migrateToLatest(database.db);
  const { app } = await buildApp({ config, db: database.db });
  try {
    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    for (const profile of PROFILES) {
      const runs = await measure(`${address}/docs`, profile);
      const ms = median(runs.map((run) => run.ms));
      const kb = median(runs.map((run) => run.kb));
      const listed = median(runs.map((run) => run.listed));
      process.stdout.write(
        `${profile.name}: operations listed after ${Math.round(listed)} ms, "Try it out" clickable after ${Math.round(ms)} ms (median of ${runs.length}: ` +
          `${runs.map((run) => Math.round(run.ms)).join(', ')}), ${Math.round(kb)} KB transferred\n`,
      );
    }
  } finally {
    await app.close();
    await database.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`docs-page-timing: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`);
  process.exit(1);
});
