// Browser test of the dashboard: Debian's chromium driven by playwright-core
// against a running broker (BASE, e.g. http://127.0.0.1:26700). It makes a
// small load itself (pushes, pops, acks, one dead letter), then checks what a
// person would: the queue appears with a non-empty rate chart, a message
// opens with its payload, a dead letter is retried and leaves the DLQ, and
// maintenance flips on and off, and, with PostgreSQL cut at the fault proxy
// (PROXY, the control address of queen-testkit's fault-proxy), the outage
// banner shows over the last figures and goes once it is restored.
// Screenshots go to SHOTS (and the overview to
// docs/dashboard.png when DOCS_PNG is set). Ends with "N passed, N failed".
import { chromium } from "playwright-core";
import { mkdirSync, copyFileSync } from "node:fs";

const BASE = process.env.BASE || "http://127.0.0.1:26700";
const PROXY = process.env.PROXY;
const SHOTS = process.env.SHOTS || "dashboard/test/screenshots";
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const QUEUE = "dash-orders-" + Date.now().toString(36);
const GROUP = "billing";
// a queue of its own for the destructive actions (the load keeps using QUEUE)
const SCRATCH = "dash-scratch-" + Date.now().toString(36);
const AUDIT = "audit";
mkdirSync(SHOTS, { recursive: true });

async function call(method, path, body) {
  const r = await fetch(BASE + path, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// the HTTP status of a GET (what the database holds, through the API)
async function statusOf(path) {
  const r = await fetch(BASE + path);
  await r.arrayBuffer();
  return r.status;
}

async function popAckFrom(queue, group, batch, status) {
  const r = await fetch(`${BASE}/api/v1/pop/queue/${queue}?batch=${batch}&consumerGroup=${group}&wait=false`);
  if (r.status === 204) return [];
  const msgs = (await r.json()).messages || [];
  if (msgs.length) {
    await call("POST", "/api/v1/ack/batch", {
      consumerGroup: group,
      acknowledgments: msgs.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status, consumerGroup: group, error: status === "dlq" ? "rejected" : null })),
    });
  }
  return msgs;
}

// the open dialog: its text, then press its button (ok) or cancel
async function answerDialog(id, ok) {
  await page.waitForSelector(`dialog#${id}[open]`);
  const text = await page.textContent(`dialog#${id}`);
  await page.click(`dialog#${id} ${ok ? "#dialog-ok" : "#dialog-cancel"}`);
  if (ok !== null) await page.waitForSelector(`dialog#${id}`, { state: "detached" });
  return text;
}

async function proxy(command) {
  const r = await fetch(`${PROXY}/${command}`, { method: "POST" });
  if (!r.ok) throw new Error(`fault proxy ${command}: ${r.status} ${await r.text()}`);
}

let seq = 0;
async function push(n, partition) {
  const items = [];
  for (let i = 0; i < n; i++) {
    seq++;
    items.push({ queue: QUEUE, partition, transactionId: `order-${seq}`, payload: { orderId: seq, customer: partition, amount: seq * 1.5, lines: [{ sku: "A-" + seq, qty: 1 }] } });
  }
  return call("POST", "/api/v1/push", { items });
}

async function popAck(batch, status) {
  const r = await fetch(`${BASE}/api/v1/pop/queue/${QUEUE}?batch=${batch}&consumerGroup=${GROUP}&wait=false`);
  if (r.status === 204) return [];
  const body = await r.json();
  const msgs = body.messages || [];
  if (msgs.length) {
    await call("POST", "/api/v1/ack/batch", {
      consumerGroup: GROUP,
      acknowledgments: msgs.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status, consumerGroup: GROUP, error: status === "dlq" ? "card declined" : null })),
    });
  }
  return msgs;
}

const results = [];
async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.push([name, true]);
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    results.push([name, false]);
    console.log(`FAIL ${name}: ${e.message}`);
  }
}

