// Queen dashboard: the System view (PostgreSQL and this broker process, and
// every replica's health history) and the Analytics view (throughput, dead
// letters and lag by namespace or by task over a chosen range). Uses lib.js.
"use strict";

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(1)) + " " + units[i];
}

function seconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  if (s < 86400) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

function facts(id, rows) {
  return h("dl", { class: "config", id }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, v instanceof Node ? v : text(v))]));
}

// the health series of worker-metrics (`timeSeries`), one line per replica
function healthSeries(answer, field, palette, scale) {
  const by = new Map();
  for (const p of answer.timeSeries || []) {
    if (!by.has(p.workerId)) by.set(p.workerId, []);
    by.get(p.workerId).push({ t: Date.parse(p.timestamp), v: (p[field] || 0) * (scale || 1) });
  }
  return [...by.entries()].map(([id, points], i) => ({ name: id, color: palette[i % palette.length], points }));
}

const PALETTE = ["#2563eb", "#d97706", "#059669", "#7c3aed", "#dc2626"];

views.system = async function () {
  const [pg, sys, workers] = await Promise.all([
    api("/api/v1/analytics/postgres-stats"),
    api("/api/v1/analytics/system-metrics"),
    api("/api/v1/analytics/worker-metrics?interval=1m&from=" + q(minutesAgo(60))),
  ]);
  const d = pg.database;
  const c = d.connections;
  const lt = d.longestTransaction;
  const pool = (sys.points[0] || {}).dbPool || {};
  const p = sys.process, sp = sys.spool;
  const pgCards = h("div", { class: "cards", id: "pg-cards" },
    card("connections (this database)", c.total), card("of max_connections (server)", `${c.serverTotal} / ${c.max}`, c.serverTotal > 0.8 * c.max ? "alert" : ""),
    card("active", c.active), card("idle in transaction", c.idleInTransaction, c.idleInTransaction ? "alert" : ""),
    card("database size", bytes(d.sizeBytes)),
    card("cache hit ratio", d.cacheHitRatio === null ? "–" : (d.cacheHitRatio * 100).toFixed(2) + " %", d.cacheHitRatio !== null && d.cacheHitRatio < 0.9 ? "alert" : ""),
    card("longest transaction", lt ? seconds(lt.seconds) : "none", lt && lt.seconds > 300 ? "alert" : ""));
  const replication = d.replication.length ? table([
    { label: "standby", get: (r) => r.application },
    { label: "address", get: (r) => r.clientAddr },
    { label: "state", get: (r) => r.state },
    { label: "sync", get: (r) => r.syncState },
    { label: "replay lag", num: true, get: (r) => seconds(r.replayLagSeconds) },
    { label: "behind", num: true, get: (r) => bytes(r.lagBytes) },
  ], d.replication, { id: "replication" }) : h("p", { class: "muted", id: "replication" }, d.inRecovery ? "this server is a standby" : "no standby attached");
  const brokerCards = h("div", { class: "cards", id: "broker-cards" },
    card("RSS", bytes(p.rssBytes)), card("CPU (% of a core)", p.cpuPercent.toFixed(1)), card("threads", p.threads),
    card("uptime", seconds(p.uptimeSeconds)),
    card("pool open / size", `${pool.open} / ${pool.size}`), card("pool idle", pool.idle), card("pool waiting", pool.waiting, pool.waiting ? "alert" : ""),
    card("spool pending", sp.pending, sp.pending ? "alert" : ""), card("spool bytes", bytes(sp.bytes)));
  return [
    section("PostgreSQL " + d.version + " · " + d.name, pgCards,
      facts("pg-facts", [
        ["longest transaction", lt ? `pid ${lt.pid} · ${lt.database || "–"} · ${lt.application || "–"} · ${lt.state || "–"} · ${seconds(lt.seconds)}` : "none open"],
        ["its statement", lt ? h("code", {}, lt.query || "–") : "–"],
        ["CPU time", `${p.cpuUserSeconds.toFixed(2)} s user · ${p.cpuSystemSeconds.toFixed(2)} s system (this broker)`],
      ]),
      h("h3", {}, "Replication"), replication),
    section("This broker (" + (sys.points[0] || {}).workerId + ", pid " + p.pid + ")", brokerCards,
      h("p", { class: "muted" }, `spool ${sp.writable ? "writable" : "not writable"} · database ${sp.databaseReachable ? "reachable" : "unreachable"} · ${sp.segments} segments · ${sp.drained} replayed since start`)),
    section("Replicas, last hour", h("div", { class: "charts" },
      chartBox("chart-loop-lag", healthSeries(workers, "maxEventLoopLagMs", PALETTE), "Worst event loop lag", "ms", 60),
      chartBox("chart-cpu", healthSeries(workers, "avgCpuPercent", PALETTE), "CPU (% of a core)", "%", 60),
      chartBox("chart-pool", healthSeries(workers, "dbPoolActive", PALETTE), "Pool connections in use", "conn", 60),
      chartBox("chart-rss", healthSeries(workers, "maxRssBytes", PALETTE, 1 / 1048576), "Resident memory", "MiB", 60))),
  ];
};

// ---------- analytics by namespace or task ----------

const RANGES = { "1h": [60, "1m"], "6h": [360, "5m"], "24h": [1440, "15m"], "7d": [10080, "2h"] };

