/* Allot dashboard. Hand-written, no libraries, no external network: reads /api/state and draws
 * the budget tree, delivered vs entitled per team (SVG), the ranked queue, and the per-GPU
 * timeline (canvas); the search box asks /api/explain and /api/eta. */
"use strict";

const $ = (sel) => document.querySelector(sel);
const SVGNS = "http://www.w3.org/2000/svg";
let STATE = null;
let COLORS = {};

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
const fmt = (x, d = 2) => (x === null || x === undefined) ? "-" : (typeof x === "string" ? x : x.toFixed(d));
function dur(s) {
  s = Math.max(0, Math.round(s));
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return `${d}d${h}h`;
  if (h) return `${h}h${m}m`;
  if (m) return `${m}m`;
  return `${s}s`;
}

/* One hue per top-level budget, lighter or darker per leaf below it; free work is grey. */
function assignColors(tree) {
  const top = tree.filter((r) => r.depth === 1).map((r) => r.name);
  const parentOf = Object.fromEntries(tree.map((r) => [r.name, r.parent]));
  const topOf = (n) => { while (parentOf[n] && !top.includes(n)) n = parentOf[n]; return n; };
  const leaves = tree.filter((r) => r.leaf);
  const groups = {};
  for (const l of leaves) (groups[topOf(l.name)] = groups[topOf(l.name)] || []).push(l.name);
  COLORS = {};
  top.forEach((t, i) => {
    const hue = Math.round(360 * i / Math.max(1, top.length)) + 200;
    (groups[t] || [t]).forEach((leaf, j, all) => {
      const light = 35 + 35 * (all.length > 1 ? j / (all.length - 1) : 0.5);
      COLORS[leaf] = `hsl(${hue % 360}, 62%, ${light}%)`;
    });
  });
}
const colorOf = (leaf) => COLORS[leaf] || "#9e9e9e";

function renderSummary(s) {
  const v = s.views;
  const parts = v.clusters.map((c) => `${c.name}: ${c.busy}/${c.gpus} GPUs busy, ${c.free} free` +
    (c.unhealthy_nodes ? `, ${c.unhealthy_nodes} nodes out` : ""));
  const waiting = v.queue.filter((q) => q.state !== "rejected").length;
  $("#summary").textContent = `${s.source === "sim" ? "simulation" : "live"} · t=${Math.round(s.now)} · ` +
    `${parts.join(" · ")} · ${v.running.length} running · ${waiting} waiting`;
  $("#notes").textContent = (s.notes || []).join(" · ");
}

function renderTree(s) {
  const body = $("#tree tbody");
  body.replaceChildren();
  const rows = s.views.tree;
  const maxv = Math.max(1e-9, ...rows.filter((r) => r.depth > 0).map((r) => Math.max(r.effective, r.usage_fraction)));
  for (const r of rows) {
    const bars = svg("svg", { width: 160, height: 14, class: "usage-bar" });
    bars.append(svg("rect", { x: 0, y: 1, height: 5, width: 160 * r.effective / maxv, fill: "#bbb" }));
    bars.append(svg("rect", { x: 0, y: 7, height: 5, width: 160 * r.usage_fraction / maxv,
      fill: r.leaf ? colorOf(r.name) : "#4c78a8" }));
    const tr = el("tr", { class: "tree-row", "data-node": r.name, title: r.levels.length ?
      r.levels.map((l) => `${l[0]}: S=${fmt(l[1], 3)} U=${fmt(l[2], 3)} S/U=${fmt(l[3])}`).join("\n") : r.name },
      el("td", { text: "\u00a0\u00a0".repeat(r.depth) + r.name }),
      el("td", { class: "num", text: r.depth ? `${r.share_pct}%` : "" }),
      el("td", { class: "num", text: `${(100 * r.effective).toFixed(2)}%` }),
      el("td", {}, bars, document.createTextNode(` ${(100 * r.usage_fraction).toFixed(1)}%`)),
      el("td", { class: "num", text: fmt(r.metric) }),
      el("td", { class: "num", text: r.rank === null ? "" : String(r.rank) }),
      el("td", { class: "num", text: String(r.running_gpus) }),
      el("td", { class: "num", text: String(r.pending) }));
    tr.addEventListener("click", () => { $("#team-filter").value = r.name; renderQueue(STATE); });
    body.append(tr);
  }
}

