// Queen dashboard: a single page over the HTTP API v1 of this broker. No
// framework, no build step, no network beyond this broker. Every value from
// the server is inserted as text, never as HTML. Views are picked by the
// location hash (#/queues, #/queue/NAME, #/message/PID/TID, ...).
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

// ---------- views ----------

const views = {};

views.overview = async function () {
  const [overview, ops, lag, workers, mesh, push, pop] = await Promise.all([
    api("/api/v1/resources/overview"),
    api("/api/v1/analytics/queue-ops?interval=1m&from=" + q(minutesAgo(60))),
    api("/api/v1/analytics/queue-lag?interval=1m&from=" + q(minutesAgo(60))),
    api("/api/v1/analytics/worker-metrics?interval=1h&from=" + q(minutesAgo(60))),
    api("/api/v1/system/shared-state").catch(() => null),
    api("/api/v1/system/maintenance").catch(() => null),
    api("/api/v1/system/maintenance/pop").catch(() => null),
  ]);
  const m = overview.messages || {};
  const cards = h("div", { class: "cards" },
    card("queues", overview.queues), card("partitions", overview.partitions),
    card("messages", m.total), card("pending", m.pending), card("processing", m.processing),
    card("completed", m.completed), card("dead letters", m.deadLetter, m.deadLetter ? "alert" : ""),
    card("pushed / s (1 h)", round(sum(ops.totals.pushed) / 3600)), card("acked / s (1 h)", round(sum(ops.totals.acked) / 3600)));
  const charts = h("div", { class: "charts" },
    chartBox("chart-rates", opsRates(ops, "queues"), "Push, pop and ack rates, last hour", "msg/s", 60),
    chartBox("chart-lag", lagSeries(lag), "Worst consumer lag, last hour", "s", 60));
  return [
    section("Overview", cards, charts),
    h("div", { class: "two" }, replicasSection(workers, mesh), maintenanceSection(push, pop)),
  ];
};

function sum(v) { return v || 0; }
function round(v) { return Math.round(v * 100) / 100; }

function replicasSection(workers, mesh) {
  const rows = (workers.workers || []).map((w) => ({
    id: w.workerId, lastSeen: w.lastSeen, pushed: w.totals.pushed, popped: w.totals.popped, acked: w.totals.acked,
    stale: Date.now() - Date.parse(w.lastSeen) > 60000,
  }));
  const peers = mesh && mesh.peers ? mesh.peers : [];
  return section("Replicas",
    table([
      { label: "replica", get: (r) => h("span", { class: r.stale ? "muted" : "" }, r.id) },
      { label: "last stats row", get: (r) => when(r.lastSeen) },
      { label: "pushed (1 h)", num: true, get: (r) => r.pushed },
      { label: "popped (1 h)", num: true, get: (r) => r.popped },
      { label: "acked (1 h)", num: true, get: (r) => r.acked },
    ], rows, { id: "replicas", empty: "no replica wrote a stats row in the last hour" }),
    h("h3", {}, "Mesh of this replica"),
    mesh ? h("p", { class: "muted" }, mesh.enabled
      ? `enabled · auth ${mesh.auth} · ${mesh.peersConnected}/${peers.length} peers connected · listening ${mesh.listening ? "yes" : "no"}`
      : `off (${mesh.reason})`) : h("p", { class: "muted" }, "not readable"),
    peers.length ? table([
      { label: "peer", get: (p) => p.addr },
      { label: "state", get: (p) => h("span", { class: "pill " + (p.connected ? "ok" : "bad") }, p.connected ? "connected" : "down") },
      { label: "hints sent", num: true, get: (p) => p.sent },
      { label: "dropped", num: true, get: (p) => p.dropped },
      { label: "reconnects", num: true, get: (p) => p.reconnects },
    ], peers) : null);
}

