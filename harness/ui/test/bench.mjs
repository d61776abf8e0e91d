// The console's benchmark: time to first render, to interactive and to fully loaded,
// and bytes transferred, for sessions of 100, 1,000 and 10,000 events (and 10,000 with
// 50 MB of tool output), each imported into a real store through a real harness and
// opened in a fresh headless chromium page (empty cache).
//   node harness/ui/test/bench.mjs      (SINEW_BIN_DIR: build/bin)
import puppeteer from 'puppeteer-core';
import {startStack, KEY} from './stack.mjs';

const cases = [
  {events: 100, outputBytes: 200}, {events: 1000, outputBytes: 200}, {events: 10000, outputBytes: 200},
  {events: 10000, outputBytes: 20000, label: '10,000 events, 50 MB of tool output'},
];
const RUNS = Number(process.env.SINEW_UI_BENCH_RUNS || 3);  // loads per session; the median is printed

async function load(id) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({width: 1400, height: 1000});
  const cdp = await page.createCDPSession();
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', {cacheDisabled: true});
  const urls = new Map();
  let ui = 0;
  let apiBytes = 0;
  cdp.on('Network.requestWillBeSent', (e) => urls.set(e.requestId, e.request.url));
  cdp.on('Network.loadingFinished', (e) => {
    if ((urls.get(e.requestId) || '').includes('/v1/')) apiBytes += e.encodedDataLength;
    else ui += e.encodedDataLength;
  });
  // The key goes in first (sessionStorage of this origin), then the session is opened.
  await page.goto(`${stack.base}/ui/#key=${KEY}&/evals`, {waitUntil: 'load'});
  ui = 0;
  apiBytes = 0;
  const t0 = Date.now();
  await page.goto(`${stack.base}/ui/?bench#/s/${id}`, {waitUntil: 'domcontentloaded'});
  await page.waitForSelector('.session[data-first-render]', {timeout: 120000});
  const first = Date.now() - t0;
  await page.waitForSelector('.session[data-interactive]', {timeout: 120000});
  const interactive = Date.now() - t0;
  await page.waitForSelector('.session[data-loaded]', {timeout: 600000});
  const loaded = Date.now() - t0;
  const n = await page.$eval('.session', (e) => e.dataset.events);
  // The page's own clock, from the start of its navigation.
  const marks = await page.evaluate((sid) => ['first-page', 'first-render', 'interactive'].map((m) =>
    Math.round(performance.getEntriesByName(`sinew-${m}-${sid}`)[0].startTime)), id);
  await context.close();
  return {first, interactive, loaded, marks, n, ui, apiBytes};
}

const stack = await startStack();
const browser = await puppeteer.launch({executablePath: process.env.SINEW_CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--window-size=1400,1000']});
try {
  // A first load warms the browser and the harness up; it is not counted.
  await load(await stack.importSession({events: 100, title: 'warm-up'}));
  console.log('Medians of ' + RUNS + ' loads, each in a fresh browser context with the cache off.');
  console.log('Times from the page\'s navigation start (in brackets: as seen by the driver, from its goto call).');
  console.log('| session | first page read | first render | interactive | all loaded | console files | API bytes |');
  console.log('|---|---|---|---|---|---|---|');
  for (const c of cases) {
    const id = await stack.importSession({events: c.events, outputBytes: c.outputBytes, title: `bench ${c.events}`});
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await load(id));
    const med = (f) => runs.map(f).sort((a, b) => a - b)[Math.floor(RUNS / 2)];
    const r = runs[0];
    console.log(`| ${c.label || `${Number(r.n).toLocaleString('en-US')} events`} | ${med((x) => x.marks[0])} ms | ` +
      `${med((x) => x.marks[1])} ms (${med((x) => x.first)}) | ${med((x) => x.marks[2])} ms (${med((x) => x.interactive)}) | ` +
      `${med((x) => x.loaded)} ms | ${(r.ui / 1024).toFixed(0)} KiB | ${(r.apiBytes / 1024 / 1024).toFixed(2)} MiB |`);
  }
} finally {
  await browser.close();
  await stack.stop();
}
