// The status page's behaviour: polls api/v1/status (with ?node= for the selected node's
// devices), renders it, and keeps a few minutes of history in the page for the open node's
// device sparklines and link rates (node rows have bars only: 400 little SVGs doubled the time
// of a 200-row update's DOM work; bench/README.md). The exporter keeps nothing for the page: a closed tab costs it nothing.
"use strict";

const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(200, Number(params.get("refresh")) || 2000);
const INGEST_WINDOW_S = 10;  // the ingest rate is over this long: agents report once a second or less
const HISTORY = 90;       // points per sparkline: 3 min at the default refresh
const MAX_ROWS = 200;     // node rows drawn until "show all": a 1000-row table takes ~0.5 s to lay out
const $ = (id) => document.getElementById(id);

const state = {
  data: null,
  sort: { key: "node", asc: true },
  filter: "",
  showAll: false,
  selected: decodeURIComponent((location.hash.match(/node=([^&]*)/) || [])[1] || ""),
  deviceHistory: new Map(),  // "node/index" -> {util: [], memory: []}
  linkCounters: new Map(),   // "node/index/link" -> {time, tx, rx}
  ingest: [],                // [{time, applied}] over the last INGEST_WINDOW_S
};

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
const known = (v) => v !== undefined && v !== null;
const dash = "–";

function bytes(n) {
  if (!known(n)) return dash;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}
const percent = (r) => (known(r) ? (100 * r).toFixed(0) + " %" : dash);
const celsius = (c) => (known(c) ? c.toFixed(0) + " °C" : dash);
const watts = (w) => (known(w) ? w.toFixed(0) + " W" : dash);
function rate(bps) {
  if (!known(bps)) return dash;
  return bytes(bps) + "/s";
}
function ago(seconds) {
  if (!known(seconds)) return dash;
  if (seconds < 90) return seconds.toFixed(0) + " s ago";
  if (seconds < 5400) return (seconds / 60).toFixed(0) + " min ago";
  return (seconds / 3600).toFixed(1) + " h ago";
}
function bar(ratio, text, attrs) {
  if (!known(ratio)) return dash;
  const r = Math.max(0, Math.min(1, ratio));
  return `<span class="bar${r > 0.9 ? " high" : ""}"><i style="width:${(100 * r).toFixed(1)}%"></i></span><span ${attrs || ""}>${text}</span>`;
}
function spark(points) {  // newest at the right end, 0..1 bottom to top
  if (points.filter(known).length < 2) return "";
  const offset = HISTORY - points.length;
  const coords = points.map((v, i) => (known(v)
    ? `${(((offset + i) / (HISTORY - 1)) * 100).toFixed(1)},${(20 - 19 * Math.max(0, Math.min(1, v))).toFixed(1)}` : null))
    .filter(Boolean).join(" ");
  return `<svg class="spark" viewBox="0 0 100 21" preserveAspectRatio="none"><polyline points="${coords}"/></svg>`;
}
// One point per report (`time`): polls faster than the agent reports add nothing.
function push(history, key, time, util, memory) {
  let h = history.get(key);
  if (!h) { h = { time: 0, util: [], memory: [] }; history.set(key, h); }
  if (time === h.time) return h;
  h.time = time;
  h.util.push(util); h.memory.push(memory);
  if (h.util.length > HISTORY) { h.util.shift(); h.memory.shift(); }
  return h;
}

// --- fetching -------------------------------------------------------------------------------