function lineChart(series, leaf, title, totals) {
  const W = 260, H = 90, P = 18;
  const d = series.leaves[leaf];
  const n = series.bins;
  const maxv = Math.max(1e-9, ...d.delivered, ...d.entitled, ...d.allocation);
  const x = (i) => P + (W - P - 4) * i / Math.max(1, n);
  const y = (v) => H - 12 - (H - 24) * v / maxv;
  const box = el("div", { class: "chart", "data-leaf": leaf });
  const tot = (a) => a.reduce((p, q) => p + q, 0);
  // the totals allot usage gives (entitlement water-filled hour by hour, as the report's)
  const t0 = totals && totals.leaves[leaf];
  const dl = t0 ? t0.delivered : tot(d.delivered), en = t0 ? t0.entitled : tot(d.entitled);
  box.append(el("div", { class: "title", text: title }),
    el("div", { class: "sub", text: `delivered ${dl.toFixed(0)} / entitled ${en.toFixed(0)} GPU-h` +
      (en > 0 ? ` (${(100 * dl / en).toFixed(0)}%)` : "") }));
  const g = svg("svg", { width: W, height: H, class: "series-chart" });
  let area = `M${x(0)},${y(0)}`;
  d.delivered.forEach((v, i) => { area += ` L${x(i)},${y(v)} L${x(i + 1)},${y(v)}`; });
  area += ` L${x(n)},${y(0)} Z`;
  g.append(svg("path", { d: area, fill: colorOf(leaf), opacity: 0.55, class: "delivered" }));
  const step = (vals) => vals.map((v, i) => `${i ? "L" : "M"}${x(i)},${y(v)} L${x(i + 1)},${y(v)}`).join(" ");
  g.append(svg("path", { d: step(d.entitled), fill: "none", stroke: "#e8590c", "stroke-width": 1.6, class: "entitled" }));
  g.append(svg("path", { d: step(d.allocation), fill: "none", stroke: "#2b8a3e", "stroke-dasharray": "3,2", class: "allocation" }));
  const t = svg("text", { x: P, y: H - 1 });
  t.textContent = `-${dur(s_now() - series.start)}`;
  const t2 = svg("text", { x: W - 24, y: H - 1 });
  t2.textContent = "now";
  const t3 = svg("text", { x: 0, y: 10 });
  t3.textContent = maxv.toFixed(0);
  g.append(t, t2, t3);
  box.append(g);
  return box;
}
const s_now = () => STATE.now;

function renderSeries(s) {
  const series = s.views.series;
  $("#series-caption").textContent = `GPU-hours per ${dur(series.bin_s)}; filled: delivered, orange: ` +
    `entitled (allocation capped by demand), dashed green: allocation` +
    (s.views.totals ? `; totals from t=${s.views.totals.start.toFixed(0)}, as allot usage gives them` : "");
  const box = $("#series");
  box.replaceChildren();
  for (const r of s.views.tree.filter((r) => r.leaf)) box.append(lineChart(series, r.name, r.name, s.views.totals));
}

function renderQueue(s) {
  const team = $("#team-filter").value, cluster = $("#cluster-filter").value;
  const parentOf = Object.fromEntries(s.views.tree.map((r) => [r.name, r.parent]));
  const under = (leaf) => { for (let n = leaf; n; n = parentOf[n]) if (n === team) return true; return false; };
  const rows = s.views.queue.filter((q) => (!team || under(q.leaf || q.requested_budget)) &&
    (!cluster || !q.cluster || q.cluster === cluster));
  const body = $("#queue tbody");
  body.replaceChildren();
  for (const q of rows.slice(0, 300)) {
    const tr = el("tr", { class: "queue-row", "data-job": q.id, title: q.reason },
      el("td", { class: "num", text: q.position === null ? "" : String(q.position) }),
      el("td", {}, el("a", { class: "job", href: "#", text: q.id })),
      el("td", {}, el("i", { class: "bar", style: `width:8px;background:${colorOf(q.leaf)}` }),
        document.createTextNode(" " + (q.leaf ||
          `(${q.state === "rejected" ? "refused" : "free"}) ${q.requested_budget || ""}`))),
      el("td", { class: "num", text: q.rank === null ? "" : String(q.rank) }),
      el("td", { class: "num metric", text: fmt(q.metric) }),
      // (a refused contract has no terms: null, shown as "-")
      el("td", { class: "num", text: q.priority === null ? "-" : String(q.priority) }),
      el("td", { class: "num", text: q.gpus === null ? "-" : String(q.gpus) }),
      el("td", { class: "num", text: q.min_runtime_s === null ? "-" : dur(q.min_runtime_s) }),
      el("td", { class: "num", text: dur(q.wait_s) }),
      el("td", { text: q.cause ? `${q.state} (${q.cause})` : q.state }));
    tr.addEventListener("click", (ev) => { ev.preventDefault(); $("#job").value = q.id; explain(q.id); });
    body.append(tr);
  }
  if (rows.length > 300) body.append(el("tr", {}, el("td", { colspan: 10, text: `… ${rows.length - 300} more` })));
}

