// Queen dashboard: the read views (overview, queues, a queue, messages, a
// message, dead letters, consumer groups, streams, traces). Uses lib.js.
"use strict";

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
  const push = h("button", { type: "button", id: "push-open", onclick: async () => { if (await pushDialog()) render(); } }, "push a message");
  return [section("Queues", h("div", { class: "toolbar" }, search, h("span", { class: "muted" }, (list.queues || []).length + " queues"), h("span", { class: "spacer" }), push), box)];
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
  const info = status && status.queue ? status.queue : null;
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
    { label: "", get: (g) => h("button", { type: "button", class: "delete", "data-group": g.name, onclick: () => deleteGroup(g.name, name) }, "delete") },
  ], mine, { id: "queue-groups", empty: "no consumer group has read this queue" });
  const dead = (detail.totals && detail.totals.deadLetter) || 0;
  const actions = h("div", { class: "toolbar", id: "queue-actions" },
    h("button", { type: "button", id: "queue-push", onclick: async () => { if (await pushDialog(name)) render(); } }, "push a message"),
    h("button", { type: "button", class: "delete", id: "queue-purge-dlq", onclick: () => purgeDlq(name) }, "purge dead letters"),
    h("button", { type: "button", class: "delete", id: "queue-delete", onclick: () => deleteQueue(name, detail) }, "delete queue"));
  return [
    section("Queue " + name,
      h("p", {}, h("a", { href: `#/messages/${q(name)}` }, "browse messages"), " · ", h("a", { href: `#/dlq?queue=${q(name)}` }, `dead letters (${dead})`)),
      actions,
      h("div", { class: "charts" },
        chartBox("queue-rates", opsRates(ops, "queues"), "Rates, last hour", "msg/s", 60),
        chartBox("queue-lag", lagSeries(lag), "Lag, last hour", "s", 60))),
    section("Partitions", parts),
    h("div", { class: "two" },
      section("Consumer groups", groupTable, seekForm(name, mine)),
      optionsSection(name, info)),
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
      h("div", { class: "toolbar" }, h("button", { type: "button", class: "delete", id: "message-delete",
        onclick: () => deleteMessage(Object.assign({ partitionId: pid }, m)) }, "delete message")),
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
  h("button", { type: "submit" }, "filter"), h("span", { class: "muted" }, list.total + " dead letters"),
  queue && list.total ? h("button", { type: "button", class: "delete", id: "dlq-purge", onclick: () => purgeDlq(queue) }, "purge all of " + queue) : null);
  const key = (d) => d.partitionId + "/" + d.transactionId + "/" + d.consumerGroup;
  const act = async (d, verb) => {
    try {
      if (verb === "retry") {
        await api(`/api/v1/messages/${q(d.partitionId)}/${q(d.transactionId)}/retry`, { method: "POST" });
        flash("retried " + d.transactionId, true);
      } else {
        const done = await confirmAction("Delete dead letter " + d.transactionId + "?",
          `The dead letter of ${d.transactionId} (${d.queue}/${d.partition}, group ${d.consumerGroup}) is deleted for good; the message stays, already passed by the group.`,
          "Delete dead letter", () => api(`/api/v1/dlq/${q(d.partitionId)}/${q(d.transactionId)}?consumerGroup=${q(d.consumerGroup)}`, { method: "DELETE" }));
        if (!done) return;
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
    { label: "", get: (g) => h("button", { type: "button", class: "delete", onclick: () => deleteGroup(g.name, g.queueName) }, "delete on " + g.queueName) },
  ], groups || [], { id: "groups", rowAttrs: (g) => ({ "data-group": g.name, "data-queue": g.queueName }) }))];
};

views.group = async function (name) {
  const detail = await api("/api/v1/consumer-groups/" + q(name));
  const rows = Object.entries(detail || {}).flatMap(([queue, v]) => (v.partitions || []).map((p) => Object.assign({ queue }, p)));
  const del = h("button", { type: "button", class: "delete", id: "group-delete", onclick: () => deleteGroup(name, null, () => { location.hash = "#/groups"; }) }, "delete on every queue");
  return [section("Consumer group " + name, h("div", { class: "toolbar" }, del), table([
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

