// Queen dashboard charts: time-series line charts drawn as plain SVG.
// lineChart(series, options) returns an <svg> element; every label is text,
// never HTML. A series is {name, color, points: [{t: epoch ms, v: number}]}.
(function () {
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// 1, 2, 5 x 10^n steps: about `count` ticks over [0, max].
function niceTicks(max, count) {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let v = 0; v <= max + step * 0.001; v += step) ticks.push(v);
  if (ticks[ticks.length - 1] < max) ticks.push(ticks[ticks.length - 1] + step);
  return ticks;
}

function fmtNumber(v) {
  if (v === 0) return "0";
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (Math.abs(v) >= 1e3) return (v / 1e3).toFixed(1) + "k";
  if (Math.abs(v) < 10 && !Number.isInteger(v)) return v.toFixed(2);
  return String(Math.round(v * 10) / 10);
}

function fmtClock(ms) {
  const d = new Date(ms);
  return String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0");
}

// options: {from, to (epoch ms), title, unit, height}
function lineChart(series, options) {
  const o = Object.assign({ width: 640, height: 200, unit: "" }, options || {});
  const pad = { l: 48, r: 12, t: 22, b: 24 };
  const W = o.width, H = o.height;
  const iw = W - pad.l - pad.r, ih = H - pad.t - pad.b;
  const all = series.flatMap((s) => s.points);
  const from = o.from !== undefined ? o.from : Math.min(...all.map((p) => p.t));
  const to = o.to !== undefined ? o.to : Math.max(...all.map((p) => p.t));
  const span = Math.max(to - from, 1);
  const maxV = Math.max(0, ...all.map((p) => p.v));
  const ticks = niceTicks(maxV, 4);
  const top = ticks[ticks.length - 1] || 1;
  const x = (t) => pad.l + ((t - from) / span) * iw;
  const y = (v) => pad.t + ih - (v / top) * ih;

  const root = svg("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
    "data-points": all.length, "data-nonzero": all.some((p) => p.v > 0) ? "true" : "false",
  });
  root.appendChild(svg("title", {}, o.title || "chart"));
  if (o.title) root.appendChild(svg("text", { x: pad.l, y: 14, class: "chart-title" }, o.title + (o.unit ? " (" + o.unit + ")" : "")));
  for (const v of ticks) {
    root.appendChild(svg("line", { x1: pad.l, x2: W - pad.r, y1: y(v), y2: y(v), class: "grid" }));
    root.appendChild(svg("text", { x: pad.l - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" }, fmtNumber(v)));
  }
  const xticks = 6;
  for (let i = 0; i <= xticks; i++) {
    const t = from + (span * i) / xticks;
    root.appendChild(svg("text", { x: x(t), y: H - 6, class: "axis", "text-anchor": "middle" }, fmtClock(t)));
  }
  root.appendChild(svg("line", { x1: pad.l, x2: W - pad.r, y1: y(0), y2: y(0), class: "baseline" }));

  let legendX = W - pad.r;
  for (const s of [...series].reverse()) {
    const label = svg("text", { x: legendX, y: 14, class: "legend", "text-anchor": "end", fill: s.color }, "● " + s.name);
    root.appendChild(label);
    legendX -= 12 + 7 * (s.name.length + 2);
  }
  for (const s of series) {
    const pts = [...s.points].sort((a, b) => a.t - b.t);
    if (pts.length === 0) continue;
    const d = pts.map((p, i) => (i ? "L" : "M") + x(p.t).toFixed(1) + " " + y(p.v).toFixed(1)).join(" ");
    root.appendChild(svg("path", { d, class: "series", stroke: s.color, "data-series": s.name }));
    for (const p of pts) {
      const dot = svg("circle", { cx: x(p.t), cy: y(p.v), r: pts.length > 60 ? 1.5 : 2.5, fill: s.color });
      dot.appendChild(svg("title", {}, s.name + " " + fmtNumber(p.v) + (o.unit ? " " + o.unit : "") + " at " + new Date(p.t).toLocaleTimeString()));
      root.appendChild(dot);
    }
  }
  if (all.length === 0) {
    root.appendChild(svg("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" }, "no samples in this window yet"));
  }
  return root;
}

// A horizontal timeline of events [{t, label, detail}].
function timeline(events, options) {
  const o = Object.assign({ width: 640, height: 70 }, options || {});
  const W = o.width, H = o.height, padX = 16;
  const ts = events.map((e) => e.t);
  const from = Math.min(...ts), to = Math.max(...ts);
  const span = Math.max(to - from, 1);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart timeline", role: "img", "data-points": events.length });
  root.appendChild(svg("line", { x1: padX, x2: W - padX, y1: 30, y2: 30, class: "baseline" }));
  events.forEach((e, i) => {
    const cx = events.length === 1 ? W / 2 : padX + ((e.t - from) / span) * (W - 2 * padX);
    const dot = svg("circle", { cx, cy: 30, r: 5, class: "event" });
    dot.appendChild(svg("title", {}, e.label + " · " + new Date(e.t).toISOString() + (e.detail ? " · " + e.detail : "")));
    root.appendChild(dot);
    root.appendChild(svg("text", { x: cx, y: i % 2 ? 56 : 16, class: "axis", "text-anchor": "middle" }, e.label));
  });
  return root;
}

window.QueenCharts = { lineChart, timeline, fmtNumber };
})();
