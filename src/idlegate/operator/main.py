"""The operator process: its handlers registered with kopf, and :func:`run`.

``idlegate operator`` ends up in :func:`run`; tests build an
:class:`~idlegate.operator.runtime.Operator` and run ``build_registry(operator)`` with
``kopf.testing.KopfRunner``. Every handler is a module-level function of
:mod:`idlegate.operator.handlers`, one module per resource it watches; each is registered
here by name, given the object it serves (the operator, or Argo's or Airflow's side of it)
as its first argument.
"""

from __future__ import annotations

import logging
import os
from functools import partial

import kopf

from idlegate.api.argo_pods import WORKFLOW_LABEL
from idlegate.api.argo_pods import gates_with_ours as argo_gates
from idlegate.api.kinds import CRON_PLURAL, GROUP, PLURAL, POOL_PLURAL, VERSION
from idlegate.api.labels import LABEL_CRON
from idlegate.api.settings import Settings
from idlegate.errors import IdlegateError
from idlegate.integrations.airflow_pods import gates_with_ours as airflow_gates
from idlegate.operator.edge.endpoints import bind
from idlegate.operator.features import airflow, argo
from idlegate.operator.handlers import (
    argo_templates,
    argo_workflows,
    cronworkflows,
    namespaces,
    nodes,
    pods,
    pools,
    priorityclasses,
    process,
    workflows,
)
from idlegate.operator.kopf_settings import quiet_event_handlers
from idlegate.operator.runtime import POOL_STATUS_SECONDS, Operator

log = logging.getLogger(__name__)