function maintenanceSection(push, pop) {
  const sw = (id, label, on, path, hint) => h("label", { class: "switch" },
    h("input", { type: "checkbox", id, checked: on, onchange: async (e) => {
      const enabled = e.target.checked;
      try {
        await api(path, { method: "POST", body: { enabled } });
        flash(label + (enabled ? " on" : " off"), true);
      } catch (err) {
        e.target.checked = !enabled;
        flash(label + ": " + err.message, false);
      }
      render();
    } }),
    h("span", {}, label), h("span", { class: "muted" }, " " + hint));
  return section("Maintenance",
    push ? sw("maint-push", "Push maintenance", push.maintenanceMode, "/api/v1/system/maintenance",
      "pushes go to the disk spool, replayed later") : h("p", { class: "muted" }, "needs an admin token"),
    pop ? sw("maint-pop", "Pop maintenance", pop.popMaintenanceMode, "/api/v1/system/maintenance/pop",
      "pops answer empty") : null,
    push ? h("p", { class: "muted", id: "spool" }, `spool: ${push.bufferedMessages} buffered · ${push.bufferHealthy ? "healthy" : "unhealthy"}`) : null);
}

const queuesState = { search: "", sort: { key: "name", dir: 1 } };

views.queues = async function () {
  const list = await api("/api/v1/resources/queues");
  const cols = [
    { key: "name", label: "queue", get: (r) => h("a", { href: "#/queue/" + q(r.name) }, r.name) },
    { key: "namespace", label: "namespace", get: (r) => r.namespace },
    { key: "task", label: "task", get: (r) => r.task },
    { key: "partitions", label: "partitions", num: true, get: (r) => r.partitions },
    { key: "total", label: "messages", num: true, get: (r) => r.messages.total },
    { key: "pending", label: "pending", num: true, get: (r) => r.messages.pending },
    { key: "processing", label: "processing", num: true, get: (r) => r.messages.processing },
  ];
  const value = (r, key) => (key in r.messages ? r.messages[key] : r[key]);
  const box = h("div");
  const draw = () => {
    const s = queuesState.search.toLowerCase();
    const rows = (list.queues || []).filter((r) => !s || [r.name, r.namespace, r.task].some((v) => (v || "").toLowerCase().includes(s)));
    const { key, dir } = queuesState.sort;
    rows.sort((a, b) => { const x = value(a, key), y = value(b, key); return (x > y ? 1 : x < y ? -1 : 0) * dir; });
    box.replaceChildren(table(cols, rows, {
      id: "queues", sort: queuesState.sort, empty: "no queue matches",
      onSort: (k) => { queuesState.sort = { key: k, dir: queuesState.sort.key === k ? -queuesState.sort.dir : 1 }; draw(); },
      onRow: (r) => { location.hash = "#/queue/" + q(r.name); },
    }));
  };
  const search = h("input", { type: "search", id: "queue-search", placeholder: "search name, namespace, task", value: queuesState.search,
    oninput: (e) => { queuesState.search = e.target.value; draw(); } });
  draw();
  return [section("Queues", h("div", { class: "toolbar" }, search, h("span", { class: "muted" }, (list.queues || []).length + " queues")), box)];
};
views.queues.keepFocus = "queue-search";