views.analytics = async function (_a, _b, params) {
  const range = RANGES[params.get("range")] ? params.get("range") : "1h";
  const by = params.get("by") === "task" ? "task" : "namespace";
  const pick = params.get(by);
  const [minutes, interval] = RANGES[range];
  const from = q(minutesAgo(minutes));
  const [list, ops, lag] = await Promise.all([
    api("/api/v1/resources/queues"),
    api(`/api/v1/analytics/queue-ops?interval=${interval}&from=${from}`),
    api(`/api/v1/analytics/queue-lag?interval=${interval}&from=${from}`),
  ]);
  const keyOf = new Map((list.queues || []).map((x) => [x.name, x[by] || ""]));
  const groups = new Map();
  const group = (k) => {
    if (!groups.has(k)) groups.set(k, { key: k, queues: new Set(), pushed: 0, popped: 0, acked: 0, dead: 0, lag: 0 });
    return groups.get(k);
  };
  for (const x of list.queues || []) group(x[by] || "").queues.add(x.name);
  // history of queues deleted since is kept apart
  const GONE = "\u0000gone";
  const keyFor = (queue) => (keyOf.has(queue) ? keyOf.get(queue) : GONE);
  for (const s of ops.queues || []) {
    const g = group(keyFor(s.queue));
    g.pushed += s.totals.pushed; g.popped += s.totals.popped; g.acked += s.totals.acked; g.dead += s.totals.deadLettered;
  }
  for (const s of lag.queues || []) {
    const g = group(keyFor(s.queue));
    for (const p of s.points) g.lag = Math.max(g.lag, p.lagSeconds);
  }
  const link = (p) => {
    const u = new URLSearchParams({ range, by });
    for (const [k, v] of Object.entries(p)) if (v !== null) u.set(k, v); else u.delete(k);
    return "#/analytics?" + u;
  };
  const toolbar = h("div", { class: "toolbar", id: "analytics-toolbar" },
    h("span", {}, "by"), ...["namespace", "task"].map((b) => h("a", { href: "#/analytics?" + new URLSearchParams({ range, by: b }), class: "pill " + (b === by ? "ok" : ""), "data-by": b }, b)),
    h("span", {}, "over"), ...Object.keys(RANGES).map((r) => h("a", { href: link({ range: r, [by]: pick }), class: "pill " + (r === range ? "ok" : ""), "data-range": r }, r)));
  const rows = [...groups.values()].sort((a, b) => b.pushed - a.pushed || a.key.localeCompare(b.key));
  const label = (k) => (k === "" ? "(none)" : k);
  const body = [toolbar, table([
    { label: by, get: (g) => (g.key === GONE ? h("span", { class: "muted" }, "(queues deleted since)") : h("a", { href: link({ [by]: g.key }) }, label(g.key))) },
    { label: "queues", num: true, get: (g) => g.queues.size },
    { label: "pushed", num: true, get: (g) => g.pushed },
    { label: "popped", num: true, get: (g) => g.popped },
    { label: "acked", num: true, get: (g) => g.acked },
    { label: "dead-lettered", num: true, get: (g) => g.dead },
    { label: "worst lag (s)", num: true, get: (g) => round(g.lag) },
  ], rows, { id: "analytics", empty: "no queue", rowAttrs: (g) => ({ "data-key": g.key }), onRow: (g) => { if (g.key !== GONE) location.hash = link({ [by]: g.key }); } })];
  const out = [section(`Analytics by ${by}, last ${range}`, ...body)];
  if (pick !== null) out.push(await analyticsDetail(by, pick, range, interval, minutes, keyOf));
  return out;
};

// One namespace (or task): its rates, lag and messages written over the range,
// read with the routes' own namespace / task filters.
async function analyticsDetail(by, pick, range, interval, minutes, keyOf) {
  const from = q(minutesAgo(minutes));
  const filter = `&${by}=${q(pick)}`;
  const bucket = minutes <= 360 ? "minute" : "hour";
  const [ops, lag, written] = await Promise.all([
    api(`/api/v1/analytics/queue-ops?interval=${interval}&from=${from}${filter}`),
    api(`/api/v1/analytics/queue-lag?interval=${interval}&from=${from}${filter}`),
    api(`/api/v1/status/analytics?interval=${bucket}&from=${from}${filter}`),
  ]);
  const queues = [...keyOf.entries()].filter(([, k]) => k === pick).map(([n]) => n).sort();
  const t = ops.totals;
  const writtenSeries = [{ name: "messages written", color: COLORS.pushed, points: (written.dataPoints || []).map((p) => ({ t: Date.parse(p.timestamp), v: p.messages })) }];
  return section(`${by} ${pick === "" ? "(none)" : pick}`,
    h("div", { class: "cards", id: "analytics-totals" }, card("pushed", t.pushed), card("popped", t.popped), card("acked", t.acked),
      card("dead-lettered", t.deadLettered, t.deadLettered ? "alert" : ""), card("queues", queues.length)),
    h("div", { class: "charts" },
      chartBox("analytics-rates", opsRates(ops, "queues"), `Rates, last ${range}`, "msg/s", minutes),
      chartBox("analytics-lag", lagSeries(lag), `Worst lag, last ${range}`, "s", minutes),
      chartBox("analytics-written", writtenSeries, `Messages written per ${bucket}`, "msg", minutes)),
    h("p", {}, "queues: ", ...queues.flatMap((n, i) => [i ? ", " : "", h("a", { href: "#/queue/" + q(n) }, n)])));
}
