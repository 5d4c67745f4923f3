"""Offline checks of deploy/components/airflow (the gate on Airflow's worker pods) through
deploy/overlays/airflow: it builds, its built-in kinds pass kubernetes-validate, its webhook
is what kopf registers for the operator's handler, and its flags parse and point at what it
mounts."""

from __future__ import annotations

import re
from typing import Any

import kopf
import pytest
from kopf._core.engines.admission import build_webhooks

from idlegate.api.settings import Settings
from idlegate.operator.features import airflow
from idlegate.operator.main import build_registry
from idlegate.operator.runtime import Operator
from tests.deploy_files import DEPLOY, kustomize, only

OVERLAY = DEPLOY / "overlays" / "airflow"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return kustomize(OVERLAY)


def _settings(args: list[str]) -> dict[str, str]:
    """The flags of the component (``--airflow-*``, ``--webhook-*``) as Settings' fields."""
    pairs = (a[2:].split("=", 1) for a in args if a.startswith(("--airflow", "--webhook")))
    return {key.replace("-", "_"): value for key, value in pairs}


def test_the_flags_parse_and_point_at_the_mounted_secrets(built):
    pod = only(built, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    given = _settings(container["args"])
    settings = Settings(
        pool_size=1,
        policy="fair",
        **{k: v for k, v in given.items() if k.startswith(("airflow", "webhook"))},
    )
    assert settings.airflow_url and settings.webhook_port == 9443
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets[mounts[str(settings.airflow_token_file.parent)]] == "idlegate-airflow-auth"
    certificate = only(built, "Certificate")
    assert secrets[mounts[str(settings.webhook_certs)]] == certificate["spec"]["secretName"]
    # the timeout it gives Airflow leaves a wait longer than Airflow's default
    assert settings.airflow_queued_timeout - settings.airflow_release_margin > 600


def test_the_components_webhook_configuration_matches_the_handler(built):
    operator = Operator(
        Settings(pool_size=1, policy="fair", airflow_url="http://airflow:8080", webhook_port=9443)
    )
    registry = build_registry(operator)
    (handler,) = registry._webhooks.get_all_handlers()
    client = kopf.WebhookClientConfig(url="https://idlegate.example/")
    (expected,) = build_webhooks(
        [handler], resources=[kopf.Resource("", "v1", "pods")], name_suffix="idlegate.io",
        client_config=client,
    )  # fmt: skip
    (ours,) = only(built, "MutatingWebhookConfiguration")["webhooks"]
    assert ours["objectSelector"] == expected["objectSelector"]
    assert ours["rules"][0]["operations"] == expected["rules"][0]["operations"]
    assert ours["clientConfig"]["service"]["path"] == "/" + airflow.WEBHOOK_ID
    assert expected["clientConfig"]["url"].endswith("/" + airflow.WEBHOOK_ID)
    for key in ("sideEffects", "failurePolicy", "matchPolicy"):
        assert ours[key] == expected[key], key
    assert ours["namespaceSelector"] == {"matchLabels": {"idlegate.io/airflow": "enabled"}}
    service = only([d for d in built if d["metadata"]["name"] == "idlegate-webhook"], "Service")
    assert ours["clientConfig"]["service"]["name"] == service["metadata"]["name"]


@pytest.mark.parametrize("doc", ["airflow.md", "argo.md"])
def test_the_docs_overlay_for_any_other_cluster_builds_with_the_image_and_the_policy(tmp_path, doc):
    # the overlay the docs give for a cluster other than kind, beside a deploy/ of its own
    text = (DEPLOY.parent / "docs" / doc).read_text()
    (block,) = re.findall(r"```yaml\n(# my-overlay/kustomization\.yaml.*?)```", text, re.S)
    (tmp_path / "deploy").symlink_to(DEPLOY)
    (tmp_path / "my-overlay").mkdir()
    (tmp_path / "my-overlay" / "kustomization.yaml").write_text(block)
    built = kustomize(tmp_path / "my-overlay")
    (container,) = only(built, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "REGISTRY/idlegate-operator:TAG"
    assert only(built, "ValidatingAdmissionPolicy")  # overlays/registry's policy
    gate = "airflow" if doc == "airflow.md" else "argo"
    assert (
        only(built, "MutatingWebhookConfiguration")["metadata"]["name"] == f"idlegate-{gate}-gate"
    )


def test_the_docs_say_to_set_each_airflow_setting_that_holds_pods_at_the_gate():
    # issue 60, item 10: Airflow's [core] parallelism was missing, and its 32 slots were all
    # held by gated pods, so the ready tasks of other runs got no pod for the policy
    text = (DEPLOY.parent / "docs" / "airflow.md").read_text()
    table = text.split("**What to set.**", 1)[1].split("\n\n## ", 1)[0]
    rows = re.findall(r"^\| `(AIRFLOW__\w+)` \| (.+?) \| (.+?) \|$", table, re.M)
    named = {name for name, _, _ in rows}
    assert {
        "AIRFLOW__CORE__PARALLELISM",
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT",
        "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_PODS_CREATION_BATCH_SIZE",
    } <= named, named