// the load: three partitions, a group that acks most and dead-letters one
await call("POST", "/api/v1/configure", { queue: QUEUE, namespace: "shop", task: "checkout", options: {} });
await push(20, "cust-1");
await push(15, "cust-2");
await push(10, "cust-3");
const dead = await popAck(1, "dlq");
const dead2 = await popAck(1, "dlq");
for (let i = 0; i < 6; i++) await popAck(5, "completed");
await call("POST", "/api/v1/traces", { partitionId: dead[0].partitionId, transactionId: dead[0].transactionId, consumerGroup: GROUP, eventType: "info", data: { text: "charging card" }, traceNames: ["checkout"] }).catch(() => null);
await call("POST", "/api/v1/push", { items: [1, 2, 3, 4].map((i) => ({ queue: SCRATCH, partition: "p-" + (i % 2), transactionId: "s-" + i, payload: { i } })) });
await popAckFrom(SCRATCH, AUDIT, 1, "dlq");
await popAckFrom(SCRATCH, AUDIT, 1, "dlq");
await popAckFrom(SCRATCH, AUDIT, 2, "completed");
// key/value rows and timers for their read-only views
const KV_NS = "dash-" + Date.now().toString(36);
const TIMER_QUEUE = "dash-timers-" + Date.now().toString(36);
await call("POST", "/api/v1/kv", { operations: [
  { op: "put", ns: KV_NS, key: "greeting", value: { hello: "world" }, forever: true },
  { op: "put", ns: KV_NS, key: "visits", value: 41, ttlSeconds: 3600 },
] });
await call("POST", "/api/v1/kv", { operations: [{ op: "incr", ns: KV_NS, key: "visits", delta: 1, ttlSeconds: 3600 }] });
const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64");
await call("POST", "/api/v1/timers", { operations: [
  { op: "schedule", queue: TIMER_QUEUE, timerKey: "reminder-1", payload: b64({ remind: 1 }), delayMs: 3600000, txn: "reminder-1" },
  { op: "schedule", queue: TIMER_QUEUE, timerKey: "hourly", payload: b64({ tick: true }), intervalMs: 3600000, txn: "hourly" },
] });
await call("POST", "/api/v1/stats/refresh", {});
let loadOn = true;
const load = (async () => {
  for (let i = 0; loadOn && i < 600; i++) {
    await push(3, "live-" + (1 + (i % 3))).catch(() => null);
    await popAck(2, "completed").catch(() => null);
    await new Promise((r) => setTimeout(r, 400));
  }
})();

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
page.setDefaultTimeout(15000);
page.on("dialog", (d) => { consoleErrors.push("a native dialog: " + d.message()); d.dismiss(); });
const consoleErrors = [];
page.on("pageerror", (e) => consoleErrors.push(e.message));

