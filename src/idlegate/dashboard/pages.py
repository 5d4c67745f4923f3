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
.spark .use{fill:none;stroke:#2563eb;stroke-width:1.5}.spark .quota{stroke:#9ca3af;
stroke-dasharray:3 3}.spark{background:#f9fafb;border:1px solid #e5e7eb}
.dag .edge{stroke:#9ca3af;stroke-width:1.5}.dag rect{stroke:#374151;stroke-width:1}
.dag text{font-size:12px}.state-done rect,.bar.state-done{fill:#86efac}
.state-running rect,.bar.state-running{fill:#93c5fd}.state-failed rect,.bar.state-failed{fill:#fca5a5}
.state-idle rect{fill:#fde68a}.state-ready rect{fill:#e5e7eb}.state-blocked rect{fill:#fff}
.fc-unavailable{color:#b45309}.fc-bad{color:#b42318}.fc-none{color:#6b7280}
"""

SCRIPT = r"""
"use strict";
const POLL = Number(document.body.dataset.poll || 2000);
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "" : String(c);
    tr.appendChild(td);
  }
  return tr;
}
function table(id, head, rows) {
  const t = document.getElementById(id);
  t.replaceChildren();
  const h = document.createElement("tr");
  for (const c of head) h.appendChild(el("th", c));
  t.appendChild(h);
  for (const r of rows) t.appendChild(row(r));
}
function banner(text) {
  const b = document.getElementById("banner");
  b.textContent = text || "";
  b.className = text ? "shown" : "";
}
function amounts(m) {
  if (m === null || m === undefined) return "-";
  return Object.entries(m).map(([k, v]) => k + " " + v).join(", ") || "0";
}
function link(ns, name) {
  const a = el("a", ns + "/" + name);
  a.href = "/workflow/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
  return a;
}
async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store"});
  if (!r.ok) throw new Error("the dashboard answers " + r.status);
  return r.json();
}
function drawOverview(s) {
  banner(s.outage ? "Kubernetes API outage: " + s.outage : "");
  const notes = document.getElementById("notes");
  notes.replaceChildren(...(s.notes || []).map(n => el("p", n, "note")));
  const pools = document.getElementById("pools");
  pools.replaceChildren();
  for (const p of s.pools) {
    const card = el("div", null, "card pool");
    card.dataset.pool = p.name;
    card.appendChild(el("h3", "Pool " + p.name));
    const size = p.size === null || p.size === undefined ? "" : p.busy + " / " + p.size + " executors busy, " + p.pending + " pending";
    card.appendChild(el("p", size, "muted"));
    if (p.following) card.appendChild(el("p", "Follows: " + p.following, "following"));
    const t = el("table");
    const h = document.createElement("tr");
    for (const c of ["queue", "used / nominal", "borrowed", "lent", "waiting", "last hour"]) h.appendChild(el("th", c));
    t.appendChild(h);
    for (const q of p.queues) {
      const chart = el("span");
      chart.innerHTML = q.chart || "";
      const r = row([q.name || "(one queue)", amounts(q.used) + " / " + amounts(q.nominal),
                     amounts(q.borrowed), amounts(q.lent), q.waiting, chart]);
      r.className = "queue";
      r.dataset.queue = q.name;
      r.dataset.used = q.usedPods;
      r.dataset.waiting = q.waiting;
      t.appendChild(r);
    }
    card.appendChild(t);
    if ((p.sentences || []).length) {
      card.appendChild(el("h4", "Why it follows what it follows"));
      for (const e of p.sentences) card.appendChild(el("p", e.time + " " + e.message, "sentence small"));
    }
    pools.appendChild(card);
  }
  table("waiting", ["pos", "workflow", "pool / queue", "priority", "why it waits", "forecast"],
    s.waiting.map(w => {
      const f = el("span", w.forecast, "fc-" + w.forecastState);
      return [w.position === null ? "-" : w.position, link(w.namespace, w.name),
              w.pool + (w.queue ? " / " + w.queue : ""), w.priority, w.reason, f];
    }));
  for (const tr of document.querySelectorAll("#waiting tr")) {
    const a = tr.querySelector("a");
    if (a) { tr.className = "waiting"; tr.dataset.workflow = a.textContent; }
  }
  table("workflows", ["workflow", "phase", "stages", "JCT"],
    s.workflows.map(w => [link(w.namespace, w.name), w.phase, w.stages,
                          w.jct === null || w.jct === undefined ? "" : w.jct.toFixed(1) + " s"]));
  document.getElementById("refreshed").textContent = s.refreshedAt ? new Date(s.refreshedAt * 1000).toLocaleTimeString() : "";
  document.body.dataset.ready = "1";
}
function drawWorkflow(w) {
  banner(w.outage ? "Kubernetes API outage: " + w.outage : "");
  if (w.found === null) return;
  if (!w.found) { document.getElementById("phase").textContent = "not found, or not yours to read"; return; }
  document.getElementById("phase").textContent = w.phase;
  const fc = document.getElementById("forecast");
  fc.textContent = w.forecast; fc.className = "fc-" + w.forecastState;
  document.getElementById("dag").innerHTML = w.dag;
  document.getElementById("gantt").innerHTML = w.gantt;
  document.getElementById("gantt").dataset.pods = w.pods;
  table("events", ["time", "type", "reason", "message"], w.events.map(e => [e.time, e.type, e.reason, e.message]));
  document.body.dataset.ready = "1";
}
async function tick() {
  const page = document.body.dataset.page;
  try {
    if (page === "overview") drawOverview(await getJSON("/api/overview"));
    else drawWorkflow(await getJSON("/api/workflow/" + encodeURIComponent(document.body.dataset.ns) + "/" + encodeURIComponent(document.body.dataset.name)));
  } catch (e) {
    banner("The dashboard cannot be reached: " + e.message);
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
