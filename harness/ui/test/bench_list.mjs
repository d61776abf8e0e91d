// The sessions list with many sessions (default 100,000, SINEW_UI_LIST_SESSIONS): imports
// that many small sessions through the API into a real store, then times the list page in
// headless chromium: first page, the next page, a status filter that matches few, and a
// search of every page.
//   node harness/ui/test/bench_list.mjs      (SINEW_BIN_DIR: build/bin)
import puppeteer from 'puppeteer-core';
import {randomBytes} from 'node:crypto';
import {startStack, KEY, TENANT} from './stack.mjs';

const N = Number(process.env.SINEW_UI_LIST_SESSIONS || 100000);
const stack = await startStack();
const browser = await puppeteer.launch({executablePath: process.env.SINEW_CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu']});

// One small finished session: created, a message, completed (one in 1,000 failed).
function small(i) {
  const id = randomBytes(16).toString('hex');
  const ts = Date.now() - (N - i) * 1000;
  const ev = (seq, type, p) => JSON.stringify({session_id: id, seq: String(seq), timestamp_unix_ms: String(ts + seq), type, [type]: p});
  const title = `session ${i}${i % 1000 === 7 ? ' needle' : ''}`;
  return [ev(1, 'session_created', {tenant: TENANT, title, task_json: JSON.stringify({prompt: title, model: 'basic'})}),
    ev(2, 'user_message', {text: title}),
    ev(3, 'status_change', {from: 'SESSION_STATUS_QUEUED', to: i % 1000 === 7 ? 'SESSION_STATUS_FAILED' : 'SESSION_STATUS_COMPLETED'})].join('\n') + '\n';
}

try {
  const t0 = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < N) {
      const i = next++;
      const r = await fetch(`${stack.base}/v1/sessions/import`, {method: 'POST',
        headers: {Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/x-ndjson'}, body: small(i)});
      if (r.status !== 201) throw new Error(`import ${i}: ${r.status} ${await r.text()}`);
    }
  };
  await Promise.all(Array.from({length: 8}, worker));
  console.log(`imported ${N} sessions in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const page = await browser.newPage();
  await page.setViewport({width: 1400, height: 1000});
  const time = async (what, fn) => {
    const s = Date.now();
    await fn();
    console.log(`| ${what} | ${Date.now() - s} ms |`);
  };
  console.log('| with ' + N.toLocaleString('en-US') + ' sessions | time |');
  console.log('|---|---|');
  await page.goto(`${stack.base}/ui/#key=${KEY}&/evals`);
  await time('open the list (first 50 rows)', async () => {
    await page.goto(`${stack.base}/ui/?x#/sessions`, {waitUntil: 'domcontentloaded'});
    await page.waitForSelector('.sessions[data-loaded] tbody tr[data-id]');
  });
  await time('next page', async () => {
    const first = await page.$eval('tbody tr', (r) => r.dataset.id);
    await page.click('.pager button:last-child');
    await page.waitForFunction((f) => document.querySelector('tbody tr').dataset.id !== f, {}, first);
  });
  await time('status failed (1 in 1,000): first page (the store scans 10,000 a call)', async () => {
    await page.select('#f-status', 'failed');
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('tbody tr[data-id]')];
      return rows.length && rows.every((r) => r.children[0].textContent === 'failed');
    }, {timeout: 120000});
  });
  await page.select('#f-status', '');
  await page.waitForSelector('tbody tr[data-id]');
  await time('search "needle" across every page', async () => {
    await page.type('#f-q', 'needle');
    await page.click('.filters button');
    await page.waitForFunction(() => /Searched every page/.test(document.querySelector('.info').textContent), {timeout: 600000});
  });
  console.log(await page.$eval('.info', (e) => e.textContent));
  await page.select('#f-status', 'failed');
} finally {
  await browser.close();
  await stack.stop();
}