views.queue = async function (name) {
  const [detail, status, ops, lag, groups] = await Promise.all([
    api("/api/v1/resources/queues/" + q(name)),
    api("/api/v1/status/queues/" + q(name)).catch(() => null),
    api("/api/v1/analytics/queue-ops?interval=1m&queue=" + q(name) + "&from=" + q(minutesAgo(60))),
    api("/api/v1/analytics/queue-lag?interval=1m&queue=" + q(name) + "&from=" + q(minutesAgo(60))),
    api("/api/v1/consumer-groups"),
  ]);
  const mine = (groups || []).filter((g) => g.queueName === name);
  const cfg = status && status.queue ? status.queue.config : null;
  const parts = table([
    { label: "partition", get: (p) => h("a", { href: `#/messages/${q(name)}/${q(p.name)}` }, p.name) },
    { label: "messages", num: true, get: (p) => p.stats.total },
    { label: "pending", num: true, get: (p) => p.stats.pending },
    { label: "processing", num: true, get: (p) => p.stats.processing },
    { label: "completed", num: true, get: (p) => p.stats.completed },
    { label: "dead letter", num: true, get: (p) => p.stats.deadLetter },
    { label: "newest message", get: (p) => when(p.newestMessage) },
  ], detail.partitions || [], { id: "partitions", onRow: (p) => { location.hash = `#/messages/${q(name)}/${q(p.name)}`; } });
  const groupTable = table([
    { label: "group", get: (g) => g.name },
    { label: "members", num: true, get: (g) => g.members },
    { label: "partitions lagging", num: true, get: (g) => g.partitionsWithLag },
    { label: "max time lag (s)", num: true, get: (g) => g.maxTimeLag },
    { label: "state", get: (g) => h("span", { class: "pill " + (g.state === "Stable" ? "ok" : g.state === "Lagging" ? "warn" : "") }, g.state) },
    { label: "subscription", get: (g) => g.subscriptionMode },
  ], mine, { id: "queue-groups", empty: "no consumer group has read this queue" });
  return [
    section("Queue " + name,
      h("p", {}, h("a", { href: `#/messages/${q(name)}` }, "browse messages"), " · ", h("a", { href: `#/dlq?queue=${q(name)}` }, "dead letters")),
      h("div", { class: "charts" },
        chartBox("queue-rates", opsRates(ops, "queues"), "Rates, last hour", "msg/s", 60),
        chartBox("queue-lag", lagSeries(lag), "Lag, last hour", "s", 60))),
    section("Partitions", parts),
    h("div", { class: "two" },
      section("Consumer groups", groupTable, seekForm(name, mine)),
      section("Configuration", cfg ? h("dl", { class: "config" }, Object.entries(cfg).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, text(v))]))
        : h("p", { class: "muted" }, "not readable"))),
  ];
};

function seekForm(queue, groups) {
  const names = [...new Set(groups.map((g) => g.name))];
  if (names.length === 0) return null;
  const group = h("select", { id: "seek-group" }, names.map((n) => h("option", { value: n }, n === "__QUEUE_MODE__" ? "queue mode" : n)));
  const mode = h("select", { id: "seek-mode" }, h("option", { value: "start" }, "to the start"), h("option", { value: "end" }, "to the end"), h("option", { value: "time" }, "to a time"));
  const at = h("input", { type: "datetime-local", id: "seek-time" });
  const go = h("button", { type: "submit" }, "seek");
  return h("form", { class: "toolbar", id: "seek-form", onsubmit: async (e) => {
    e.preventDefault();
    let body;
    if (mode.value === "end") body = { toEnd: true };
    else if (mode.value === "start") body = { timestamp: "1970-01-01T00:00:00Z" };
    else if (at.value) body = { timestamp: new Date(at.value).toISOString() };
    else { flash("pick a time", false); return; }
    try {
      const r = await api(`/api/v1/consumer-groups/${q(group.value)}/queues/${q(queue)}/seek`, { method: "POST", body });
      flash(`seeked ${r.partitionsUpdated} partition(s)`, true);
      render();
    } catch (err) { flash("seek: " + err.message, false); }
  } }, h("span", {}, "Seek"), group, mode, at, go);
}

