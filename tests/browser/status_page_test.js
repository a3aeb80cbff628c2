// The status page in a real headless Chromium (the system's), driven by playwright-core.
// Run by tests/e2e/status_page_test.sh, which starts the exporters and passes, as environment:
//   BASE        the page of a standalone with simulated devices and a link_down that clears
//   NODE        its node name
//   INTERVAL_S  its collection interval
//   AUTH_BASE   a second exporter whose web config has basic auth (user prom, password s3cret)
//   SCREENSHOT  optional: where to write a PNG of the page with the node open (make screenshots)
//   CHROMIUM    the browser (default /usr/bin/chromium)
// Checks what an operator sees against what /metrics says at the same instant.
"use strict";
const { chromium } = require("playwright-core");
const http = require("http");

const { BASE, NODE, AUTH_BASE } = process.env;
const INTERVAL_MS = 1000 * Number(process.env.INTERVAL_S || 1);
const REFRESH_MS = 250;

function fail(message) {
  console.error("FAIL: " + message);
  process.exit(1);
}
function get(url, headers = {}) {
  return new Promise((resolve, reject) => {
    http.get(url, { headers }, (res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    }).on("error", reject);
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, seconds, check) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) fail(`timed out after ${seconds}s waiting for ${what}`);
    await sleep(50);
  }
}
// The value of the first sample of `name` whose labels include every one of `labels`.
function sample(metrics, name, labels) {
  for (const line of metrics.split("\n")) {
    if (!line.startsWith(name + "{")) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) {
      return Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return undefined;
}
const metrics = async () => (await get(BASE + "/metrics")).body;

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  try {
    const origin = new URL(BASE).origin;
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    const outside = [];
    // Anything not from the exporter is recorded and refused: the page must need nothing else.
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (new URL(url).origin === origin) return route.continue();
      outside.push(url);
      return route.abort();
    });
    page.on("pageerror", (e) => fail("script error in the page: " + e.message));

    const response = await page.goto(`${BASE}/?refresh=${REFRESH_MS}`);
    if (response.status() !== 200) fail(`/ answered ${response.status()}`);
    await page.waitForSelector('body[data-connection="live"]', { timeout: 15000 });
    console.log("page live");

    // The fleet: one node, with its devices.
    const nodes = await page.textContent("#summary-nodes");
    if (nodes !== "1") fail(`summary shows ${nodes} nodes, want 1`);
    await page.waitForSelector(`#nodes tr[data-node="${NODE}"]`);
    console.log("node count: 1, row for " + NODE);

    // A device's memory as /metrics has it for the same report. (Rows are redrawn at each
    // update: a locator finds the row again, where an element handle would go stale.)
    await page.locator(`#nodes tr[data-node="${NODE}"]`).click();
    await page.waitForSelector('#devices tr[data-device="0"] .mem-used');
    let matched = false;
    for (let tries = 0; tries < 40 && !matched; tries++) {
      const shown = await page.evaluate(() => ({
        bytes: document.querySelector('#devices tr[data-device="0"] .mem-used').dataset.bytes,
        time: Number(document.getElementById("devices").dataset.reportTime),
      }));
      const m = await metrics();
      const time = sample(m, "accelmon_node_last_report_timestamp_seconds", { node: NODE });
      const used = sample(m, "accelmon_device_memory_used_bytes", { node: NODE, device: "0" });
      if (Math.abs(time - shown.time) > 1e-3) {
        await sleep(REFRESH_MS / 3);  // a report arrived between the two: look again
        continue;
      }
      if (Number(shown.bytes) !== used) {
        fail(`device 0 memory: page ${shown.bytes}, /metrics ${used} (report at ${time})`);
      }
      console.log(`device 0 memory used ${used} bytes on the page and on /metrics`);
      matched = true;
    }
    if (!matched) fail("never caught the page and /metrics on the same report");

    // The scenario's link_down: on the page within two intervals of /metrics, gone as quickly.
    const activeOnMetrics = async () =>
      sample(await metrics(), "accelmon_diagnosis_active", { rule: "link_down", node: NODE }) === 1;
    const onPage = () => page.$('#findings tr.finding[data-rule="link_down"]');
    await waitFor("link_down on /metrics", 60, activeOnMetrics);
    const opened = Date.now();
    await waitFor("link_down on the page", (2 * INTERVAL_MS) / 1000, onPage);
    console.log(`link_down on the page ${Date.now() - opened} ms after /metrics`);
    const text = await page.textContent('#findings tr.finding[data-rule="link_down"]');
    if (!text.includes("runbook") || !text.includes("evidence")) fail("finding row lacks evidence or runbook: " + text);
    const runbook = await page.getAttribute('#findings tr.finding[data-rule="link_down"] a', "href");
    if (!runbook.endsWith("runbooks.md#accelmonlinkdown")) fail("runbook link: " + runbook);
    if (process.env.SCREENSHOT) {
      await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
      console.log("screenshot: " + process.env.SCREENSHOT);
    }
    await waitFor("link_down to clear on /metrics", 60, async () => !(await activeOnMetrics()));
    const closed = Date.now();
    await waitFor("link_down to leave the page", (2 * INTERVAL_MS) / 1000, async () => !(await onPage()));
    console.log(`link_down left the page ${Date.now() - closed} ms after /metrics`);

    // Sorting and filtering the node table.
    await page.fill("#filter", "no-such-node");
    await waitFor("the filter to hide the node", 5, async () => (await page.$$("#nodes tbody tr")).length === 0);
    await page.fill("#filter", "");
    await waitFor("the node back", 5, async () => (await page.$$("#nodes tbody tr")).length === 1);

    if (outside.length > 0) fail("the page asked for something outside the exporter: " + outside.join(", "));
    console.log("no request outside the exporter");

    // Basic auth: the page and its JSON are refused without credentials, served with them.
    // Headless Chromium ends a navigation answered 401 with ERR_INVALID_AUTH_CREDENTIALS (it
    // has nobody to ask for a password); a page that loaded would be the failure.
    const refused = await (await browser.newContext()).newPage();
    const denied = await refused.goto(AUTH_BASE + "/").then((r) => r.status(), (e) => e.message);
    if (!(denied === 401 || String(denied).includes("ERR_INVALID_AUTH_CREDENTIALS"))) {
      fail(`with basic auth, / without credentials: ${denied}`);
    }
    for (const path of ["/", "/api/v1/status", "/status.js"]) {
      const r = await get(AUTH_BASE + path);
      if (r.status !== 401) fail(`with basic auth, ${path} without credentials answered ${r.status}`);
    }
    const allowed = await (await browser.newContext({ httpCredentials: { username: "prom", password: "s3cret" } })).newPage();
    const ok = await allowed.goto(AUTH_BASE + "/");
    if (ok.status() !== 200) fail(`with credentials, / answered ${ok.status()}`);
    await allowed.waitForSelector('body[data-connection="live"]', { timeout: 15000 });
    console.log("basic auth: refused without credentials, live with them");
    console.log("PASS");
  } finally {
    await browser.close();
  }
})().catch((e) => fail(e.stack || String(e)));
