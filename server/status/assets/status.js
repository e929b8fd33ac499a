// The status page: polls /api/status and renders it. Everything comes from
// this server (the page's Content-Security-Policy allows nothing else).
"use strict";

// ---- pure helpers (unit-tested by status_test.js under node) ----

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  n = Number(n) || 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

function fmtDuration(s) {
  s = Math.max(0, Math.floor(Number(s) || 0));
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
  if (d > 0) return d + "d " + h + "h";
  if (h > 0) return h + "h " + m + "m";
  if (m > 0) return m + "m " + sec + "s";
  return sec + "s";
}

function fmtRate(n) {
  n = Number(n) || 0;
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return n.toFixed(n < 10 && n > 0 ? 1 : 0);
}

// sparkline returns an SVG path through values scaled into w×h (the
// largest value touches the top; all zero is a flat line at the bottom).
function sparkline(values, w, h) {
  if (!values.length) return "";
  const top = Math.max(...values, 0);
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  return values.map((v, i) => {
    const y = top > 0 ? h - (v / top) * h : h;
    return (i ? "L" : "M") + (i * step).toFixed(1) + " " + y.toFixed(1);
  }).join(" ");
}

// ---- rendering ----

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const SVG = "http://www.w3.org/2000/svg";

function chart(label, values, last, testid) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 240 40");
  svg.setAttribute("preserveAspectRatio", "none");
  const p = document.createElementNS(SVG, "path");
  p.setAttribute("d", sparkline(values, 240, 38));
  svg.append(p);
  return el("div", { class: "chart", "data-testid": testid }, el("span", {}, label + " ", el("b", {}, last)), svg);
}

function renderEndpoint(e) {
  const box = el("div", { class: "endpoint " + (e.state === "ok" ? "healthy" : "degraded"), "data-testid": "endpoint", "data-name": e.name });
  const badge = el("span", { class: "badge " + (e.state === "ok" ? "ok" : "bad"), "data-testid": "state" }, e.state);
  box.append(el("div", { class: "head" },
    el("h3", {}, e.name), badge,
    el("span", {}, e.sink + (e.mode ? " · " + e.mode : "")),
    el("span", { class: "muted" }, e.target || "")));
  if (e.reason) box.append(el("div", { class: "reason", "data-testid": "reason" }, e.reason));
  const tp = e.throughput || [];
  const last = tp.length ? tp[tp.length - 1] : { rows_per_sec: 0, bytes_per_sec: 0 };
  box.append(el("div", { class: "figures" },
    el("div", {}, "streams ", el("b", { "data-testid": "streams" }, e.streams)),
    el("div", {}, "rows ", el("b", { "data-testid": "rows" }, e.rows)),
    el("div", {}, "received ", el("b", {}, fmtBytes(e.bytes))),
    el("div", {}, "buffered ", el("b", {}, fmtBytes(e.buffered_bytes))),
    el("div", {}, "errors (1h) ", el("b", { class: e.errors_last_hour ? "bad" : "", "data-testid": "errors-hour" }, e.errors_last_hour))));
  box.append(el("div", { class: "figures" },
    chart("rows/s", tp.map(p => p.rows_per_sec), fmtRate(last.rows_per_sec), "rows-chart"),
    chart("MB/s", tp.map(p => p.bytes_per_sec / 1e6), (last.bytes_per_sec / 1e6).toFixed(2), "bytes-chart")));
  const commits = e.commits || [];
  const ct = el("table", { "data-testid": "commits" },
    el("thead", {}, el("tr", {}, ...["when", "version", "rows", "took", "writer@epoch"].map(h => el("th", {}, h)))));
  const body = el("tbody");
  for (const c of commits.slice(0, 5)) {
    body.append(el("tr", {},
      el("td", {}, new Date(c.at).toLocaleTimeString()),
      el("td", { "data-testid": "commit-version" }, c.version >= 0 ? c.version : "—"),
      el("td", { "data-testid": "commit-rows" }, c.rows),
      el("td", {}, c.duration_ms.toFixed(1) + " ms"),
      el("td", {}, c.writer ? c.writer + "@" + c.epoch + (c.replayed ? " (replayed)" : "") : "auto-commit")));
  }
  ct.append(body);
  box.append(commits.length ? ct : el("div", { class: "muted", "data-testid": "no-commits" }, "no commit since start"));
  if (e.continuous_streams && e.continuous_streams.length) {
    const seq = v => v === null ? "—" : v;
    box.append(el("table", { "data-testid": "continuous-streams" },
      el("thead", {}, el("tr", {}, ...["stream writer", "durable seq", "last seq", "lag"].map(h => el("th", {}, h)))),
      el("tbody", {}, ...e.continuous_streams.map(c => el("tr", { "data-writer": c.writer },
        el("td", {}, c.writer), el("td", { "data-testid": "durable-seq" }, seq(c.durable_seq)), el("td", {}, seq(c.last_seq)),
        el("td", { class: c.lag_seconds > 5 ? "bad" : "" }, c.lag_seconds < 60 ? c.lag_seconds.toFixed(1) + " s" : fmtDuration(c.lag_seconds)))))));
  }
  if ((e.errors || []).length) {
    box.append(el("details", {}, el("summary", { class: "bad" }, e.errors.length + " recent error(s)"),
      el("ul", { class: "errors" }, ...e.errors.map(x => el("li", {}, new Date(x.at).toLocaleTimeString() + " " + x.op + ": " + x.message)))));
  }
  return box;
}

