// Queen dashboard: the actions. Each opens a dialog that names what it will
// change or destroy and acts only when its button is pressed, through the
// same HTTP API v1 routes as any client; a refusal is shown in the dialog,
// which stays open. Also the queue's options and their form. Uses lib.js.
"use strict";

function plural(n, one, many) { return n + " " + (n === 1 ? one : many || one + "s"); }

// ---------- push a message ----------

function pushDialog(queue, partition) {
  const qIn = h("input", { id: "push-queue", name: "queue", required: true, value: queue || "", placeholder: "queue" });
  const pIn = h("input", { id: "push-partition", name: "partition", value: partition || "", placeholder: "Default" });
  const tIn = h("input", { id: "push-txn", name: "transactionId", placeholder: "generated when empty" });
  const payload = h("textarea", { id: "push-payload", name: "payload", rows: 8, spellcheck: "false" }, '{\n  "hello": "world"\n}');
  const body = [
    h("p", { class: "muted" }, "One message, appended to the tail of the partition (created on first push)."),
    h("label", {}, "queue", qIn), h("label", {}, "partition", pIn), h("label", {}, "transaction id", tIn),
    h("label", {}, "payload (JSON)", payload),
  ];
  return dialog("Push a message", body, "Push", async () => {
    const q0 = qIn.value.trim();
    if (!q0) throw new Error("the queue is required");
    let value;
    try { value = JSON.parse(payload.value); } catch (e) { throw new Error("the payload is not JSON: " + e.message); }
    const item = { queue: q0, payload: value };
    if (pIn.value.trim()) item.partition = pIn.value.trim();
    if (tIn.value.trim()) item.transactionId = tIn.value.trim();
    const r = await api("/api/v1/push", { method: "POST", body: { items: [item] } });
    const res = (r || [])[0] || {};
    if (res.error || res.status === "failed") throw new Error("refused: " + (res.error || res.status));
    flash(`${res.status || "pushed"}: ${res.transaction_id || ""} in ${q0}/${item.partition || "Default"}`, true);
    return res;
  }, { id: "push-dialog" });
}

// ---------- destructive actions ----------

async function deleteQueue(name, detail) {
  const t = (detail && detail.totals) || {};
  const parts = detail && detail.partitions ? detail.partitions.length : 0;
  const done = await confirmAction("Delete queue " + name + "?",
    `Queue ${name} is deleted for good with its ${plural(parts, "partition")} and ${plural(t.total || 0, "message")}` +
    " (pending ones included), every consumer group's position on it, its dead letters, traces and stored subscriptions.",
    "Delete queue", () => api("/api/v1/resources/queues/" + q(name), { method: "DELETE" }));
  if (!done) return;
  flash("deleted queue " + name, true);
  location.hash = "#/queues";
}

async function deleteMessage(m) {
  const done = await confirmAction("Delete message " + m.transactionId + "?",
    `Message ${m.transactionId} of ${m.queue}/${m.partition} is deleted: no consumer group will receive it any more,` +
    " and its transaction id can be used again in that partition.",
    "Delete message", async () => {
      const r = await api(`/api/v1/messages/${q(m.partitionId)}/${q(m.transactionId)}`, { method: "DELETE" });
      if (!r.success) throw new Error(r.message || "not deleted");
      return r;
    });
  if (!done) return;
  flash("deleted message " + m.transactionId, true);
  location.hash = `#/messages/${q(m.queue)}/${q(m.partition)}`;
}

// `queue` given: the group's positions on that queue only; else on every queue.
async function deleteGroup(group, queue, after) {
  const label = group === "__QUEUE_MODE__" ? "queue mode" : group;
  const where = queue ? `on queue ${queue}` : "on every queue";
  const path = queue ? `/api/v1/consumer-groups/${q(group)}/queues/${q(queue)}` : `/api/v1/consumer-groups/${q(group)}`;
  const done = await confirmAction(`Delete consumer group ${label}?`,
    `The positions of consumer group ${label} ${where} are deleted with its stored subscription: ` +
    "its consumers' next pop starts over as a new group (by the subscription mode it asks for).",
    "Delete group", () => api(path + "?deleteMetadata=true", { method: "DELETE" }));
  if (!done) return;
  flash(`deleted ${label} (${plural(done.deletedPartitions || 0, "position")})`, true);
  if (after) after(); else render();
}

// Every dead letter of the queue, page by page, through the delete route of one entry.
async function purgeDlq(queue) {
  const first = await api("/api/v1/dlq?limit=1&queue=" + q(queue)).catch((e) => { flash("dead letters: " + e.message, false); return null; });
  if (!first) return;
  const done = await confirmAction(`Purge the dead letters of ${queue}?`,
    `All ${plural(first.total, "dead letter")} of queue ${queue} (every consumer group) are deleted for good;` +
    " the messages themselves stay where they are, already passed by their groups.",
    "Purge dead letters", async () => {
      let deleted = 0;
      for (let round = 0; round < 1000; round++) {
        const page = await api("/api/v1/dlq?limit=200&queue=" + q(queue));
        const rows = page.messages || [];
        if (rows.length === 0) return { deleted };
        await Promise.all(rows.map((d) => api(`/api/v1/dlq/${q(d.partitionId)}/${q(d.transactionId)}?consumerGroup=${q(d.consumerGroup)}`, { method: "DELETE" })
          .then(() => { deleted++; }, (e) => { if (e.status !== 404) throw e; })));
      }
      throw new Error(`stopped after ${deleted} deletions: dead letters keep arriving`);
    });
  if (!done) return;
  flash(`purged ${plural(done.deleted, "dead letter")} of ${queue}`, true);
  render();
}

