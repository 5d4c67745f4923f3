"""The dashboard's HTML, CSS and JavaScript: plain text, no build step, nothing fetched from
elsewhere at run time. The pages are shells; the script polls their JSON and redraws them.
Text from the cluster is set with ``textContent`` (never parsed as HTML); the SVG pictures
are drawn and escaped by the server (`idlegate.dashboard.svg`)."""

from __future__ import annotations

from html import escape

STYLE = """
body{font:14px system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#24292f;color:#fff;padding:10px 18px}header a{color:#fff;text-decoration:none}
main{padding:14px 18px}h2{font-size:16px;margin:18px 0 8px}
#banner{display:none;background:#b42318;color:#fff;padding:8px 18px;font-weight:600}
#banner.shown{display:block}.note{color:#8a5a00;margin:4px 0}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{background:#fff;border:1px solid #d0d7de;
border-radius:6px;padding:10px 12px;min-width:320px}
table{border-collapse:collapse;background:#fff}td,th{border-bottom:1px solid #e5e7eb;
padding:4px 8px;text-align:left;vertical-align:top}th{font-weight:600;background:#f0f2f5}
.muted{color:#6b7280}.small{font-size:10px}
.spark .use{fill:none;stroke-width:1.5}.spark .quota{stroke:#9ca3af;stroke-dasharray:3 3}
.spark .plot{fill:#f9fafb;stroke:#e5e7eb}.spark .r0{stroke:#2563eb;fill:#2563eb}
.spark .r1{stroke:#d97706;fill:#d97706}.spark .r2{stroke:#059669;fill:#059669}
.spark .r3{stroke:#9333ea;fill:#9333ea}.spark .use.r0,.spark .use.r1,.spark .use.r2,
.spark .use.r3{fill:none}.spark text{stroke:none}
.dag .edge{stroke:#9ca3af;stroke-width:1.5}.dag rect{stroke:#374151;stroke-width:1}
.dag text{font-size:12px}.state-done rect,.bar.state-done{fill:#86efac}
.state-running rect,.bar.state-running{fill:#93c5fd}.state-failed rect,.bar.state-failed{fill:#fca5a5}
.bar.state-evicted{fill:#fdba74;stroke:#c2410c;stroke-dasharray:3 2}
.state-idle rect{fill:#fde68a}.state-ready rect{fill:#e5e7eb}.state-blocked rect{fill:#fff}
.fc-unavailable{color:#b45309}.fc-bad{color:#b42318}.fc-none{color:#6b7280}
"""

