"""Offline checks of deploy/'s monitoring component: the ServiceMonitor and the Grafana
dashboard, against the operator's own metrics registry."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from tests.deploy_files import DEPLOY, NAMESPACE, kustomize, only, validate_versions

# -- monitoring: the ServiceMonitor component and the Grafana dashboard ------------------------

MONITORING = DEPLOY / "components" / "monitoring"
DASHBOARD = MONITORING / "idlegate-dashboard.json"
DURATION = r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
# The ServiceMonitor fields this project uses, as monitoring.coreos.com/v1 defines them
# (prometheus-operator's API reference); a field it does not know is an error here.
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        }
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": DURATION},
                        },
                    },
                },
            },
        },
    },
}
# What Grafana needs of a provisioned dashboard and its panels (the fields used here)
_TARGET = {
    "type": "object",
    "required": ["refId", "expr", "datasource"],
    "properties": {"refId": {"type": "string", "pattern": "^[A-Z]$"}, "expr": {"type": "string"}},
}
DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "templating": {
            "type": "object",
            "properties": {
                "list": {
                    "type": "array",
                    "contains": {
                        "properties": {
                            "type": {"const": "datasource"},
                            "query": {"const": "prometheus"},
                        }
                    },
                }
            },
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos", "datasource", "targets"],
                "properties": {
                    "type": {"enum": ["timeseries", "stat"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {
                            "x": {"type": "integer", "minimum": 0, "maximum": 23},
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                        },
                    },
                    "datasource": {"properties": {"uid": {"const": "${datasource}"}}},
                    "targets": {"type": "array", "minItems": 1, "items": _TARGET},
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return kustomize(DEPLOY / "base")


@pytest.fixture(scope="module")
def monitoring_built() -> list[dict[str, Any]]:
    return kustomize(DEPLOY / "overlays" / "monitoring")


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def test_monitoring_overlay_is_the_base_plus_a_servicemonitor_and_the_dashboard(
    monitoring_built, built
):
    extra = [d for d in monitoring_built if d not in built]
    assert sorted(d["kind"] for d in extra) == ["ConfigMap", "ServiceMonitor"]
    assert len(monitoring_built) == len(built) + 2
    for obj in extra:
        assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]


def test_servicemonitor_is_valid_and_selects_the_metrics_service(monitoring_built):
    monitor = only(monitoring_built, "ServiceMonitor")
    jsonschema.validate(monitor, SERVICE_MONITOR_SCHEMA)
    service = only(monitoring_built, "Service")
    labels = service["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items(), "the selector must match the metrics Service"
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    ports = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    assert monitor["spec"]["jobLabel"] in labels


@pytest.mark.parametrize("version", validate_versions())
def test_dashboard_configmap_passes_kubernetes_validate_and_carries_the_file(
    monitoring_built, version
):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    configmap = only(monitoring_built, "ConfigMap")
    kv.validate(configmap, version, strict=True)
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"]["idlegate-dashboard.json"] == DASHBOARD.read_text()


_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def _exported_series() -> set[str]:
    """Every series name the operator's registry exports (labelled ones with or without
    children yet): a counter's ``_total``, a histogram's ``_bucket``, ``_sum``, ``_count``."""
    from idlegate.operator.metrics import Metrics

    families = Metrics(4, "fair").registry.collect()
    return {f.name + suffix for f in families for suffix in _SUFFIXES[f.type]}


def test_dashboard_queries_only_metrics_the_operator_exports():
    dashboard = _dashboard()
    jsonschema.validate(dashboard, DASHBOARD_SCHEMA)
    exported = _exported_series()
    used: set[str] = set()
    for panel in dashboard["panels"]:
        names = {n for t in panel["targets"] for n in re.findall(r"\bidlegate_\w+", t["expr"])}
        assert names, f"panel {panel['title']!r} queries no idlegate metric"
        unknown = names - exported
        assert not unknown, f"panel {panel['title']!r} queries unknown series {sorted(unknown)}"
        used |= names
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
    # what the issue asked to see, at least
    for series in (
        "idlegate_workflow_completion_time_seconds_bucket",
        "idlegate_pending_workflows",
        "idlegate_busy_executors",
        "idlegate_executors",
        "idlegate_idle_inserted_seconds_total",
        "idlegate_decision_duration_seconds_bucket",
        "idlegate_api_up",
        "idlegate_api_unreachable_seconds_total",
        "idlegate_watch_restarts_total",
        "idlegate_crd_missing",
    ):
        assert series in used, series


def test_dashboard_marks_outages_on_every_panel():
    """While the API server does not answer, the gauges are stale: an annotation says so."""
    (outage,) = _dashboard()["annotations"]["list"]
    assert outage["enable"] and outage["datasource"]["uid"] == "${datasource}"
    assert re.findall(r"\bidlegate_\w+", outage["expr"]) == ["idlegate_api_up"]
    assert outage["expr"].endswith("== 0")


def test_dashboard_panels_do_not_overlap():
    cells: dict[tuple[int, int], str] = {}
    for panel in _dashboard()["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


def _per_pool_series() -> set[str]:
    """The series names of the families that carry a ``pool`` label."""
    from idlegate.operator.metric_families import POOL, MetricFamilies

    families = MetricFamilies()
    names = set()
    # (from the declarations, not a scrape: a family with no child yet exports nothing)
    for family in vars(families).values():
        if POOL in getattr(family, "_labelnames", ()):
            names |= {family._name + suffix for suffix in _SUFFIXES[family._type]}
    return names


def test_dashboard_has_a_pool_variable_that_filters_every_per_pool_series():
    dashboard = _dashboard()
    (pool,) = [v for v in dashboard["templating"]["list"] if v["name"] == "pool"]
    assert pool["type"] == "query" and pool["multi"] and pool["includeAll"]
    assert pool["datasource"]["uid"] == "${datasource}"
    assert re.fullmatch(r"label_values\(idlegate_\w+, pool\)", pool["definition"])
    per_pool = _per_pool_series()
    assert {"idlegate_busy_executors", "idlegate_decisions_total"} <= per_pool
    assert "idlegate_api_up" not in per_pool  # operator-wide series have no pool
    filtered = 0
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name, labels in re.findall(r"\b(idlegate_\w+)(\{[^}]*\})?", target["expr"]):
                if name in per_pool:
                    assert 'pool=~"$pool"' in labels, (panel["title"], target["expr"])
                    filtered += 1
                else:
                    assert "pool" not in labels, (panel["title"], target["expr"])
    assert filtered >= 20
