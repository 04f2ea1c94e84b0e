// Queen dashboard: read-only views of the key/value store and the timers
// (the 2.6 surfaces): namespaces and their keys with values, queues with
// pending timers and each timer's schedule. Uses lib.js.
"use strict";

const PAGE = 100;

// a page link that keeps the rest of the view's address
function pageLink(base, after, label) {
  return h("a", { href: base + (after ? "?after=" + q(after) : ""), class: "pill" }, label);
}

views.kv = async function (ns, _b, params) {
  if (!ns) {
    const r = await api("/api/v1/kv/namespaces");
    return [section("Key/value namespaces", h("p", { class: "muted" }, "Live keys only; locks keep their permits in queen-locks."),
      table([
        { label: "namespace", get: (n) => h("a", { href: "#/kv/" + q(n.ns) }, n.ns) },
        { label: "keys", num: true, get: (n) => n.keys },
        { label: "next expiry", get: (n) => when(n.nextExpiry) },
      ], r.namespaces || [], { id: "kv-namespaces", empty: "no key stored", onRow: (n) => { location.hash = "#/kv/" + q(n.ns); } }))];
  }
  const after = params.get("after") || "";
  const r = await api(`/api/v1/kv/keys?ns=${q(ns)}&limit=${PAGE}` + (after ? "&after=" + q(after) : ""));
  const rows = r.rows || [];
  return [section("Namespace " + ns,
    h("p", {}, h("a", { href: "#/kv" }, "all namespaces"), after ? " · from after " + after : ""),
    table([
      { label: "key", get: (k) => h("code", {}, k.key) },
      { label: "value", get: (k) => h("code", { class: "kv-value" }, JSON.stringify(k.value)) },
      { label: "version", num: true, get: (k) => k.version },
      { label: "expires", get: (k) => (k.expiresAt ? when(k.expiresAt) : "never") },
      { label: "updated", get: (k) => when(k.updatedAt) },
    ], rows, { id: "kv-keys", empty: "no live key", rowAttrs: (k) => ({ "data-key": k.key }) }),
    h("div", { class: "toolbar" }, after ? pageLink("#/kv/" + q(ns), "", "first page") : null,
      r.truncated ? pageLink("#/kv/" + q(ns), r.nextAfter, "next page") : null))];
};

views.timers = async function (queue, _b, params) {
  if (!queue) {
    const r = await api("/api/v1/timers");
    return [section("Timers by queue", table([
      { label: "queue", get: (t) => h("a", { href: "#/timers/" + q(t.queue) }, t.queue) },
      { label: "pending timers", num: true, get: (t) => t.timers },
      { label: "recurring", num: true, get: (t) => t.recurring },
      { label: "next fire", get: (t) => when(t.nextDeliverAt) },
    ], r.queues || [], { id: "timer-queues", empty: "no pending timer", onRow: (t) => { location.hash = "#/timers/" + q(t.queue); } }))];
  }
  const after = params.get("after") || "";
  const r = await api(`/api/v1/timers/${q(queue)}?limit=${PAGE}` + (after ? "&after=" + q(after) : ""));
  const schedule = (t) => (t.recurring ? (t.cron ? `cron ${t.cron} (${t.timezone || "UTC"})` : `every ${t.intervalMs} ms`) : "once");
  return [section("Timers of " + queue,
    h("p", {}, h("a", { href: "#/timers" }, "all queues"), " · ", h("a", { href: "#/queue/" + q(queue) }, "the queue")),
    table([
      { label: "timer key", get: (t) => h("code", {}, t.timerKey) },
      { label: "partition", get: (t) => t.partition },
      { label: "fires at", get: (t) => when(t.deliverAt) },
      { label: "schedule", get: schedule },
      { label: "fires so far", num: true, get: (t) => (t.recurring ? t.fires : "–") },
      { label: "txn", get: (t) => t.txn },
      { label: "attempts", num: true, get: (t) => t.attempts },
      { label: "last error", get: (t) => t.lastError },
    ], r.rows || [], { id: "timers", empty: "no pending timer", rowAttrs: (t) => ({ "data-key": t.timerKey }) }),
    h("div", { class: "toolbar" }, after ? pageLink("#/timers/" + q(queue), "", "first page") : null,
      r.truncated ? pageLink("#/timers/" + q(queue), r.nextAfter, "next page") : null))];
};
