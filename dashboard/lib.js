// Queen dashboard: a single page over the HTTP API v1 of this broker. No
// framework, no build step, no network beyond this broker. Every value from
// the server is inserted as text, never as HTML. Classic scripts sharing one
// global scope, loaded in this order: chart.js, lib.js (DOM helpers, the API,
// the confirmation dialog, `views`), views.js, actions.js, system.js,
// stores.js (one view per property of `views`), app.js (routing and refresh).
"use strict";

const { lineChart, timeline, fmtNumber } = window.QueenCharts;
const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "queen.dashboard.token";
const REFRESH_MS = 5000;
const COLORS = { pushed: "#2563eb", popped: "#d97706", acked: "#059669", lag: "#dc2626", dead: "#7c3aed" };

// ---------- small DOM helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function text(v) {
  if (v === null || v === undefined || v === "") return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(2);
  return String(v);
}

function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toLocaleString();
}

function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch (_) { return value; }
  }
  return JSON.stringify(value, null, 2);
}

function table(columns, rows, opts) {
  const o = opts || {};
  const head = h("tr", {}, columns.map((c) => {
    const th = h("th", { class: c.num ? "n" : "" }, c.label);
    if (o.sort) {
      th.classList.add("sortable");
      if (o.sort.key === c.key) th.classList.add(o.sort.dir > 0 ? "asc" : "desc");
      th.addEventListener("click", () => o.onSort(c.key));
    }
    return th;
  }));
  const body = h("tbody");
  if (rows.length === 0) {
    body.appendChild(h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, o.empty || "none")));
  }
  for (const r of rows) {
    const tr = h("tr", { class: o.onRow ? "click" : "" }, columns.map((c) => {
      const v = c.get(r);
      return h("td", { class: c.num ? "n" : "" }, v instanceof Node ? v : text(v));
    }));
    if (o.onRow) tr.addEventListener("click", (e) => { if (!e.target.closest("button,a,input,select")) o.onRow(r); });
    if (o.rowAttrs) for (const [k, v] of Object.entries(o.rowAttrs(r))) tr.setAttribute(k, v);
    body.appendChild(tr);
  }
  return h("table", { id: o.id }, h("thead", {}, head), body);
}

function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

function card(label, value, cls) {
  return h("div", { class: "card " + (cls || "") }, h("div", { class: "v" }, text(value)), h("div", { class: "k" }, label));
}

// ---------- the API ----------

const state = { token: sessionStorage.getItem(TOKEN_KEY) || "", dbDown: false, authNeeded: false, lastOk: null };
$("token").value = state.token;
$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = $("token").value.trim();
  if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token); else sessionStorage.removeItem(TOKEN_KEY);
  state.authNeeded = false;
  render();
});

class ApiError extends Error {
  constructor(path, status, message) { super(message); this.path = path; this.status = status; }
}

async function api(path, init) {
  const opts = Object.assign({ method: "GET" }, init || {});
  const headers = {};
  if (state.token) headers.Authorization = "Bearer " + state.token;
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(opts.body);
  }
  opts.headers = headers;
  let resp;
  try { resp = await fetch(path, opts); } catch (e) { throw new ApiError(path, 0, "broker unreachable"); }
  let body = null;
  try { body = await resp.json(); } catch (_) { /* empty or not JSON */ }
  if (resp.status === 401 || resp.status === 403) state.authNeeded = true;
  if (resp.status === 503 && body && /database/i.test(body.error || "")) state.dbDown = true;
  if (!resp.ok) throw new ApiError(path, resp.status, (body && body.error) || resp.statusText);
  return body;
}

const q = encodeURIComponent;
const minutesAgo = (m) => new Date(Date.now() - m * 60000).toISOString();

function banner() {
  const b = $("banner");
  const msgs = [];
  if (state.authNeeded) msgs.push("This broker requires a token with a sufficient role: paste a JWT above (it is kept in this tab's session storage only).");
  if (state.dbDown) msgs.push("PostgreSQL is unreachable: the broker answers 503 for data it cannot read. " + (state.lastOk ? "Figures below are from " + state.lastOk.toLocaleTimeString() + "." : "Nothing could be read yet."));
  b.hidden = msgs.length === 0;
  b.className = "banner " + (state.dbDown ? "down" : "warn");
  b.replaceChildren(...msgs.map((m) => h("div", {}, m)));
}