views.messages = async function (queue, partition) {
  const filter = h("form", { class: "toolbar", onsubmit: (e) => {
    e.preventDefault();
    const qv = e.target.elements.queue.value.trim(), pv = e.target.elements.partition.value.trim();
    location.hash = "#/messages" + (qv ? "/" + q(qv) + (pv ? "/" + q(pv) : "") : "");
  } },
  h("input", { name: "queue", placeholder: "queue", value: queue || "" }),
  h("input", { name: "partition", placeholder: "partition", value: partition || "" }),
  h("button", { type: "submit" }, "show"));
  let params = "limit=100&from=" + q(minutesAgo(7 * 24 * 60));
  if (queue) params += "&queue=" + q(queue);
  if (partition) params += "&partition=" + q(partition);
  const list = await api("/api/v1/messages?" + params);
  const rows = list.messages || [];
  return [section("Messages" + (queue ? " of " + queue + (partition ? " / " + partition : "") : ""), filter,
    table([
      { label: "created", get: (m) => when(m.createdAt) },
      { label: "queue", get: (m) => m.queue },
      { label: "partition", get: (m) => m.partition },
      { label: "transaction id", get: (m) => h("a", { href: `#/message/${q(m.partitionId)}/${q(m.transactionId)}` }, m.transactionId) },
      { label: "status", get: (m) => h("span", { class: "pill " + statusClass(m.status) }, m.status) },
    ], rows, { id: "messages", empty: "no message in the last 7 days", onRow: (m) => { location.hash = `#/message/${q(m.partitionId)}/${q(m.transactionId)}`; } }))];
};
views.messages.static = true;

function statusClass(s) {
  return { completed: "ok", processing: "warn", dead_letter: "bad", pending: "" }[s] || "";
}

views.message = async function (pid, tid) {
  const [m, traces] = await Promise.all([
    api(`/api/v1/messages/${q(pid)}/${q(tid)}`),
    api(`/api/v1/traces/${q(pid)}/${q(tid)}`).catch(() => ({ traces: [] })),
  ]);
  const ev = (traces.traces || []).map((t) => ({ t: Date.parse(t.created_at), label: t.event_type, detail: (t.trace_names || []).join(", ") }));
  const facts = [
    ["queue", h("a", { href: "#/queue/" + q(m.queue) }, m.queue)], ["partition", m.partition], ["transaction id", m.transactionId],
    ["message id", m.id], ["status", m.status], ["created", when(m.createdAt)], ["trace id", m.traceId],
    ["producer", m.producerSub], ["encrypted at rest", m.isEncrypted ? "yes (shown decrypted)" : "no"],
    ["retries", m.retryCount], ["error", m.errorMessage], ["lease expires", when(m.leaseExpiresAt)],
  ];
  return [
    section("Message " + m.transactionId,
      h("dl", { class: "config" }, facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v instanceof Node ? v : text(v))])),
      h("h3", {}, "Payload"), h("pre", { class: "payload", id: "payload" }, pretty(m.payload)),
      h("h3", {}, "Consumer groups"),
      table([
        { label: "group", get: (g) => g.name },
        { label: "consumed", get: (g) => (g.consumed ? "yes" : "no") },
        { label: "lease expires", get: (g) => when(g.leaseExpiresAt) },
      ], m.consumerGroups || [])),
    section("Trace timeline",
      ev.length ? timeline(ev) : h("p", { class: "muted" }, "no trace recorded for this message"),
      ev.length ? table([
        { label: "at", get: (t) => when(t.created_at) },
        { label: "event", get: (t) => t.event_type },
        { label: "group", get: (t) => t.consumer_group },
        { label: "worker", get: (t) => t.worker_id },
        { label: "names", get: (t) => (t.trace_names || []).join(", ") },
        { label: "data", get: (t) => h("code", {}, JSON.stringify(t.data)) },
      ], traces.traces, { id: "traces" }) : null),
  ];
};
views.message.static = true;

const dlqState = { open: null };