try {
  await step("overview shows the rate chart with samples", async () => {
    await page.goto(BASE + "/#/");
    await page.waitForSelector("#chart-rates svg[data-nonzero=true]", { timeout: 20000 });
    await page.waitForSelector("#replicas tbody tr");
    await page.screenshot({ path: `${SHOTS}/overview.png`, fullPage: true });
  });

  await step("the pushed queue appears in the queue list, searchable", async () => {
    await page.goto(BASE + "/#/queues");
    await page.fill("#queue-search", QUEUE.slice(0, 14));
    await page.waitForSelector(`#queues a:text-is("${QUEUE}")`);
    await page.screenshot({ path: `${SHOTS}/queues.png`, fullPage: true });
  });

  await step("queue detail: partitions, a non-empty rate chart, groups", async () => {
    await page.click(`#queues a:text-is("${QUEUE}")`);
    await page.waitForSelector("#queue-rates svg[data-nonzero=true]", { timeout: 20000 });
    await page.waitForSelector("#partitions tbody tr >> nth=2");
    await page.waitForSelector(`#queue-groups td:text-is("${GROUP}")`);
    await page.screenshot({ path: `${SHOTS}/queue.png`, fullPage: true });
  });

  await step("a message opens with its payload pretty-printed", async () => {
    await page.goto(`${BASE}/#/messages/${QUEUE}/cust-1`);
    await page.waitForSelector("#messages a:text-is('order-1')");
    await page.click("#messages a:text-is('order-1')");
    const payload = await page.textContent("#payload", { timeout: 15000 });
    if (!payload.includes('"orderId": 1') || !payload.includes("\n")) throw new Error("payload not pretty-printed: " + payload);
    await page.screenshot({ path: `${SHOTS}/message.png`, fullPage: true });
  });

  const dlqRow = (d) => `#dlq tr[data-transaction-id="${d.transactionId}"]`;

  await step("a dead letter opens with its payload", async () => {
    await page.goto(`${BASE}/#/dlq?queue=${QUEUE}`);
    await page.waitForSelector(dlqRow(dead[0]));
    await page.waitForSelector(dlqRow(dead2[0]));
    await page.click(dlqRow(dead[0]) + " td >> nth=0");
    const payload = await page.textContent(".detail pre.payload");
    if (!payload.includes('"orderId"')) throw new Error("payload: " + payload);
    await page.screenshot({ path: `${SHOTS}/dlq.png`, fullPage: true });
  });

  await step("a dead letter is retried and leaves the DLQ", async () => {
    await page.click(dlqRow(dead[0]) + " button.retry");
    await page.waitForSelector(dlqRow(dead[0]), { state: "detached" });
    const left = await call("GET", `/api/v1/dlq?queue=${QUEUE}`);
    if (left.messages.some((d) => d.transactionId === dead[0].transactionId)) throw new Error("still in the DLQ");
  });

  await step("a dead letter is deleted and leaves the DLQ", async () => {
    await page.click(dlqRow(dead2[0]) + " button.delete");
    const said = await answerDialog("confirm", false);
    if (!said.includes(dead2[0].transactionId)) throw new Error("the dialog does not name the dead letter: " + said);
    if (!(await call("GET", `/api/v1/dlq?queue=${QUEUE}`)).messages.some((d) => d.transactionId === dead2[0].transactionId)) throw new Error("deleted after cancel");
    await page.click(dlqRow(dead2[0]) + " button.delete");
    await answerDialog("confirm", true);
    await page.waitForSelector(dlqRow(dead2[0]), { state: "detached" });
    const left = await call("GET", `/api/v1/dlq?queue=${QUEUE}`);
    if (left.messages.some((d) => d.transactionId === dead2[0].transactionId)) throw new Error("still in the DLQ");
  });

  await step("maintenance flips on and off", async () => {
    await page.goto(BASE + "/#/");
    await page.waitForSelector("#maint-push");
    await page.click("#maint-push");
    await page.waitForFunction(() => document.querySelector("#maint-push") && document.querySelector("#maint-push").checked);
    let m = await call("GET", "/api/v1/system/maintenance");
    if (m.maintenanceMode !== true) throw new Error("push maintenance not on");
    await page.screenshot({ path: `${SHOTS}/maintenance.png`, fullPage: true });
    await page.click("#maint-push");
    await page.waitForFunction(() => document.querySelector("#maint-push") && !document.querySelector("#maint-push").checked);
    m = await call("GET", "/api/v1/system/maintenance");
    if (m.maintenanceMode !== false) throw new Error("push maintenance not off");
  });

  await step("consumer groups and traces views render", async () => {
    await page.goto(BASE + "/#/groups");
    await page.waitForSelector(`#groups td a:text-is("${GROUP}")`);
    await page.goto(BASE + "/#/traces");
    await page.waitForSelector("section h2:text-is('Trace names')");
  });

  await step("push a message: bad JSON is refused in the dialog, good JSON lands", async () => {
    await page.goto(`${BASE}/#/queue/${SCRATCH}`);
    await page.click("#queue-push");
    await page.waitForSelector("dialog#push-dialog[open]");
    if ((await page.inputValue("#push-queue")) !== SCRATCH) throw new Error("the dialog does not start on the queue");
    await page.fill("#push-partition", "manual");
    await page.fill("#push-txn", "manual-1");
    await page.fill("#push-payload", '{"note": "typed by hand",');
    await page.click("dialog#push-dialog #dialog-ok");
    const err = await page.textContent("dialog#push-dialog .dialog-error");
    if (!/not JSON/.test(err)) throw new Error("no JSON error shown: " + err);
    const before = await call("GET", `/api/v1/messages?queue=${SCRATCH}&partition=manual`);
    if (before.messages.length) throw new Error("pushed although the JSON was bad");
    await page.fill("#push-payload", '{"note": "typed by hand", "n": 7}');
    await page.click("dialog#push-dialog #dialog-ok");
    await page.waitForSelector("dialog#push-dialog", { state: "detached" });
    const after = await call("GET", `/api/v1/messages?queue=${SCRATCH}&partition=manual`);
    if (after.messages.length !== 1 || after.messages[0].transactionId !== "manual-1") throw new Error("not stored: " + JSON.stringify(after.messages));
    const m = await call("GET", `/api/v1/messages/${after.messages[0].partitionId}/manual-1`);
    if (JSON.stringify(m.payload) !== JSON.stringify({ note: "typed by hand", n: 7 })) throw new Error("payload: " + JSON.stringify(m.payload));
  });

  await step("delete a message: cancel keeps it, confirm deletes it", async () => {
    const list = await call("GET", `/api/v1/messages?queue=${SCRATCH}&partition=manual`);
    const pid = list.messages[0].partitionId;
    await page.goto(`${BASE}/#/message/${pid}/manual-1`);
    await page.click("#message-delete");
    const said = await answerDialog("confirm", false);
    if (!said.includes("manual-1") || !said.includes(SCRATCH)) throw new Error("the dialog does not name the message: " + said);
    if ((await statusOf(`/api/v1/messages/${pid}/manual-1`)) !== 200) throw new Error("gone after cancel");
    await page.click("#message-delete");
    await answerDialog("confirm", true);
    await page.waitForFunction(() => location.hash.startsWith("#/messages/"));
    if ((await statusOf(`/api/v1/messages/${pid}/manual-1`)) !== 404) throw new Error("still there after confirm");
  });

  await step("queue options: every option shown, a refusal shown, the form sets them", async () => {
    await page.goto(`${BASE}/#/queue/${SCRATCH}`);
    const echoed = (await call("GET", `/api/v1/status/queues/${SCRATCH}`)).queue.options;
    for (const k of Object.keys(echoed)) await page.waitForSelector(`#queue-options dd[data-option="${k}"]`);
    await page.click("#options-edit");
    await page.waitForSelector("dialog#options-dialog[open]");
    await page.fill("#opt-leaseTime", "-5");
    await page.click("dialog#options-dialog #dialog-ok");
    const err = await page.textContent("dialog#options-dialog .dialog-error:not([hidden])");
    if (!/leaseTime/.test(err)) throw new Error("the refusal does not name the option: " + err);
    await page.fill("#opt-leaseTime", "120");
    await page.fill("#opt-retryLimit", "7");
    await page.check("#opt-deadLetterQueue");
    await page.click("dialog#options-dialog #dialog-ok");
    await page.waitForSelector("dialog#options-dialog", { state: "detached" });
    await page.waitForSelector('#queue-options dd[data-option="leaseTime"]:text-is("120")');
    await page.waitForSelector('#queue-options dd[data-option="retryLimit"]:text-is("7")');
    const o = (await call("GET", `/api/v1/status/queues/${SCRATCH}`)).queue.options;
    if (o.leaseTime !== 120 || o.retryLimit !== 7 || o.deadLetterQueue !== true) throw new Error("stored: " + JSON.stringify(o));
    await page.screenshot({ path: `${SHOTS}/queue-options.png`, fullPage: true });
  });

  await step("purge a queue's dead letters: cancel keeps them, confirm deletes them", async () => {
    const total = async () => (await call("GET", `/api/v1/dlq?queue=${SCRATCH}`)).total;
    if ((await total()) !== 2) throw new Error("expected 2 dead letters, found " + (await total()));
    await page.goto(`${BASE}/#/dlq?queue=${SCRATCH}`);
    await page.click("#dlq-purge");
    const said = await answerDialog("confirm", false);
    if (!said.includes("2 dead letters") || !said.includes(SCRATCH)) throw new Error("the dialog does not say what goes: " + said);
    if ((await total()) !== 2) throw new Error("purged after cancel");
    await page.click("#dlq-purge");
    await answerDialog("confirm", true);
    await page.waitForSelector("#dlq td.empty");
    if ((await total()) !== 0) throw new Error("dead letters left: " + (await total()));
  });

  const hasGroup = async () => (await call("GET", "/api/v1/consumer-groups")).some((g) => g.name === AUDIT && g.queueName === SCRATCH);

  await step("delete a consumer group on a queue: cancel keeps it, confirm deletes it", async () => {
    await page.goto(`${BASE}/#/queue/${SCRATCH}`);
    const button = `#queue-groups button[data-group="${AUDIT}"]`;
    await page.click(button);
    const said = await answerDialog("confirm", false);
    if (!said.includes(AUDIT) || !said.includes(SCRATCH)) throw new Error("the dialog does not name the group: " + said);
    if (!(await hasGroup())) throw new Error("gone after cancel");
    await page.click(button);
    await answerDialog("confirm", true);
    await page.waitForSelector(button, { state: "detached" });
    if (await hasGroup()) throw new Error("still there after confirm");
  });

  await step("delete a queue: cancel keeps it, confirm deletes it", async () => {
    await page.goto(`${BASE}/#/queue/${SCRATCH}`);
    await page.click("#queue-delete");
    const held = (await call("GET", `/api/v1/resources/queues/${SCRATCH}`));
    const said = await answerDialog("confirm", false);
    const what = `${held.partitions.length} partitions and ${held.totals.total} messages`;
    if (!said.includes(SCRATCH) || !said.includes(what)) throw new Error(`the dialog does not say "${what}": ${said}`);
    if ((await statusOf(`/api/v1/resources/queues/${SCRATCH}`)) !== 200) throw new Error("gone after cancel");
    await page.click("#queue-delete");
    await answerDialog("confirm", true);
    await page.waitForFunction(() => location.hash === "#/queues");
    if ((await statusOf(`/api/v1/resources/queues/${SCRATCH}`)) !== 404) throw new Error("still there after confirm");
    await page.fill("#queue-search", SCRATCH);
    await page.waitForSelector("#queues td.empty");
    await page.fill("#queue-search", "");
  });

  await step("delete a consumer group on every queue from its page: cancel keeps it, confirm deletes it", async () => {
    const REPORTING = "reporting";
    await popAckFrom(QUEUE, REPORTING, 2, "completed");
    const has = async () => (await call("GET", "/api/v1/consumer-groups")).some((g) => g.name === REPORTING);
    if (!(await has())) throw new Error("the group was not created");
    await page.goto(`${BASE}/#/group/${REPORTING}`);
    await page.waitForSelector("#group-partitions tbody tr");
    await page.click("#group-delete");
    const said = await answerDialog("confirm", false);
    if (!said.includes(REPORTING) || !said.includes("on every queue")) throw new Error("the dialog does not name the group: " + said);
    if (!(await has())) throw new Error("gone after cancel");
    await page.click("#group-delete");
    await answerDialog("confirm", true);
    await page.waitForFunction(() => location.hash === "#/groups");
    if (await has()) throw new Error("still there after confirm");
    await page.waitForSelector(`#groups tr[data-group="${GROUP}"]`);
    if (await page.$(`#groups tr[data-group="${REPORTING}"]`)) throw new Error("still listed");
  });

  await step("System view: PostgreSQL and the broker, with the replicas' health history", async () => {
    await page.goto(BASE + "/#/system");
    await page.waitForSelector("#pg-cards");
    const pg = (await call("GET", "/api/v1/analytics/postgres-stats")).database;
    const cards = await page.$$eval("#pg-cards .card, #broker-cards .card", (cs) => Object.fromEntries(cs.map((c) => [c.querySelector(".k").textContent, c.querySelector(".v").textContent])));
    if (!(Number(cards["connections (this database)"]) >= 1)) throw new Error("connections: " + JSON.stringify(cards));
    if (!/^\d+ \/ \d+$/.test(cards["of max_connections (server)"]) || !cards["of max_connections (server)"].endsWith("/ " + pg.connections.max)) throw new Error("max_connections: " + JSON.stringify(cards));
    if (!/(KiB|MiB|GiB)$/.test(cards["database size"])) throw new Error("size: " + cards["database size"]);
    if (!/^\d+\.\d\d %$/.test(cards["cache hit ratio"])) throw new Error("cache hit: " + cards["cache hit ratio"]);
    if (!/MiB$/.test(cards["RSS"])) throw new Error("rss: " + cards["RSS"]);
    if (!(Number(cards["threads"]) >= 1)) throw new Error("threads: " + cards["threads"]);
    if (!/^\d+ \/ \d+$/.test(cards["pool open / size"])) throw new Error("pool: " + cards["pool open / size"]);
    const repl = await page.textContent("#replication");
    if (!/no standby attached/.test(repl) && pg.replication.length === 0) throw new Error("replication: " + repl);
    await page.waitForSelector("#chart-loop-lag svg[data-nonzero=true]", { timeout: 20000 });
    await page.waitForSelector("#chart-cpu svg[data-nonzero=true]", { timeout: 20000 });
    await page.waitForSelector("#chart-rss svg[data-nonzero=true]");
    await page.screenshot({ path: `${SHOTS}/system.png`, fullPage: true });
  });

  await step("Analytics by namespace and task over the four ranges", async () => {
    await page.goto(BASE + "/#/analytics");
    await page.waitForSelector('#analytics tr[data-key="shop"]');
    const cell = async (n) => Number((await page.textContent(`#analytics tr[data-key="shop"] td >> nth=${n}`)).trim());
    if ((await cell(1)) < 1 || (await cell(2)) < 45) throw new Error(`shop: ${await cell(1)} queues, ${await cell(2)} pushed`);
    await page.click('#analytics tr[data-key="shop"] td >> nth=0');
    await page.waitForSelector("#analytics-rates svg[data-nonzero=true]", { timeout: 20000 });
    await page.waitForSelector("#analytics-written svg[data-nonzero=true]");
    const api = (await call("GET", `/api/v1/analytics/queue-ops?interval=1m&namespace=shop&from=${new Date(Date.now() - 3600000).toISOString()}`)).totals;
    const shown = Number(await page.textContent("#analytics-totals .card >> nth=0 >> .v"));
    if (!(shown > 0 && shown <= api.pushed)) throw new Error(`pushed shown ${shown}, the route says ${api.pushed}`);
    const others = (await call("GET", `/api/v1/analytics/queue-ops?namespace=shop`)).queues.map((x) => x.queue);
    if (others.some((n) => n !== QUEUE)) throw new Error("the namespace filter let in " + others.join(", "));
    for (const r of ["6h", "24h", "7d"]) {
      await page.click(`#analytics-toolbar a[data-range="${r}"]`);
      await page.waitForSelector(`section h2:text-is("Analytics by namespace, last ${r}")`);
      await page.waitForSelector("#analytics-rates svg[data-nonzero=true]", { timeout: 20000 });
    }
    await page.click('#analytics-toolbar a[data-by="task"]');
    await page.waitForSelector('#analytics tr[data-key="checkout"]');
    await page.screenshot({ path: `${SHOTS}/analytics.png`, fullPage: true });
  });

  await step("Key/value: namespaces, then a namespace's keys with values", async () => {
    await page.goto(BASE + "/#/kv");
    await page.click(`#kv-namespaces a:text-is("${KV_NS}")`);
    await page.waitForSelector('#kv-keys tr[data-key="greeting"]');
    const value = await page.textContent('#kv-keys tr[data-key="greeting"] code.kv-value');
    if (value !== '{"hello":"world"}') throw new Error("greeting: " + value);
    const visits = await page.textContent('#kv-keys tr[data-key="visits"] code.kv-value');
    if (visits !== "42") throw new Error("visits: " + visits);
    const expires = await page.textContent('#kv-keys tr[data-key="greeting"] td >> nth=3');
    if (expires !== "never") throw new Error("greeting expires: " + expires);
  });

  await step("Timers: queues with pending timers, then a queue's timers", async () => {
    await page.goto(BASE + "/#/timers");
    const row = `#timer-queues tr:has(a:text-is("${TIMER_QUEUE}"))`;
    await page.waitForSelector(row);
    const n = await page.textContent(`${row} td >> nth=1`);
    if (n !== "2") throw new Error("pending timers: " + n);
    await page.click(`${row} a`);
    await page.waitForSelector('#timers tr[data-key="hourly"]');
    const sched = await page.textContent('#timers tr[data-key="hourly"] td >> nth=3');
    if (sched !== "every 3600000 ms") throw new Error("schedule: " + sched);
    if ((await page.textContent('#timers tr[data-key="reminder-1"] td >> nth=3')) !== "once") throw new Error("one-shot schedule");
    await page.screenshot({ path: `${SHOTS}/timers.png`, fullPage: true });
  });

  await step("a database outage shows the banner over the last figures, and it goes", async () => {
    if (!PROXY) throw new Error("PROXY (the fault proxy's control address) is not set");
    const banner = "#banner.down:not([hidden])";
    const broken = () => page.$$eval(".error-box", (boxes) => boxes.map((b) => b.textContent));
    await page.goto(BASE + "/#/");
    await page.waitForSelector("#chart-rates svg[data-nonzero=true]");
    await page.waitForSelector("#replicas tbody tr");
    if (await page.isVisible("#banner")) throw new Error("a banner before the outage: " + (await page.textContent("#banner")));
    await proxy("cut");
    try {
      await page.waitForSelector(banner, { timeout: 30000 });
      const text = await page.textContent("#banner");
      if (!/PostgreSQL is unreachable/.test(text)) throw new Error("banner: " + text);
      await page.waitForFunction(() => document.querySelector("#health") && document.querySelector("#health").textContent !== "healthy");
      // two refreshes later, the overview still shows its last figures
      await page.waitForTimeout(7000);
      if (!(await page.isVisible(banner))) throw new Error("the banner went while PostgreSQL is cut");
      const boxes = await broken();
      if (boxes.length) throw new Error("a broken view during the outage: " + boxes.join(" | "));
      await page.waitForSelector("#chart-rates svg[data-nonzero=true]", { timeout: 1000 });
      await page.waitForSelector("#replicas tbody tr", { timeout: 1000 });
      if (!/Figures below are from/.test(await page.textContent("#banner"))) throw new Error("the banner does not say how old the figures are");
      await page.screenshot({ path: `${SHOTS}/outage.png`, fullPage: true });
      // a view opened during the outage says why it cannot be shown
      await page.goto(BASE + "/#/queues");
      await page.waitForSelector(banner);
      await page.waitForSelector(".error-box", { timeout: 15000 });
      const opened = (await broken()).join(" ");
      if (!/503/.test(opened)) throw new Error("the view opened during the outage says: " + opened);
    } finally {
      await proxy("restore");
    }
    await page.waitForSelector("#banner", { state: "hidden", timeout: 60000 });
    await page.waitForSelector(`#queues a:text-is("${QUEUE}")`, { timeout: 30000 });
    await page.goto(BASE + "/#/");
    await page.waitForSelector("#chart-rates svg[data-nonzero=true]", { timeout: 20000 });
    if (await page.isVisible("#banner")) throw new Error("the banner is back after the restore");
    const boxes = await broken();
    if (boxes.length) throw new Error("a broken view after the restore: " + boxes.join(" | "));
  });

  await step("no script error on any page", async () => {
    if (consoleErrors.length) throw new Error(consoleErrors.join("; "));
  });

  if (process.env.DOCS_PNG) {
    await page.goto(BASE + "/#/");
    await page.waitForSelector("#chart-rates svg[data-nonzero=true]");
    await page.screenshot({ path: process.env.DOCS_PNG });
  }
} finally {
  loadOn = false;
  await load;
  await browser.close();
}

const passed = results.filter((r) => r[1]).length;
console.log(`dashboard: ${passed} passed, ${results.length - passed} failed`);
process.exit(passed === results.length ? 0 : 1);