function flash(message, ok) {
  const f = h("div", { class: "flash " + (ok ? "ok" : "bad"), role: "status" }, message);
  f.style.bottom = 16 + 44 * document.querySelectorAll(".flash").length + "px";
  document.body.appendChild(f);
  setTimeout(() => f.remove(), 4000);
}

async function health() {
  const pill = $("health");
  try {
    const r = await fetch("/health");
    const body = await r.json();
    pill.textContent = body.status || (r.ok ? "healthy" : "unhealthy");
    pill.className = "pill " + (r.ok && body.status === "healthy" ? "ok" : "bad");
    $("server").textContent = [body.worker_id, body.version].filter(Boolean).join(" · ");
    if (r.ok) state.dbDown = false; else state.dbDown = true;
  } catch (_) {
    pill.textContent = "unreachable";
    pill.className = "pill bad";
  }
}

// ---------- series helpers ----------

// queue-ops / worker-metrics points summed over the series, as per-second rates.
function opsRates(answer, seriesKey) {
  const sums = new Map();
  for (const s of answer[seriesKey] || []) {
    for (const p of s.points) {
      const t = Date.parse(p.timestamp);
      const cur = sums.get(t) || { pushed: 0, popped: 0, acked: 0 };
      cur.pushed += p.pushedPerSecond; cur.popped += p.poppedPerSecond; cur.acked += p.ackedPerSecond;
      sums.set(t, cur);
    }
  }
  const pts = [...sums.entries()].sort((a, b) => a[0] - b[0]);
  return ["pushed", "popped", "acked"].map((k) => ({ name: k + "/s", color: COLORS[k], points: pts.map(([t, v]) => ({ t, v: v[k] })) }));
}

function lagSeries(answer) {
  const worst = new Map();
  for (const s of answer.queues || []) {
    for (const p of s.points) {
      const t = Date.parse(p.timestamp);
      worst.set(t, Math.max(worst.get(t) || 0, p.lagSeconds));
    }
  }
  const pts = [...worst.entries()].sort((a, b) => a[0] - b[0]).map(([t, v]) => ({ t, v }));
  return [{ name: "max lag", color: COLORS.lag, points: pts }];
}

function chartBox(id, series, title, unit, minutes) {
  const to = Date.now();
  return h("div", { class: "chart-box", id }, lineChart(series, { title, unit, from: to - minutes * 60000, to }));
}

// ---------- dialogs ----------

// A modal dialog: `title`, the body nodes, and the button that acts. `onOk`
// runs when it is pressed; what it throws is shown inside the dialog, which
// stays open; what it returns resolves the promise (the dialog closes).
// Cancel, Escape or the close button resolve `null`.
function dialog(title, body, okLabel, onOk, opts) {
  const o = opts || {};
  return new Promise((resolve) => {
    const error = h("p", { class: "dialog-error", role: "alert", hidden: true });
    const ok = h("button", { type: "submit", class: o.danger ? "danger" : "primary", id: "dialog-ok" }, okLabel);
    const cancel = h("button", { type: "button", id: "dialog-cancel", onclick: () => finish(null) }, "Cancel");
    const form = h("form", { method: "dialog", onsubmit: async (e) => {
      e.preventDefault();
      ok.disabled = true;
      error.hidden = true;
      try {
        finish(await onOk());
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
        ok.disabled = false;
      }
    } }, h("h2", {}, title), ...[].concat(body), error, h("div", { class: "dialog-buttons" }, cancel, ok));
    const dlg = h("dialog", { id: o.id || "dialog", class: "dialog" }, form);
    let done = false;
    function finish(v) {
      if (done) return;
      done = true;
      dlg.close();
      dlg.remove();
      resolve(v);
    }
    dlg.addEventListener("cancel", (e) => { e.preventDefault(); finish(null); });
    document.body.appendChild(dlg);
    dlg.showModal();
    const first = dlg.querySelector("input,textarea,select");
    (first || cancel).focus();
  });
}

// The confirmation step of a destructive action: `what` names what goes.
// Resolves the answer of `act()`, or null when cancelled.
function confirmAction(title, what, okLabel, act) {
  return dialog(title, [h("p", { class: "dialog-what" }, what)], okLabel, act, { danger: true, id: "confirm" });
}

const views = {};
