// A PNG of a terminal screen captured with `tmux capture-pane -p -e` (ANSI colours and
// attributes), drawn by the system's headless Chromium: the README's picture of `accelmon top`.
//   node terminal_screenshot.js SCREEN.ansi OUT.png
"use strict";
const fs = require("fs");
const { chromium } = require("playwright-core");

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: terminal_screenshot.js SCREEN.ansi OUT.png");
  process.exit(2);
}
const PALETTE = ["#1e1e1e", "#e05252", "#5fb95f", "#d7b24a", "#5c8fe6", "#c46fd1", "#4fb8c4", "#d0d0d0",
  "#6b6b6b", "#ff6e6e", "#8ae28a", "#ffd866", "#82aaff", "#e59cf0", "#7fdbe6", "#ffffff"];
const FG = "#d0d0d0", BG = "#1e1e1e";
const escapeHtml = (s) => s.replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
function color256(n) {
  if (n < 16) return PALETTE[n];
  if (n >= 232) { const v = 8 + 10 * (n - 232); return `rgb(${v},${v},${v})`; }
  n -= 16;
  const c = (x) => (x === 0 ? 0 : 55 + 40 * x);
  return `rgb(${c(Math.floor(n / 36))},${c(Math.floor(n / 6) % 6)},${c(n % 6)})`;
}

// SGR sequences to <span>s; other escape sequences are dropped.
function toHtml(text) {
  let fg = null, bg = null, bold = false, reverse = false, html = "";
  const parts = text.split(/(\x1b\[[0-9;]*[A-Za-z])/);
  for (const part of parts) {
    const m = part.match(/^\x1b\[([0-9;]*)([A-Za-z])$/);
    if (!m) {
      if (!part) continue;
      let f = fg || FG, b = bg || BG;
      if (reverse) [f, b] = [b, f];
      html += `<span style="color:${f};background:${b}${bold ? ";font-weight:bold" : ""}">${escapeHtml(part)}</span>`;
      continue;
    }
    if (m[2] !== "m") continue;
    const codes = m[1] === "" ? [0] : m[1].split(";").map(Number);
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i];
      if (c === 0) { fg = bg = null; bold = reverse = false; }
      else if (c === 1) bold = true;
      else if (c === 7) reverse = true;
      else if (c === 22) bold = false;
      else if (c === 27) reverse = false;
      else if (c >= 30 && c <= 37) fg = PALETTE[c - 30];
      else if (c >= 90 && c <= 97) fg = PALETTE[c - 90 + 8];
      else if (c >= 40 && c <= 47) bg = PALETTE[c - 40];
      else if (c >= 100 && c <= 107) bg = PALETTE[c - 100 + 8];
      else if (c === 39) fg = null;
      else if (c === 49) bg = null;
      else if ((c === 38 || c === 48) && codes[i + 1] === 5) { (c === 38 ? (fg = color256(codes[i + 2])) : (bg = color256(codes[i + 2]))); i += 2; }
      else if ((c === 38 || c === 48) && codes[i + 1] === 2) {
        const rgb = `rgb(${codes[i + 2]},${codes[i + 3]},${codes[i + 4]})`;
        if (c === 38) fg = rgb; else bg = rgb;
        i += 4;
      }
    }
  }
  return html;
}

(async () => {
  const screen = fs.readFileSync(input, "utf8").replace(/\n+$/, "");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  const page = await browser.newPage({ deviceScaleFactor: 1 });
  await page.setContent(`<html><body style="margin:0;background:${BG}">` +
    `<pre id="screen" style="margin:0;padding:8px;display:inline-block;font:14px/1.25 'DejaVu Sans Mono',monospace;color:${FG};background:${BG}">` +
    `${toHtml(screen)}</pre></body></html>`);
  await page.locator("#screen").screenshot({ path: output });
  await browser.close();
})().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