function renderTimeline(s) {
  const t = s.views.timeline;
  const canvas = $("#timeline");
  const rowH = t.rows.length > 600 ? 1 : t.rows.length > 200 ? 2 : 4;
  const W = Math.max(600, canvas.parentElement.clientWidth - 30), axis = 18;
  canvas.width = W;
  canvas.height = t.rows.length * rowH + axis;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  const span = Math.max(1, t.end - t.start);
  const X = (v) => (v - t.start) / span * W;
  const hatch = document.createElement("canvas");
  hatch.width = hatch.height = 6;
  const h = hatch.getContext("2d");
  h.strokeStyle = "rgba(255,255,255,0.75)";
  h.beginPath(); h.moveTo(0, 6); h.lineTo(6, 0); h.stroke();
  const pattern = ctx.createPattern(hatch, "repeat");
  const unhealthy = new Set(t.unhealthy);
  t.rows.forEach((r, i) => { if (unhealthy.has(r[0])) { ctx.fillStyle = "#fde2e2"; ctx.fillRect(0, i * rowH, W, rowH); } });
  for (const b of t.bars) {
    const [row, , leaf, a, e, allocated, preempted, prot] = b;
    const x0 = X(a), x1 = Math.max(x0 + 1, X(e)), y0 = row * rowH;
    ctx.fillStyle = allocated ? colorOf(leaf) : "#9e9e9e";
    ctx.fillRect(x0, y0, x1 - x0, rowH);
    const protEnd = typeof prot === "number" ? Math.max(a, Math.min(prot, e)) : e;
    const hx = allocated ? X(protEnd) : x0;
    if (hx < x1) { ctx.fillStyle = pattern; ctx.fillRect(hx, y0, x1 - hx, rowH); }
    if (preempted) { ctx.fillStyle = "#d00000"; ctx.fillRect(x1 - 2, y0, 2, rowH); }
  }
  ctx.fillStyle = "#444";
  ctx.font = "10px sans-serif";
  for (let k = 0; k <= 6; k++) {
    const v = t.start + span * k / 6;
    ctx.fillText(k === 6 ? "now" : `-${dur(t.end - v)}`, Math.min(W - 28, X(v) + 2), canvas.height - 5);
  }
  canvas.dataset.bars = String(t.bars.length);
  canvas.dataset.rows = String(t.rows.length);
  $("#timeline-caption").textContent = `last ${dur(span)}, one row per GPU (${t.rows.length}); ` +
    `hatched: preemptible (past min runtime or free work); red edge: preempted; pink rows: unhealthy node`;
  const legend = $("#legend");
  legend.replaceChildren(...Object.entries(COLORS).map(([leaf, c]) =>
    el("span", {}, el("i", { style: `background:${c}` }), document.createTextNode(leaf))),
  el("span", {}, el("i", { style: "background:#9e9e9e" }), document.createTextNode("free (unallocated)")));
}

function fillFilters(s) {
  const team = $("#team-filter"), cluster = $("#cluster-filter");
  if (team.options.length === 1) for (const r of s.views.tree) team.append(el("option", { value: r.name, text: r.name }));
  if (cluster.options.length === 1) for (const c of s.views.clusters) cluster.append(el("option", { value: c.name, text: c.name }));
}

async function explain(job) {
  const panel = $("#explain-panel"), out = $("#explain-output");
  panel.hidden = false;
  $("#eta-output").textContent = "";
  out.replaceChildren(el("li", { text: "…" }));
  const resp = await fetch(`/api/explain?job=${encodeURIComponent(job)}`);
  const doc = await resp.json();
  if (!resp.ok) { out.replaceChildren(el("li", { class: "error", text: doc.error })); return; }
  $("#explain-title").textContent = `${doc.workload} (${doc.state})`;
  out.replaceChildren(...doc.statements.map((st) => el("li", { class: `statement topic-${st.topic}` },
    el("span", { class: "topic", text: st.topic }), document.createTextNode(st.text))));
}

async function eta(job) {
  const box = $("#eta-output");
  $("#explain-panel").hidden = false;
  box.textContent = "simulating forward…";
  const resp = await fetch(`/api/eta?job=${encodeURIComponent(job)}`);
  const doc = await resp.json();
  if (!resp.ok) { box.textContent = doc.error; return; }
  const f = doc.forecast[0];
  box.replaceChildren(el("p", { text: f.start === null ? `${f.workload}: not started within the forecast horizon` :
    `${f.workload}: forecast start t=${Math.round(f.start)}, a wait of ${dur(f.wait_s)} from now` }),
  el("ul", {}, ...doc.assumptions.map((a) => el("li", { text: a }))));
}

async function load() {
  const resp = await fetch("/api/state");
  if (!resp.ok) { $("#summary").textContent = (await resp.json()).error; return; }
  STATE = await resp.json();
  assignColors(STATE.views.tree);
  renderSummary(STATE);
  fillFilters(STATE);
  renderTree(STATE);
  renderSeries(STATE);
  renderQueue(STATE);
  renderTimeline(STATE);
  document.body.dataset.ready = "1";
  if (STATE.source === "live") setTimeout(load, 30000);
}

$("#search").addEventListener("submit", (ev) => { ev.preventDefault(); if ($("#job").value) explain($("#job").value.trim()); });
$("#eta-button").addEventListener("click", () => { if ($("#job").value) eta($("#job").value.trim()); });
$("#team-filter").addEventListener("change", () => renderQueue(STATE));
$("#cluster-filter").addEventListener("change", () => renderQueue(STATE));
load();