SCRIPT = r"""
"use strict";
const POLL = Number(document.body.dataset.poll || 2000);
let draws = 0;
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function link(ns, name) {
  const a = el("a", ns + "/" + name);
  a.href = "/workflow/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
  return a;
}
// A cell is text, {link: [ns, name]}, {text, cls} or {svg} (drawn and escaped by the server);
// it is redrawn only when it changed.
function fill(td, c) {
  const spec = JSON.stringify(c === undefined ? null : c);
  if (td.dataset.spec === spec) return;
  td.dataset.spec = spec;
  td.replaceChildren();
  if (c === null || c === undefined) return;
  if (typeof c !== "object") td.textContent = String(c);
  else if (c.link) td.appendChild(link(c.link[0], c.link[1]));
  else if (c.svg !== undefined) td.innerHTML = c.svg;
  else td.appendChild(el("span", c.text, c.cls));
}
// Rows ({key, cells, cls, data}) updated in place: a row keeps its elements while its key
// stays, so a poll's redraw never takes a link from under a click.
function table(t, head, rows) {
  let h = t.querySelector(":scope > tr.head");
  if (!h) { h = document.createElement("tr"); h.className = "head"; t.replaceChildren(h); }
  fillHead(h, head);
  const old = new Map();
  for (const tr of t.querySelectorAll(":scope > tr:not(.head)")) old.set(tr.dataset.key, tr);
  let at = h;
  for (const r of rows) {
    let tr = old.get(r.key);
    if (tr) old.delete(r.key); else { tr = document.createElement("tr"); tr.dataset.key = r.key; }
    if (r.cls) tr.className = r.cls;
    for (const [k, v] of Object.entries(r.data || {})) tr.dataset[k] = String(v);
    while (tr.children.length > r.cells.length) tr.lastChild.remove();
    r.cells.forEach((c, i) => fill(tr.children[i] || tr.appendChild(document.createElement("td")), c));
    if (at.nextSibling !== tr) at.after(tr);
    at = tr;
  }
  for (const tr of old.values()) tr.remove();
}
function fillHead(h, head) {
  const spec = JSON.stringify(head);
  if (h.dataset.spec !== spec) { h.dataset.spec = spec; h.replaceChildren(...head.map(c => el("th", c))); }
}
function banner(text) {
  const b = document.getElementById("banner");
  if (b.textContent !== (text || "")) b.textContent = text || "";
  b.className = text ? "shown" : "";
}
function at(seconds) { return new Date(seconds * 1000).toLocaleTimeString(); }
function text(node, value) { if (node.textContent !== value) node.textContent = value; }
async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store"});
  if (!r.ok) throw new Error("the dashboard answers " + r.status);
  return r.json();
}
function poolCard(pools, p) {
  let card = pools.querySelector(":scope > .pool[data-pool=\"" + CSS.escape(p.name) + "\"]");
  if (!card) {
    card = el("div", null, "card pool");
    card.dataset.pool = p.name;
    card.append(el("h3", "Pool " + p.name), el("p", null, "muted pool-use"), el("p", null, "following"),
                el("table", null, "queues"), el("div", null, "sentences"));
  }
  text(card.querySelector(".pool-use"), p.use);
  text(card.querySelector(".following"), p.following ? "Follows: " + p.following : "");
  table(card.querySelector("table.queues"),
    ["queue", "used / quota", "borrowed", "lent", "waiting", "last hour"],
    p.queues.map(q => ({key: q.name, cls: "queue", data: {queue: q.name, waiting: q.waiting},
      cells: [q.name || "(whole pool)", q.used, q.borrowed, q.lent, q.waiting, {svg: q.chart || ""}]})));
  const said = card.querySelector(".sentences");
  const spec = JSON.stringify(p.sentences || []);
  if (said.dataset.spec !== spec) {
    said.dataset.spec = spec;
    said.replaceChildren(...((p.sentences || []).length ? [el("h4", "Why it follows what it follows")] : []),
      ...(p.sentences || []).map(e => el("p", e.time + " " + e.message, "sentence small")));
  }
  return card;
}
function drawOverview(s) {
  banner(s.outage ? s.outage + (s.refreshedAt ? " The page shows what was read at " + at(s.refreshedAt) + "." : " Nothing was read yet.") : "");
  const notes = document.getElementById("notes");
  const spec = JSON.stringify(s.notes || []);
  if (notes.dataset.spec !== spec) { notes.dataset.spec = spec; notes.replaceChildren(...(s.notes || []).map(n => el("p", n, "note"))); }
  const pools = document.getElementById("pools");
  let after = null;
  for (const p of s.pools) {
    const card = poolCard(pools, p);
    const next = after ? after.nextSibling : pools.firstChild;
    if (next !== card) pools.insertBefore(card, next);
    after = card;
  }
  while (after ? after.nextSibling : pools.firstChild) (after ? after.nextSibling : pools.firstChild).remove();
  table(document.getElementById("waiting"), ["pos", "workflow", "pool / queue", "priority", "why it waits", "forecast"],
    s.waiting.map(w => ({key: w.namespace + "/" + w.name, cls: "waiting", data: {workflow: w.namespace + "/" + w.name},
      cells: [w.position === null ? "-" : w.position, {link: [w.namespace, w.name]},
              w.pool + (w.queue ? " / " + w.queue : ""), w.priority, w.reason,
              {text: w.forecast, cls: "fc-" + w.forecastState}]})));
  table(document.getElementById("workflows"), ["workflow", "phase", "stages", "JCT"],
    s.workflows.map(w => ({key: w.namespace + "/" + w.name, cls: "workflow", data: {workflow: w.namespace + "/" + w.name},
      cells: [{link: [w.namespace, w.name]}, w.phase, w.stages,
              w.jct === null || w.jct === undefined ? "" : w.jct.toFixed(1) + " s"]})));
  text(document.getElementById("refreshed"), s.refreshedAt ? at(s.refreshedAt) : "");
  document.body.dataset.ready = "1";
}
function drawWorkflow(w) {
  banner(w.outage || "");
  if (w.found === null) return;
  if (!w.found) { text(document.getElementById("phase"), "not found, or not yours to read"); return; }
  text(document.getElementById("phase"), w.phase);
  const fc = document.getElementById("forecast");
  text(fc, w.forecast); fc.className = "fc-" + w.forecastState;
  for (const [id, svg] of [["dag", w.dag], ["gantt", w.gantt]]) {
    const e = document.getElementById(id);
    if (e.dataset.spec !== svg) { e.dataset.spec = svg; e.innerHTML = svg; }
  }
  document.getElementById("gantt").dataset.pods = w.pods;
  const seen = new Map();  // (a key per Event that stays as newer ones come first)
  table(document.getElementById("events"), ["time", "type", "reason", "message"],
    w.events.map(e => {
      const base = [e.time, e.type, e.reason, e.message].join(" ");
      seen.set(base, (seen.get(base) || 0) + 1);
      return {key: base + " #" + seen.get(base), cells: [e.time, e.type, e.reason, e.message]};
    }));
  document.body.dataset.ready = "1";
}
async function tick() {
  const page = document.body.dataset.page;
  try {
    if (page === "overview") drawOverview(await getJSON("/api/overview"));
    else drawWorkflow(await getJSON("/api/workflow/" + encodeURIComponent(document.body.dataset.ns) + "/" + encodeURIComponent(document.body.dataset.name)));
    document.body.dataset.draws = String(++draws);
  } catch (e) {
    banner("The dashboard at " + location.host + " does not answer (" + e.message + "): check that idlegate dashboard still runs.");
  }
  setTimeout(tick, POLL);
}
tick();
"""


