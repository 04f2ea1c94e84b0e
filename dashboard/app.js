// Queen dashboard: routing by the location hash (#/queues, #/queue/NAME,
// #/message/PID/TID, ...) and the live refresh. Loaded last.
"use strict";

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
