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
await push(20, "cust-1");
await push(15, "cust-2");
await push(10, "cust-3");
const dead = await popAck(1, "dlq");
const dead2 = await popAck(1, "dlq");
for (let i = 0; i < 6; i++) await popAck(5, "completed");
await call("POST", "/api/v1/traces", { partitionId: dead[0].partitionId, transactionId: dead[0].transactionId, consumerGroup: GROUP, eventType: "info", data: { text: "charging card" }, traceNames: ["checkout"] }).catch(() => null);
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
page.on("dialog", (d) => d.accept());
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