def _shell(title: str, body: str, attrs: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<link rel="icon" href="data:,">'  # (no favicon request: no 404 in the console)
        f"<title>{title}</title><style>{STYLE}</style></head>"
        f"<body {attrs}><header><a href='/'>idlegate</a> · {title}"
        " <span class=muted id=refreshed></span></header>"
        f"<div id=banner role=alert></div><main>{body}</main>"
        "<script src='/app.js'></script></body></html>"
    )


def overview(poll_ms: int = 2000) -> str:
    body = (
        "<div id=notes></div><h2>Pools and queues</h2><div id=pools class=cards></div>"
        "<h2>Waiting workflows</h2><table id=waiting></table>"
        "<h2>Workflows</h2><table id=workflows></table>"
    )
    return _shell("pools and queues", body, f'data-page=overview data-poll="{poll_ms}"')


def workflow(namespace: str, name: str, poll_ms: int = 2000) -> str:
    """A workflow's page (`namespace`, `name` escaped by the caller)."""
    ns, n = escape(namespace), escape(name)
    body = (
        f"<h2>{ns}/{n}: <span id=phase></span></h2>"
        "<p>Forecast: <span id=forecast></span></p>"
        "<h2>Stages</h2><div id=dag></div><h2>Pods</h2><div id=gantt></div>"
        "<h2>Events</h2><table id=events></table>"
    )
    attrs = f'data-page=workflow data-ns="{ns}" data-name="{n}" data-poll="{poll_ms}"'
    return _shell(f"{ns}/{n}", body, attrs)