views.dlq = async function (_a, _b, params) {
  const queue = params.get("queue") || "", group = params.get("consumerGroup") || "";
  let filters = "";
  if (queue) filters += "&queue=" + q(queue);
  if (group) filters += "&consumerGroup=" + q(group);
  const list = await api("/api/v1/dlq?limit=100" + filters);
  const rows = list.messages || [];
  const filter = h("form", { class: "toolbar", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    if (e.target.elements.queue.value.trim()) p.set("queue", e.target.elements.queue.value.trim());
    if (e.target.elements.group.value.trim()) p.set("consumerGroup", e.target.elements.group.value.trim());
    location.hash = "#/dlq" + (p.toString() ? "?" + p : "");
  } },
  h("input", { name: "queue", placeholder: "queue", value: queue }),
  h("input", { name: "group", placeholder: "consumer group", value: group }),
  h("button", { type: "submit" }, "filter"), h("span", { class: "muted" }, list.total + " dead letters"));
  const key = (d) => d.partitionId + "/" + d.transactionId + "/" + d.consumerGroup;
  const act = async (d, verb) => {
    try {
      if (verb === "retry") {
        await api(`/api/v1/messages/${q(d.partitionId)}/${q(d.transactionId)}/retry`, { method: "POST" });
        flash("retried " + d.transactionId, true);
      } else {
        if (!confirm("Delete this dead letter for good?")) return;
        await api(`/api/v1/dlq/${q(d.partitionId)}/${q(d.transactionId)}?consumerGroup=${q(d.consumerGroup)}`, { method: "DELETE" });
        flash("deleted " + d.transactionId, true);
      }
    } catch (err) { flash(verb + ": " + err.message, false); }
    render();
  };
  const body = [];
  const tbl = table([
    { label: "failed at", get: (d) => when(d.failedAt) },
    { label: "queue", get: (d) => d.queue },
    { label: "partition", get: (d) => d.partition },
    { label: "group", get: (d) => d.consumerGroup },
    { label: "transaction id", get: (d) => d.transactionId },
    { label: "retries", num: true, get: (d) => d.retryCount },
    { label: "error", get: (d) => d.errorMessage },
    { label: "", get: (d) => h("span", { class: "actions" },
      h("button", { type: "button", class: "retry", onclick: () => act(d, "retry") }, "retry"),
      h("button", { type: "button", class: "delete", onclick: () => act(d, "delete") }, "delete")) },
  ], rows, { id: "dlq", empty: "no dead letter", onRow: (d) => { dlqState.open = dlqState.open === key(d) ? null : key(d); render(); },
    rowAttrs: (d) => ({ "data-transaction-id": d.transactionId }) });
  body.push(tbl);
  const open = rows.find((d) => key(d) === dlqState.open);
  if (open) body.push(h("div", { class: "detail" }, h("h3", {}, "Payload of " + open.transactionId), h("pre", { class: "payload" }, pretty(open.data))));
  return [section("Dead letters", filter, ...body)];
};

views.groups = async function () {
  const groups = await api("/api/v1/consumer-groups");
  return [section("Consumer groups", table([
    { label: "group", get: (g) => h("a", { href: "#/group/" + q(g.name) }, g.name === "__QUEUE_MODE__" ? "queue mode" : g.name) },
    { label: "queue", get: (g) => h("a", { href: "#/queue/" + q(g.queueName) }, g.queueName) },
    { label: "members", num: true, get: (g) => g.members },
    { label: "partitions lagging", num: true, get: (g) => g.partitionsWithLag },
    { label: "max time lag (s)", num: true, get: (g) => g.maxTimeLag },
    { label: "state", get: (g) => h("span", { class: "pill " + (g.state === "Stable" ? "ok" : g.state === "Lagging" ? "warn" : "") }, g.state) },
    { label: "subscription", get: (g) => g.subscriptionMode },
  ], groups || [], { id: "groups" }))];
};

views.group = async function (name) {
  const detail = await api("/api/v1/consumer-groups/" + q(name));
  const rows = Object.entries(detail || {}).flatMap(([queue, v]) => (v.partitions || []).map((p) => Object.assign({ queue }, p)));
  return [section("Consumer group " + name, table([
    { label: "queue", get: (r) => h("a", { href: "#/queue/" + q(r.queue) }, r.queue) },
    { label: "partition", get: (r) => r.partition },
    { label: "offset lag", num: true, get: (r) => r.offsetLag },
    { label: "time lag (s)", num: true, get: (r) => r.timeLagSeconds },
    { label: "consumed", num: true, get: (r) => r.totalConsumed },
    { label: "last consumed", get: (r) => when(r.lastConsumedAt) },
    { label: "lease", get: (r) => (r.leaseActive ? "active" : "–") },
  ], rows, { id: "group-partitions" }))];
};

