"""Kubernetes credentials for every idlegate process that reaches a cluster: the operator,
the live commands of the CLI (``idlegate status``, ...) and the benchmarks against a test API
server. The kubernetes client reads them; what it would answer with a TypeError (a file
of the wrong shape) or a silent default (no server URL) is said here in words.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from idlegate.errors import IdlegateError


def load_configuration(kubeconfig: Path | None = None) -> Any:
    """Credentials: the in-cluster service account, else a kubeconfig file.

    With `kubeconfig` None, ``$KUBECONFIG`` is read now (the kubernetes client reads it
    only once, at import).
    """
    import kubernetes.client
    import kubernetes.config

    configuration = kubernetes.client.Configuration()
    if kubeconfig is None:
        try:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
            return configuration
        except kubernetes.config.ConfigException:
            pass
    if kubeconfig is not None and not kubeconfig.is_file():
        raise IdlegateError(
            f"the kubeconfig {kubeconfig} is a directory; pass --kubeconfig with the path of "
            "a file in it (such as ~/.kube/config)"
            if kubeconfig.is_dir()
            else f"the kubeconfig file {kubeconfig} does not exist; pass --kubeconfig with the "
            "path of an existing file, or leave it out to use KUBECONFIG or ~/.kube/config"
        )
    path = str(kubeconfig) if kubeconfig is not None else os.environ.get("KUBECONFIG")
    where = path or "~/.kube/config"
    if path is None and not Path(where).expanduser().is_file():
        raise IdlegateError(
            "cannot find Kubernetes credentials: not in a cluster, no KUBECONFIG and no "
            "~/.kube/config; pass --kubeconfig FILE or set KUBECONFIG"
        )
    fix = "fix that file" if path else "pass --kubeconfig or set KUBECONFIG"
    try:
        for each in (path or where).split(os.pathsep):
            _check_kubeconfig_shape(Path(each).expanduser())
        kubernetes.config.load_kube_config(config_file=path, client_configuration=configuration)
    except (kubernetes.config.ConfigException, OSError, yaml.YAMLError) as exc:
        raise IdlegateError(
            f"cannot read Kubernetes credentials from {where} ({' '.join(str(exc).split())}); {fix}"
        ) from None
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        # the client indexes the file's fields without checking them: a field of the
        # wrong type (a number for a server, a text for a user) ends here
        raise IdlegateError(
            f"{where} is not a valid kubeconfig ({exc}); {fix}: {KUBECONFIG_SHAPE}"
        ) from None
    if not str(configuration.host).startswith(("https://", "http://")):
        raise IdlegateError(
            f"{where} names the API server {configuration.host!r}, which is no URL; "
            "give its cluster a server such as https://HOST:6443, or " + fix
        )
    return configuration


KUBECONFIG_SHAPE = (
    "a kubeconfig is a YAML mapping with lists of clusters, contexts and users, as "
    "`kubectl config view --raw` prints it"
)
"""What a kubeconfig file is, for the messages about one that is not."""


def _check_kubeconfig_shape(path: Path) -> None:
    """IdlegateError unless the file at `path` (if it exists) is text holding one mapping
    whose clusters, contexts and users are lists of mappings: the kubernetes client
    indexes them unchecked, and answers a file of anything else with a TypeError. An
    empty file is left to the client, whose message says so."""
    if not path.is_file():
        return  # a missing file of a KUBECONFIG list is skipped, as kubectl does
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise IdlegateError(
            f"{path} is not a kubeconfig: it is not text; {KUBECONFIG_SHAPE}"
        ) from None
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise IdlegateError(
            f"{path} is not a kubeconfig: it holds a {type(doc).__name__}, not a mapping; "
            f"{KUBECONFIG_SHAPE}"
        )
    for key, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
        items = doc.get(key)
        fits = items is None or (
            isinstance(items, list)
            and all(isinstance(i, dict) and isinstance(i.get(inner, {}), dict) for i in items)
        )
        if not fits:
            raise IdlegateError(
                f"{path} is not a valid kubeconfig: its {key} must be a list of mappings, "
                f"each with a name and a mapping '{inner}'; {KUBECONFIG_SHAPE}"
            )
