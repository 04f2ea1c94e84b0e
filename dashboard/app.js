// Queen dashboard: reads the HTTP API v1 and renders it. No framework, no
// build step; every value from the server is inserted as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "queen.dashboard.token";
let selectedQueue = null;

$("token").value = localStorage.getItem(TOKEN_KEY) || "";
$("token").addEventListener("change", () => {
  localStorage.setItem(TOKEN_KEY, $("token").value.trim());
  refresh();
});
$("detail-close").addEventListener("click", () => {
  selectedQueue = null;
  $("detail").hidden = true;
});

async function api(path) {
  const headers = {};
  const token = $("token").value.trim();
  if (token) headers.Authorization = "Bearer " + token;
  const resp = await fetch(path, { headers });
  let body = null;
  try { body = await resp.json(); } catch (_) { /* empty or not JSON */ }
  if (!resp.ok) {
    const why = body && body.error ? body.error : resp.statusText;
    throw new Error(path + ": " + resp.status + " " + why);
  }
  return body;
}

function cell(row, value, numeric) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "–" : String(value);
  if (numeric) td.className = "n";
  row.appendChild(td);
}

function fill(tableId, rows, columns, onClick) {
  const body = $(tableId).querySelector("tbody");
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = columns.length;
    td.className = "empty";
    td.textContent = "none";
    tr.appendChild(td);
    body.appendChild(tr);
    return;
  }
  for (const r of rows) {
    const tr = document.createElement("tr");
    for (const [get, numeric] of columns) cell(tr, get(r), numeric);
    if (onClick) {
      tr.className = "click";
      tr.addEventListener("click", () => onClick(r));
    }
    body.appendChild(tr);
  }
}

function cards(overview) {
  const m = overview.messages || {};
  const t = overview.throughput || {};
  const items = [
    ["queues", overview.queues],
    ["partitions", overview.partitions],
    ["messages", m.total],
    ["pending", m.pending],
    ["processing", m.processing],
    ["completed", m.completed],
    ["dead letter", m.deadLetter],
    ["pushed / s", t.ingestedPerSecond],
    ["acked / s", t.processedPerSecond],
  ];
  const box = $("cards");
  box.replaceChildren();
  for (const [k, v] of items) {
    const d = document.createElement("div");
    d.className = "card";
    const value = document.createElement("div");
    value.className = "v";
    value.textContent = typeof v === "number" ? (Number.isInteger(v) ? v : v.toFixed(1)) : "–";
    const key = document.createElement("div");
    key.className = "k";
    key.textContent = k;
    d.append(value, key);
    box.appendChild(d);
  }
}

async function showQueue(name) {
  const q = await api("/api/v1/resources/queues/" + encodeURIComponent(name));
  $("detail-name").textContent = q.name;
  $("detail").hidden = false;
  fill("partitions", q.partitions || [], [
    [(p) => p.name], [(p) => p.stats.total, true], [(p) => p.stats.pending, true],
    [(p) => p.stats.processing, true], [(p) => p.stats.completed, true],
    [(p) => p.stats.deadLetter, true], [(p) => p.newestMessage],
  ]);
}

async function refresh() {
  try {
    const health = await fetch("/health").then((r) => r.json()).catch(() => null);
    const pill = $("health");
    pill.textContent = health ? health.status : "unreachable";
    pill.className = "pill " + (health && health.status === "healthy" ? "ok" : "bad");
    $("server").textContent = health ? health.server + " " + health.version + " · " + health.worker_id : "";

    const [overview, queues, groups, dlq, streams] = await Promise.all([
      api("/api/v1/resources/overview"),
      api("/api/v1/resources/queues"),
      api("/api/v1/consumer-groups"),
      api("/api/v1/dlq?limit=20"),
      api("/api/v1/streams/queries"),
    ]);
    cards(overview);
    fill("queues", queues.queues || [], [
      [(q) => q.name], [(q) => q.namespace], [(q) => q.task], [(q) => q.partitions, true],
      [(q) => q.messages.total, true], [(q) => q.messages.pending, true],
      [(q) => q.messages.processing, true],
    ], (q) => { selectedQueue = q.name; showQueue(q.name).catch(report); });
    fill("groups", groups || [], [
      [(g) => g.name], [(g) => g.queueName], [(g) => g.members, true],
      [(g) => g.partitionsWithLag, true], [(g) => g.maxTimeLag, true], [(g) => g.state],
      [(g) => g.subscriptionMode],
    ]);
    fill("streams", streams.queries || [], [
      [(q) => q.name], [(q) => q.sourceQueue], [(q) => q.sinkQueue], [(q) => q.stateRows, true],
      [(q) => q.lag, true],
    ]);
    fill("dlq", dlq.messages || [], [
      [(d) => d.failedAt], [(d) => d.queue], [(d) => d.partition], [(d) => d.consumerGroup],
      [(d) => d.retryCount, true], [(d) => d.errorMessage],
    ]);
    if (selectedQueue) await showQueue(selectedQueue);
    $("error").hidden = true;
  } catch (e) {
    report(e);
  }
}

function report(e) {
  $("error").textContent = e.message;
  $("error").hidden = false;
}

refresh();
setInterval(() => { if ($("live").checked) refresh(); }, 3000);