async function poll() {
  const asked = state.selected;
  const url = "api/v1/status" + (asked ? "?node=" + encodeURIComponent(asked) : "");
  try {
    const response = await fetch(url, { cache: "no-store", credentials: "same-origin" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const data = await response.json();
    setConnection(true, "");
    // A node selected while this was in flight: its detail is fetched already (fetchNow), and
    // this answer, without it, would blank the detail until the next tick.
    if (asked !== state.selected) return;
    state.data = data;
    render();
  } catch (e) {
    setConnection(false, e.message);
  } finally {
    setTimeout(poll, REFRESH_MS);
  }
}

function setConnection(up, why) {
  const c = $("connection");
  c.className = "connection " + (up ? "live" : "down");
  c.textContent = up ? "live" : `exporter unreachable (${why}), retrying every ${(REFRESH_MS / 1000).toFixed(0)} s`;
  document.body.dataset.connection = up ? "live" : "down";
}

// --- rendering ------------------------------------------------------------------------------

function render() {
  const started = performance.now();
  const d = state.data;
  renderSummary(d);
  renderFindings(d.findings);
  renderNodes(d.nodes);
  renderDetail(d);
  renderExporter(d.exporter);
  void document.body.offsetHeight;  // lay out now, so that the time below includes it
  const ms = performance.now() - started;
  window.accelmonRender = { ms, nodes: d.nodes.length, time: d.time };
  $("render-time").textContent = `${d.nodes.length} nodes rendered in ${ms.toFixed(1)} ms · refresh ${(REFRESH_MS / 1000).toFixed(1)} s`;
  document.body.dataset.updated = String(d.time);
}

function renderSummary(d) {
  const s = d.summary, e = d.exporter;
  $("summary-nodes").textContent = s.nodes;
  $("summary-nodes-detail").textContent = `${s.nodes_live} live, ${s.nodes_stale} stale`;
  $("summary-devices").textContent = s.devices;
  $("summary-devices-detail").textContent = "";
  $("summary-findings").textContent = s.findings_critical + s.findings_warning;
  $("summary-findings-detail").textContent = e.diagnostics.enabled
    ? `${s.findings_critical} critical, ${s.findings_warning} warning` : "diagnostics off";
  const window = state.ingest;
  window.push({ time: d.time, applied: e.reports_applied_total });
  while (window.length > 2 && d.time - window[1].time >= INGEST_WINDOW_S) window.shift();
  const oldest = window[0];
  const ingest = d.time - oldest.time >= 1 && e.reports_applied_total >= oldest.applied
    ? ((e.reports_applied_total - oldest.applied) / (d.time - oldest.time)).toFixed(1) + "/s" : dash;
  $("summary-ingest").textContent = ingest;
  $("summary-ingest-detail").textContent = `${e.streams_active} streams, ${e.reports_rejected_total} rejected`;
  const r = e.recording;
  $("summary-recording").textContent = !r.enabled ? "off" : r.failure ? "failing" : "on";
  $("summary-recording-detail").textContent = !r.enabled ? "no --record.dir"
    : r.failure ? r.failure : `${bytes(r.bytes)} in ${r.segments} segments`;
}

function findingWhere(f) {
  return escapeHtml(f.device !== undefined ? `device ${f.device}` : "") + (f.link ? " " + escapeHtml(f.link) : "");
}

function renderFindings(findings) {
  $("findings-empty").hidden = findings.length > 0;
  $("findings").hidden = findings.length === 0;
  const now = state.data.time;
  const rows = findings.map((f) => {
    const evidence = f.evidence.map((e) => `<li>${escapeHtml(e.name)}: ${escapeHtml(known(e.value) ? e.value : "")}${e.unit ? " " + escapeHtml(e.unit) : ""}${e.text ? " " + escapeHtml(e.text) : ""}</li>`).join("");
    const cause = f.caused_by ? `<br><span class="muted">caused by ${escapeHtml(f.caused_by)}</span>` : "";
    return `<tr class="finding" data-rule="${escapeHtml(f.rule)}" data-finding-node="${escapeHtml(f.node)}">` +
      `<td class="sev ${escapeHtml(f.severity)}">${escapeHtml(f.severity)}</td><td>${escapeHtml(f.rule)}</td>` +
      `<td>${escapeHtml(f.node)}</td><td>${findingWhere(f)}</td><td>${known(f.start) ? ago(now - f.start) : dash}</td>` +
      `<td class="summary">${escapeHtml(f.summary)}${cause}<details><summary>evidence</summary><ul>${evidence}</ul></details></td>` +
      `<td>${escapeHtml(f.action || "")}</td><td><a href="${escapeHtml(f.runbook)}" rel="noreferrer">runbook</a></td></tr>`;
  });
  $("findings").tBodies[0].innerHTML = rows.join("");
}

const sortKeys = {
  node: (n) => n.node,
  up: (n) => (n.up ? 1 : 0),
  devices: (n) => n.devices,
  util: (n) => n.utilization_ratio ?? -1,
  memory: (n) => (n.memory_total_bytes ? n.memory_used_bytes / n.memory_total_bytes : -1),
  temp: (n) => n.temperature_max_celsius ?? -1,
  power: (n) => n.power_watts ?? -1,
  findings: (n) => n.findings_critical * 1000 + n.findings_warning,
  jobs: (n) => n.jobs.join(","),
  age: (n) => n.age_seconds,
};

function renderNodes(nodes) {
  const f = state.filter.toLowerCase();
  let shown = f ? nodes.filter((n) => n.node.toLowerCase().includes(f) || n.jobs.some((j) => j.toLowerCase().includes(f))) : nodes.slice();
  const key = sortKeys[state.sort.key];
  shown.sort((a, b) => {
    const x = key(a), y = key(b);
    const c = x < y ? -1 : x > y ? 1 : a.node < b.node ? -1 : a.node > b.node ? 1 : 0;
    return state.sort.asc ? c : -c;
  });
  const total = shown.length;
  if (!state.showAll) shown = shown.slice(0, MAX_ROWS);
  const rows = shown.map((n) => {
    const memRatio = n.memory_total_bytes ? n.memory_used_bytes / n.memory_total_bytes : undefined;
    const badges = (n.findings_critical ? `<span class="badge critical">${n.findings_critical}</span> ` : "") +
      (n.findings_warning ? `<span class="badge warning">${n.findings_warning}</span>` : "");
    return `<tr data-node="${escapeHtml(n.node)}" class="${n.up ? "" : "stale"}${n.node === state.selected ? " selected" : ""}">` +
      `<td>${escapeHtml(n.node)}</td><td class="state">${n.up ? "live" : "stale"}${n.devices_down ? `, ${n.devices_down} down` : ""}</td>` +
      `<td>${n.devices}</td><td class="util">${bar(n.utilization_ratio, percent(n.utilization_ratio))}</td>` +
      `<td class="memory">${bar(memRatio, `${bytes(n.memory_used_bytes)} / ${bytes(n.memory_total_bytes)}`)}</td>` +
      `<td>${celsius(n.temperature_max_celsius)}</td><td>${watts(n.power_watts)}</td><td class="findings">${badges}</td>` +
      `<td>${escapeHtml(n.jobs.join(", "))}</td><td>${ago(n.age_seconds)}</td></tr>`;
  });
  $("nodes").tBodies[0].innerHTML = rows.join("");
  $("nodes-more").hidden = total <= shown.length;
  $("nodes-more-count").textContent = `${total - shown.length} more nodes: filter or sort to find them, or`;
  $("nodes-matching").textContent = f ? `${total} of ${nodes.length} nodes match` : "";
  for (const th of $("nodes").tHead.rows[0].cells) {
    th.classList.toggle("sorted", th.dataset.sort === state.sort.key);
    th.classList.toggle("asc", th.dataset.sort === state.sort.key && state.sort.asc);
  }
}

// Bytes per second between the link's last two reports (its counters, as PromQL's rate()).
function linkRates(node, device, link, time) {
  const key = `${node}/${device}/${link.name}`;
  const entry = state.linkCounters.get(key);
  if (entry && entry.time === time) return entry.rates;
  const current = { time, tx: link.transmit_bytes_total, rx: link.receive_bytes_total, rates: {} };
  if (entry && time > entry.time) {
    const dt = time - entry.time;
    const per = (a, b) => (known(a) && known(b) && a >= b ? (a - b) / dt : undefined);
    current.rates = { tx: per(current.tx, entry.tx), rx: per(current.rx, entry.rx) };
  }
  state.linkCounters.set(key, current);
  return current.rates;
}

function renderDetail(d) {
  const section = $("node-detail");
  if (!state.selected) { section.hidden = true; return; }
  section.hidden = false;
  $("detail-node").textContent = state.selected;
  const body = $("devices").tBodies[0];
  if (!d.node || d.node.node !== state.selected) {
    body.innerHTML = `<tr><td colspan="8" class="muted">${escapeHtml(state.selected)} is not in the exporter's state (expired or never seen).</td></tr>`;
    return;
  }
  const time = d.node.report_time;
  $("devices").dataset.reportTime = String(time);  // which report the rows show
  body.innerHTML = d.node.devices.map((v) => {
    const memRatio = v.memory_total_bytes ? v.memory_used_bytes / v.memory_total_bytes : undefined;
    const h = push(state.deviceHistory, `${state.selected}/${v.index}`, time, v.utilization_ratio, memRatio);
    const links = v.links.map((l) => {
      const r = linkRates(state.selected, v.index, l, time);
      return `${escapeHtml(l.name)}${l.up === false ? " <b class='sev critical'>down</b>" : ""} ↑${rate(r.tx)} ↓${rate(r.rx)}`;
    }).join("<br>") || dash;
    const holders = v.holders.map((x) => escapeHtml([x.job && "job " + x.job, x.pod && `${x.namespace}/${x.pod}`, x.rank && "rank " + x.rank, x.user, x.command].filter(Boolean).join(" · "))).join("<br>") || dash;
    const throttling = v.throttling.length ? `<br><span class="sev warning">${escapeHtml(v.throttling.join(", "))}</span>` : "";
    const usedAttrs = known(v.memory_used_bytes) ? `class="mem-used" data-bytes="${v.memory_used_bytes}"` : `class="mem-used"`;
    return `<tr data-device="${v.index}"${v.up === false ? ' class="stale"' : ""}>` +
      `<td>${v.index} ${escapeHtml(v.model || "")}<br><small class="muted">${escapeHtml(v.uuid || "")}</small></td>` +
      `<td>${bar(memRatio, `${bytes(v.memory_used_bytes)} / ${bytes(v.memory_total_bytes)}`, usedAttrs)}${spark(h.memory)}</td>` +
      `<td>${percent(v.memory_fragmentation_ratio)}</td>` +
      `<td>${bar(v.utilization_ratio, percent(v.utilization_ratio))}${spark(h.util)}</td>` +
      `<td>${celsius(v.temperature_celsius)}${throttling}</td>` +
      `<td>${watts(v.power_watts)}${known(v.power_limit_watts) ? " / " + watts(v.power_limit_watts) : ""}</td>` +
      `<td>${links}</td><td>${holders}</td></tr>`;
  }).join("");
}

function renderExporter(e) {
  const r = e.recording;
  const items = [
    ["version", `${e.version} (${e.revision})`],
    ["uptime", ago(e.uptime_seconds).replace(" ago", "")],
    ["series on /metrics", e.series],
    ["last scrape took", (1000 * e.scrape_duration_seconds).toFixed(1) + " ms"],
    ["reports applied", e.reports_applied_total],
    ["duplicates", e.reports_duplicate_total],
    ["rejected", e.reports_rejected_total],
    ["report parts dropped (series budget)", e.report_parts_dropped_total],
    ["agent streams", e.streams_active],
    ["reads throttled", e.reads_throttled_total],
    ["diagnostics", e.diagnostics.enabled ? `on, ${e.diagnostics.dropped_reports_total} reports dropped` : "off"],
    ["recording", !r.enabled ? "off" : `${r.failure ? "FAILING: " + r.failure + ", " : ""}${r.reports_total} reports, ${bytes(r.bytes)}, ${r.errors_total} errors, ${r.waiting_reports} waiting`],
    ["last config reload", e.config_reload_successful ? "successful" : "FAILED"],
  ];
  $("exporter").innerHTML = items.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join("");
}

// --- interaction ----------------------------------------------------------------------------

function select(node) {
  state.selected = node;
  history.replaceState(null, "", node ? "#node=" + encodeURIComponent(node) : location.pathname + location.search);
  if (state.data) render();
  if (node) fetchNow();
}
let pending = null;
function fetchNow() {  // the selected node's devices without waiting for the next tick
  if (pending) return;
  pending = fetch("api/v1/status?node=" + encodeURIComponent(state.selected), { cache: "no-store" })
    .then((r) => (r.ok ? r.json() : null)).then((d) => { if (d) { state.data = d; render(); } })
    .catch(() => {}).finally(() => { pending = null; });
}

$("nodes").tHead.addEventListener("click", (e) => {
  const key = e.target.dataset && e.target.dataset.sort;
  if (!key) return;
  state.sort = { key, asc: state.sort.key === key ? !state.sort.asc : key === "node" };
  if (state.data) renderNodes(state.data.nodes);
});
// The rows are redrawn at every refresh: a row replaced between the button's press and its
// release makes the click land on the table body, so the press remembers which node it was on.
let pressedNode = null;
$("nodes").tBodies[0].addEventListener("pointerdown", (e) => {
  const row = e.target.closest("tr[data-node]");
  pressedNode = row ? row.dataset.node : null;
});
$("nodes").tBodies[0].addEventListener("click", (e) => {
  const row = e.target.closest("tr[data-node]");
  const node = row ? row.dataset.node : pressedNode;
  pressedNode = null;
  if (node !== null) select(node === state.selected ? "" : node);
});
$("filter").addEventListener("input", (e) => {
  state.filter = e.target.value.trim();
  if (state.data) renderNodes(state.data.nodes);
});
$("detail-close").addEventListener("click", () => select(""));
$("show-all").addEventListener("click", () => {
  state.showAll = true;
  if (state.data) renderNodes(state.data.nodes);
});

poll();
