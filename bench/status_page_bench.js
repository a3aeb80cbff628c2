// Drives the status page of a 1000-node exporter in headless Chromium (bench/status_page.sh):
// prints JSON with the page's own render times (window.accelmonRender, measured around the DOM
// update of each poll), the time to the first full table, and a sort and a filter round trip.
"use strict";
const { chromium } = require("playwright-core");
const { BASE, NODES, UPDATES } = process.env;

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  const started = Date.now();
  await page.goto(BASE + "/?refresh=1000");
  await page.waitForFunction((n) => window.accelmonRender && window.accelmonRender.nodes >= n, Number(NODES),
    { timeout: 60000 });
  const firstTable = Date.now() - started;
  const renders = [];
  let last = 0;
  while (renders.length < Number(UPDATES || 10)) {
    const r = await page.waitForFunction((t) => window.accelmonRender.time > t && window.accelmonRender,
      last, { timeout: 30000 }).then((h) => h.jsonValue());
    last = r.time;
    renders.push(r.ms);
  }
  // One click on a column and one keystroke in the filter, to the next painted frame.
  const interaction = (action) => page.evaluate((a) => new Promise((resolve) => {
    const t0 = performance.now();
    if (a === "sort") document.querySelector('th[data-sort="util"]').click();
    else { const f = document.getElementById("filter"); f.value = "loadgen-99"; f.dispatchEvent(new Event("input")); }
    requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - t0), 0));
  }), action);
  const sort = await interaction("sort");
  const filter = await interaction("filter");
  // Every row drawn ("show all"): the worst an operator can ask for.
  await page.evaluate(() => { const f = document.getElementById("filter"); f.value = ""; f.dispatchEvent(new Event("input")); });
  await page.click("#show-all");
  const all = [];
  while (all.length < 5) {
    const r = await page.waitForFunction((t) => window.accelmonRender.time > t && window.accelmonRender,
      last, { timeout: 30000 }).then((h) => h.jsonValue());
    last = r.time;
    all.push(r.ms);
  }
  all.sort((a, b) => a - b);
  const heap = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize : null));
  renders.sort((a, b) => a - b);
  console.log(JSON.stringify({
    first_table_ms: firstTable,
    render_median_ms: renders[Math.floor(renders.length / 2)],
    render_max_ms: renders[renders.length - 1],
    sort_ms: sort, filter_ms: filter, js_heap_bytes: heap,
    all_rows_median_ms: all[Math.floor(all.length / 2)], all_rows_max_ms: all[all.length - 1],
  }));
  await browser.close();
})().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