def build_registry(operator: Operator) -> kopf.OperatorRegistry:
    """A fresh registry with the operator's handlers (one per operator instance), each
    given `operator` (or the side of it that Argo's or Airflow's take)."""
    registry = kopf.OperatorRegistry()
    on = partial  # (each handler given the object it serves; kopf unwraps it for its id)

    # the process
    kopf.on.startup(registry=registry)(on(process.startup, operator))
    kopf.on.cleanup(registry=registry)(on(process.cleanup, operator))
    kopf.on.login(registry=registry)(on(process.login, operator))
    kopf.on.probe(registry=registry, id="idlegate")(on(process.probe, operator))

    # the indexes kopf keeps (the pods': the operator's own, `Operator.pod_seen`)
    kopf.index("v1", "namespaces", registry=registry, id="namespaces")(namespaces.namespaces)
    kopf.index("v1", "nodes", registry=registry, id="cluster_nodes")(nodes.cluster_nodes)

    kopf.on.event("v1", "nodes", registry=registry, id="node-events")(
        on(nodes.node_event, operator)
    )
    kopf.on.event("v1", "pods", registry=registry, id="pod-events")(on(pods.pod_event, operator))

    # DagWorkflows (kopf blind to them while standing by or once finished: `Operator.ours`)
    ours = on(workflows.ours, operator)
    admit = on(workflows.admit, operator)
    kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="admit", when=ours)(admit)
    kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="admit", when=ours)(admit)
    kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="spec", field="spec", when=ours)(
        on(workflows.spec_changed, operator)
    )
    kopf.on.event(GROUP, VERSION, PLURAL, registry=registry, id="workflow-events")(
        on(workflows.workflow_event, operator)
    )
    runs = {LABEL_CRON: kopf.PRESENT}
    kopf.on.event(GROUP, VERSION, PLURAL, registry=registry, id="cron-runs", labels=runs)(
        on(workflows.cron_run_event, operator)
    )

    # DagCronWorkflows
    sync = on(cronworkflows.cron_sync, operator)
    kopf.on.resume(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron")(sync)
    kopf.on.create(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron")(sync)
    kopf.on.update(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron", field="spec")(sync)
    kopf.on.event(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron-events")(
        on(cronworkflows.cron_event, operator)
    )

    # ExecutorPools (kopf's timer runs on the loop: the clock says how long its interval is)
    sync = on(pools.pool_sync, operator)
    kopf.on.resume(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool")(sync)
    kopf.on.create(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool")(sync)
    kopf.on.update(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool", field="spec")(sync)
    every = operator.settings.clock.wall_delay(POOL_STATUS_SECONDS)
    kopf.timer(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool-status", interval=every)(
        on(pools.pool_counts, operator)
    )
    kopf.on.event(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool-events")(
        on(pools.pool_event, operator)
    )

    kopf.on.event("scheduling.k8s.io", "v1", "priorityclasses", registry=registry, id="pc")(
        on(priorityclasses.priority_class, operator)
    )
    register_argo(registry, operator)
    register_airflow(registry, operator)
    if serves_webhooks(operator.settings):
        kopf.on.startup(registry=registry)(on(process.serve_webhooks, operator))
    return registry


def register_argo(registry: kopf.OperatorRegistry, operator: Operator) -> None:
    """Argo's handlers, given the operator's Argo side (nothing without ``--argo``)."""
    side = operator.argo
    if side is None:
        return
    labels = {WORKFLOW_LABEL: kopf.PRESENT}
    if operator.settings.webhook_port is not None:
        kopf.on.mutate(
            "v1",
            "pods",
            registry=registry,
            id=argo.WEBHOOK_ID,
            operations=["CREATE"],
            labels=labels,
            side_effects=False,
        )(partial(pods.gate, argo_gates))
    kopf.on.event(argo.GROUP, argo.VERSION, "workflows", registry=registry, id="argo-workflows")(
        partial(argo_workflows.workflow_event, side)
    )
    kopf.on.event("v1", "pods", registry=registry, id="argo-pods", labels=labels)(
        partial(pods.argo_pod_event, side)
    )
    for plural in argo.TEMPLATE_PLURALS:
        kopf.on.event(argo.GROUP, argo.VERSION, plural, registry=registry, id=f"argo-{plural}")(
            partial(argo_templates.template_event, side)
        )


def register_airflow(registry: kopf.OperatorRegistry, operator: Operator) -> None:
    """Airflow's handlers, given the operator's Airflow side (nothing without
    ``--airflow-url``)."""
    side = operator.airflow
    if side is None:
        return
    labels = airflow.POD_LABELS
    if operator.settings.webhook_port is not None:
        kopf.on.mutate(
            "v1",
            "pods",
            registry=registry,
            id=airflow.WEBHOOK_ID,
            operations=["CREATE"],
            labels=labels,
            side_effects=False,
        )(partial(pods.gate, airflow_gates))
    kopf.on.event("v1", "pods", registry=registry, id="airflow-pods", labels=labels)(
        partial(pods.airflow_pod_event, side)
    )


def serves_webhooks(settings: Settings) -> bool:
    """kopf's admission server runs on ``--webhook-port``, where the gates of Argo's and
    Airflow's pods are served."""
    return settings.webhook_port is not None and bool(settings.argo or settings.airflow_url)


def run(settings: Settings, *, verbose: bool = False) -> None:
    """Run the operator in this process until it is stopped (SIGINT/SIGTERM)."""
    kopf.configure(verbose=verbose)
    if not verbose:  # (kopf's INFO: each handler's success, ~3 % of a flood's loop, unread)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").addFilter(quiet_event_handlers)
    operator = Operator(settings)
    # the credentials first: without them the process has nothing to do, and a wrong path
    # is one line of the CLI rather than a startup kopf retries every minute
    _ = operator.configuration
    if problem := settings.webhook_certs_problem():
        raise IdlegateError(problem)
    # the ports too: one in use (a second operator on the host) is one line naming it
    if settings.metrics_port is not None:
        operator.endpoints.reserve(settings.metrics_port, settings.listen_host)
    liveness = None  # kopf's /healthz
    if settings.health_port is not None:
        bind(settings.listen_host, settings.health_port, "--health-port").close()  # (kopf binds it)
        liveness = f"http://{settings.listen_host}:{settings.health_port}/healthz"
    kopf.run(
        registry=build_registry(operator),
        standalone=settings.standalone,
        clusterwide=not settings.namespaces,
        namespaces=list(settings.namespaces),
        liveness_endpoint=liveness,
        stop_flag=operator.stopped,
    )
    if operator.lost:
        raise IdlegateError(
            "this replica lost the leader's Lease and stopped (see the log for why); it is "
            "restarted as a standby by its Deployment, or run it again"
        )
    # stopped, its writes made and its files closed (Operator.stop): the interpreter's
    # teardown of the state would only delay the exit (2 s with 200 workflows, loaded)
    logging.shutdown()
    os._exit(0)