views.streams = async function () {
  const list = await api("/api/v1/streams/queries");
  return [section("Stream queries", table([
    { label: "query", get: (s) => s.name },
    { label: "source", get: (s) => h("a", { href: "#/queue/" + q(s.sourceQueue) }, s.sourceQueue) },
    { label: "sink", get: (s) => h("a", { href: "#/queue/" + q(s.sinkQueue) }, s.sinkQueue) },
    { label: "group", get: (s) => h("a", { href: "#/group/" + q(s.consumerGroup) }, s.consumerGroup) },
    { label: "state rows", num: true, get: (s) => s.stateRows },
    { label: "lag", num: true, get: (s) => s.lag },
  ], (list && list.queries) || [], { id: "streams" }))];
};

views.traces = async function (name) {
  if (name) {
    const r = await api("/api/v1/traces/by-name/" + q(name) + "?limit=200");
    return [section("Traces named " + name, h("p", { class: "muted" }, r.total + " events"), table([
      { label: "at", get: (t) => when(t.created_at) },
      { label: "queue", get: (t) => t.queue_name },
      { label: "partition", get: (t) => t.partition_name },
      { label: "message", get: (t) => h("a", { href: `#/message/${q(t.partition_id)}/${q(t.transaction_id)}` }, t.transaction_id) },
      { label: "event", get: (t) => t.event_type },
      { label: "group", get: (t) => t.consumer_group },
      { label: "data", get: (t) => h("code", {}, JSON.stringify(t.data)) },
    ], r.traces || []))];
  }
  const r = await api("/api/v1/traces/names?limit=200");
  return [section("Trace names", table([
    { label: "name", get: (t) => h("a", { href: "#/traces/" + q(t.trace_name) }, t.trace_name) },
    { label: "events", num: true, get: (t) => t.trace_count },
    { label: "messages", num: true, get: (t) => t.message_count },
    { label: "last seen", get: (t) => when(t.last_seen) },
  ], r.trace_names || [], { empty: "no trace recorded yet" }))];
};

// ---------- routing and refresh ----------

function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const name = parts[0] || "overview";
  const view = views[name] ? name : "overview";
  return { view, args: parts.slice(1), params: new URLSearchParams(query || "") };
}

let rendering = null;
let renderedHash = null;

async function render() {
  const r = route();
  const navName = { queue: "queues", message: "messages", group: "groups" }[r.view] || r.view;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === navName);
  const token = Symbol("render");
  rendering = token;
  await health();
  try {
    const nodes = await views[r.view](r.args[0], r.args[1], r.params);
    if (rendering !== token) return;
    const focus = views[r.view].keepFocus && document.activeElement && document.activeElement.id;
    $("view").replaceChildren(...nodes.filter(Boolean));
    if (focus) { const el = $(focus); if (el) { el.focus(); el.setSelectionRange(el.value.length, el.value.length); } }
    state.dbDown = false;
    state.lastOk = new Date();
    $("updated").textContent = "updated " + state.lastOk.toLocaleTimeString();
    renderedHash = location.hash;
  } catch (e) {
    if (rendering !== token) return;
    if (e.status === 503) state.dbDown = true;
    if (renderedHash !== location.hash || !(e.status === 503)) {
      $("view").replaceChildren(h("section", { class: "error-box" }, h("h2", {}, "Cannot show this view"),
        h("p", {}, e.message + (e.path ? " (" + e.path + (e.status ? ", HTTP " + e.status : "") + ")" : ""))));
      renderedHash = location.hash;
    }
  }
  banner();
}

window.addEventListener("hashchange", () => { dlqState.open = null; render(); });
setInterval(() => {
  const v = views[route().view];
  const typing = document.activeElement && ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName) && !v.keepFocus;
  if ($("live").checked && !v.static && !typing && !document.querySelector("dialog[open]")) render();
}, REFRESH_MS);
render();