// ---------- queue options ----------

// What each option means, in the order shown; options the broker echoes
// beyond these are shown too, and these are skipped when it does not.
const OPTION_HELP = {
  leaseTime: "s a pop's lease lasts",
  retryLimit: "failed acks before the dead-letter queue",
  retryDelay: "ms before a failed message is delivered again",
  retryBackoff: "how the retry delay grows",
  retryDelayMax: "ms, the most a retry delay grows to",
  ttl: "s after which a message is not delivered (0: never)",
  maxSize: "messages the queue holds at most (0: unbounded)",
  priority: "order of namespace pops (higher first)",
  deadLetterQueue: "failed and expired messages go to the dead-letter queue",
  dlqAfterMaxRetries: "dead-letter after the retry limit",
  delayedProcessing: "s a message stays invisible after its push",
  windowBuffer: "s a partition must be quiet before delivery",
  retentionEnabled: "delete old messages",
  retentionSeconds: "s a pending message is kept",
  completedRetentionSeconds: "s a completed message is kept",
  maxWaitTimeSeconds: "s before eviction of waiting messages",
  encryptionEnabled: "payloads encrypted at rest",
};

function optionKeys(options) {
  const known = Object.keys(OPTION_HELP).filter((k) => k in options);
  return known.concat(Object.keys(options).filter((k) => !(k in OPTION_HELP)).sort());
}

function optionInput(key, value) {
  if (typeof value === "boolean") return h("input", { type: "checkbox", name: key, id: "opt-" + key, checked: value });
  if (typeof value === "number") return h("input", { type: "number", name: key, id: "opt-" + key, value, step: "any" });
  return h("input", { name: key, id: "opt-" + key, value: value === null || value === undefined ? "" : String(value) });
}

function readOption(input, was) {
  if (typeof was === "boolean") return input.checked;
  if (typeof was === "number") {
    const raw = input.value.trim();
    if (raw === "" || !/^-?\d+(\.\d+)?$/.test(raw)) throw new Error(`${input.name} must be a number`);
    return Number(raw);
  }
  return input.value;
}

// The queue's options as the broker holds them (`status.queue.options`, or
// the older `config` subset), and a form that sets the whole set at once.
function optionsSection(name, info) {
  const options = (info && (info.options || info.config)) || null;
  if (!options) return section("Options", h("p", { class: "muted" }, "not readable"));
  const keys = optionKeys(options);
  const list = h("dl", { class: "config", id: "queue-options" }, keys.flatMap((k) => [
    h("dt", { title: OPTION_HELP[k] || "" }, k), h("dd", { "data-option": k }, text(options[k]))]));
  const edit = h("button", { type: "button", id: "options-edit", onclick: () => editOptions(name, info, options, keys) }, "edit options");
  return section("Options", list, info.options ? h("div", { class: "toolbar" }, edit)
    : h("p", { class: "muted" }, "this broker reports only these options: editing needs them all"));
}

async function editOptions(name, info, options, keys) {
  const inputs = {};
  const ns = h("input", { name: "namespace", id: "opt-namespace", value: info.namespace || "" });
  const task = h("input", { name: "task", id: "opt-task", value: info.task || "" });
  const rows = keys.map((k) => {
    inputs[k] = optionInput(k, options[k]);
    return h("label", { class: "option-row" }, h("span", {}, k), inputs[k], h("span", { class: "muted" }, OPTION_HELP[k] || ""));
  });
  const body = [
    h("p", { class: "muted" }, `Sets every option of ${name} at once (POST /api/v1/configure); an option cleared here returns to its default.`),
    h("label", { class: "option-row" }, h("span", {}, "namespace"), ns), h("label", { class: "option-row" }, h("span", {}, "task"), task),
    h("div", { class: "option-grid" }, rows),
  ];
  const r = await dialog("Options of " + name, body, "Save options", () => {
    const sent = {};
    for (const k of keys) sent[k] = readOption(inputs[k], options[k]);
    return api("/api/v1/configure", { method: "POST", body: { queue: name, namespace: ns.value.trim(), task: task.value.trim(), options: sent } });
  }, { id: "options-dialog" });
  if (!r) return;
  const echoed = r.options || {};
  const changed = keys.filter((k) => k in echoed && echoed[k] !== options[k]);
  flash(changed.length ? "options saved: " + changed.map((k) => `${k} ${text(echoed[k])}`).join(", ") : "options saved, nothing changed", true);
  render();
}