function renderTxn(t) {
  return el("tr", { class: t.stuck ? "stuck" : "", "data-testid": "txn", "data-writer": t.writer, "data-stuck": String(t.stuck) },
    el("td", {}, t.writer), el("td", {}, t.epoch),
    el("td", {}, t.state + (t.stuck ? " — stuck" : "")),
    el("td", {}, fmtDuration(t.age_seconds)),
    el("td", {}, t.endpoints.join(", ")), el("td", {}, t.rows),
    el("td", {}, new Date(t.deadline).toLocaleTimeString()));
}

function render(s) {
  document.getElementById("version").textContent = s.version;
  const state = document.getElementById("state");
  state.textContent = s.state;
  state.className = s.state === "serving" ? "ok" : "bad";
  document.getElementById("uptime").textContent = fmtDuration(s.uptime_seconds);
  document.getElementById("flight").textContent = s.flight;
  const j = document.getElementById("journal");
  j.textContent = s.journal;
  j.className = s.journal === "ok" ? "ok" : "bad";
  const m = s.memory;
  const mem = document.getElementById("memory");
  mem.textContent = fmtBytes(m.process_bytes) + " process, " + fmtBytes(m.heap_bytes) + " heap, " + fmtBytes(m.buffered_bytes) + " buffered" +
    (m.budget_bytes > 0 ? "; budget " + fmtBytes(m.charged_bytes) + " of " + fmtBytes(m.budget_bytes) : "");
  mem.className = m.budget_bytes > 0 && m.charged_bytes > 0.9 * m.budget_bytes ? "bad" : "";
  document.getElementById("endpoints").replaceChildren(...s.endpoints.map(renderEndpoint));
  const tb = document.querySelector("#transactions tbody");
  tb.replaceChildren(...(s.transactions.length ? s.transactions.map(renderTxn) :
    [el("tr", {}, el("td", { colspan: "7", class: "muted" }, "none"))]));
  document.getElementById("updated").textContent = "updated " + new Date(s.now).toLocaleTimeString();
}

// ---- polling ----

const tokenKey = "quiver-status-token";

async function refresh() {
  const headers = {};
  const tok = sessionStorage.getItem(tokenKey);
  if (tok) headers.Authorization = "Bearer " + tok;
  const err = document.getElementById("error");
  try {
    const r = await fetch("/api/status", { headers, cache: "no-store" });
    if (r.status === 401) {
      document.getElementById("login").hidden = false;
      document.getElementById("login-error").textContent = tok ? "that token was refused" : "";
      return;
    }
    if (!r.ok) throw new Error("HTTP " + r.status + ": " + (await r.text()));
    document.getElementById("login").hidden = true;
    err.hidden = true;
    render(await r.json());
  } catch (e) {
    err.textContent = "cannot reach the server: " + e.message;
    err.hidden = false;
  }
}

function start() {
  const every = Number(new URLSearchParams(location.search).get("refresh_ms")) || 2000;
  document.getElementById("login").addEventListener("submit", ev => {
    ev.preventDefault();
    sessionStorage.setItem(tokenKey, document.getElementById("token").value);
    refresh();
  });
  refresh();
  setInterval(refresh, Math.max(200, every));
}

if (typeof module !== "undefined") {
  module.exports = { fmtBytes, fmtDuration, fmtRate, sparkline };
} else {
  start();
}
