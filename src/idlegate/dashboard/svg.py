"""The dashboard's pictures, as SVG text: a workflow's DAG (stages coloured by state), the
Gantt of its pods (one bar per pod that started), and a queue's use over the last hour.

Pure: data in, escaped SVG out; the page's CSS gives the colours (``state-*`` classes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

BOX_W, BOX_H, GAP_X, GAP_Y = 140, 34, 50, 16


def levels(stages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Each stage's column: the length of the longest path of dependencies to it."""
    index = {s["name"]: i for i, s in enumerate(stages)}
    level: list[int | None] = [None] * len(stages)

    def of(i: int, seen: frozenset[int]) -> int:
        found = level[i]
        if found is None:
            parents = [index[d] for d in stages[i].get("dependsOn") or () if d in index]
            found = 1 + max((of(p, seen | {i}) for p in parents if p not in seen), default=-1)
            level[i] = found
        return found

    return [of(i, frozenset()) for i in range(len(stages))]


def dag_svg(stages: Sequence[Mapping[str, Any]]) -> str:
    """`stages` (each ``name``, ``dependsOn``, ``state``, ``label``) as boxes in columns
    by depth, edges from each dependency to its dependent."""
    if not stages:
        return '<svg class="dag" width="0" height="0"></svg>'
    cols = levels(stages)
    rows: dict[int, int] = {}
    at: list[tuple[int, int]] = []
    for c in cols:
        r = rows.get(c, 0)
        rows[c] = r + 1
        at.append((c * (BOX_W + GAP_X) + 10, r * (BOX_H + GAP_Y) + 10))
    width = (max(cols) + 1) * (BOX_W + GAP_X) - GAP_X + 20
    height = max(rows.values()) * (BOX_H + GAP_Y) - GAP_Y + 20
    index = {s["name"]: i for i, s in enumerate(stages)}
    parts = [f'<svg class="dag" width="{width}" height="{height}" role="img" aria-label="DAG">']
    for i, s in enumerate(stages):
        for d in s.get("dependsOn") or ():
            if d in index:
                (x1, y1), (x2, y2) = at[index[d]], at[i]
                parts.append(
                    f'<line class="edge" x1="{x1 + BOX_W}" y1="{y1 + BOX_H / 2}" '
                    f'x2="{x2}" y2="{y2 + BOX_H / 2}"/>'
                )
    for (x, y), s in zip(at, stages, strict=True):
        name, state = escape(str(s["name"])), escape(str(s.get("state", "waiting")))
        label = escape(str(s.get("label", "")))
        parts.append(
            f'<g class="stage state-{state}" data-stage="{name}" data-state="{state}">'
            f"<title>{name}: {state} {label}</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5"/>'
            f'<text x="{x + 8}" y="{y + 14}">{name}</text>'
            f'<text class="small" x="{x + 8}" y="{y + 27}">{label}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def gantt_svg(bars: Sequence[Mapping[str, Any]], now: float, width: int = 720) -> str:
    """One bar per attempt (``pod``, ``stage``, ``start``, ``end`` or None while it runs,
    ``state``: an evicted one drawn apart and said in its title), one row each, on a time
    axis from the first start to the last end."""
    if not bars:
        return '<p class="muted" id="gantt-empty">No pod has started yet.</p>'
    t0 = min(b["start"] for b in bars)
    t1 = max((b["end"] if b["end"] is not None else now) for b in bars)
    span = max(t1 - t0, 1e-3)
    left, row = 150, 18
    scale = (width - left - 10) / span
    height = len(bars) * row + 24
    parts = [f'<svg class="gantt" width="{width}" height="{height}" role="img" aria-label="Gantt">']
    for i, b in enumerate(bars):
        end = b["end"] if b["end"] is not None else now
        x = left + (b["start"] - t0) * scale
        w = max(2.0, (end - b["start"]) * scale)
        y = i * row + 4
        pod, state = escape(str(b["pod"])), escape(str(b.get("state", "done")))
        parts.append(
            f'<text class="small" x="4" y="{y + 12}">{escape(str(b["stage"]))}</text>'
            f'<rect class="bar state-{state}" data-pod="{pod}" x="{x:.1f}" y="{y}" '
            f'width="{w:.1f}" height="{row - 5}"><title>{pod}: {end - b["start"]:.1f} s'
            f"{' (evicted: stopped to give quota back)' if state == 'evicted' else ''}"
            "</title></rect>"
        )
    parts.append(
        f'<text class="small" x="{left}" y="{height - 4}">0 s</text>'
        f'<text class="small" x="{width - 60}" y="{height - 4}">{span:.1f} s</text></svg>'
    )
    return "".join(parts)


def spark_svg(
    series: Sequence[tuple[float, Mapping[str, float]]], now: float, window: float = 3600
) -> str:
    """A queue's use over the last `window` seconds (`series`: (time, each charted
    resource's share of the queue's bound: its nominal quota, or the pool's capacity)), one
    line per resource, with the bound as a dashed line at 100 %. The time axis spans what
    was sampled (at least a minute, at most `window`: a dashboard started a minute ago
    draws that minute across the chart, and says so)."""
    w, h, side = 220, 44, 70  # (the plot, then a column for its legend: never over a line)
    shown = [(t, v) for t, v in series if now - t <= window]
    if shown:  # (the last sample holds until now: a line from the first reading on)
        shown.append((now, shown[-1][1]))
    span = min(window, max(60.0, now - shown[0][0])) if shown else window
    names = list(dict.fromkeys(r for _, v in shown for r in v))
    top = 1.25 * max([v for _, m in shown for v in m.values()] + [1.0])

    def y(v: float) -> float:
        return h - 2 - (h - 4) * v / top

    lines = []
    for i, name in enumerate(names):
        points = " ".join(
            f"{w * (1 - (now - t) / span):.1f},{y(m[name]):.1f}" for t, m in shown if name in m
        )
        label = escape(name)
        lines.append(
            f'<polyline class="use r{i % 4}" data-resource="{label}" points="{points}">'
            f"<title>{label}, share of its quota</title></polyline>"
            f'<text class="small r{i % 4}" x="{w + 4}" y="{10 + 10 * i}">{label}</text>'
        )
    quota = f'<line class="quota" x1="0" x2="{w}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}"/>'
    label = f"last {span / 60:.0f} min"
    return (
        f'<svg class="spark" width="{w + side}" height="{h}" role="img" '
        f'aria-label="use beside quota, {label}">'
        f'<rect class="plot" width="{w}" height="{h}"/>{quota}{"".join(lines)}'
        f'<text class="small" x="{w + 4}" y="{h - 4}">{label}</text></svg>'
    )
