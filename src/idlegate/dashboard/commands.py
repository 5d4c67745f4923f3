"""The ``idlegate visibility`` and ``idlegate dashboard`` commands (registered on the CLI's
app by :func:`register`)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from idlegate.errors import IdlegateError

KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig", help="The user's kubeconfig (default: KUBECONFIG, ~/.kube/config)."
    ),
]
VisibilityOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The operator's metrics port, e.g. http://localhost:9090 after `kubectl -n "
        "idlegate-system port-forward svc/idlegate-operator-metrics 9090`; default: through "
        "the API server's proxy to that Service, with the kubeconfig's credentials.",
    ),
]


def read_visibility(url: str | None, kubeconfig: Path | None, **query: str) -> dict[str, Any]:
    """The operator's visibility document (`idlegate.api.visibility`), narrowed by `query`."""
    from idlegate.api.visibility import visibility_source

    source = visibility_source(url)
    pairs = {k: v for k, v in query.items() if v}
    if source.startswith(("http://", "https://")):  # (the standard library only: no extra)
        import urllib.parse

        from idlegate.api.operator_http import ask_operator

        return ask_operator(source + ("?" + urllib.parse.urlencode(pairs) if pairs else ""))
    from idlegate.dashboard.kube import Forbidden, Outage, Reader

    reader = Reader.from_kubeconfig(kubeconfig)
    try:
        import asyncio  # (here: every command's start imports this module)

        return dict(asyncio.run(reader.get(source, **pairs)))
    except Forbidden:
        raise IdlegateError(
            f"the API server refuses GET {source} (403/404): the operator's Service is not "
            "there, or your RBAC lacks get on services/proxy in idlegate-system; pass --url "
            "after a port-forward"
        ) from None
    except Outage as exc:
        raise IdlegateError(f"{exc}; check the kubeconfig's cluster, or pass --url") from None
    finally:
        reader.close()


def register(app: typer.Typer) -> None:
    """Add the two commands to `app`."""

    @app.command()
    def visibility(
        pool: Annotated[str | None, typer.Option("--pool", help="Only this pool.")] = None,
        queue: Annotated[str | None, typer.Option("--queue", help="Only this queue.")] = None,
        url: VisibilityOpt = None,
        kubeconfig: KubeconfigOpt = None,
        as_json: Annotated[bool, typer.Option("--json", help="The document as JSON.")] = False,
    ) -> None:
        """The waiting workflows per pool and queue, in order: position, priority, why each
        waits and its forecast (the operator's visibility API)."""
        from idlegate.api.visibility import table

        try:
            doc = read_visibility(url, kubeconfig, pool=pool or "", queue=queue or "")
        except IdlegateError as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None
        typer.echo(json.dumps(doc, indent=2) if as_json else table(doc, time.time()))

    @app.command()
    def dashboard(
        kubeconfig: KubeconfigOpt = None,
        host: Annotated[str, typer.Option("--host", help="Listen on this address.")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="Listen on this port.")] = 8090,
        namespace: Annotated[
            list[str] | None,
            typer.Option(
                "--namespace",
                "-n",
                help="Namespaces to read when your RBAC cannot list namespaces (repeatable; "
                "default: the kubeconfig context's).",
            ),
        ] = None,
        url: VisibilityOpt = None,
        interval: Annotated[
            float, typer.Option("--interval", min=0.1, help="Seconds between reads of the API.")
        ] = 5.0,
    ) -> None:
        """A read-only web page of the pools, queues, waiting workflows and workflows, read
        with your credentials (RBAC decides what you see)."""
        import aiohttp.web

        from idlegate.dashboard.kube import Reader
        from idlegate.dashboard.server import Dashboard

        sock = None
        try:  # (the port first: one out of range was said only once credentials were found)
            sock = listening(host, port)
            reader = Reader.from_kubeconfig(kubeconfig)
        except IdlegateError as exc:
            if sock is not None:
                sock.close()
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None
        from idlegate.cli_live import namespace as kubectl_namespace

        board = Dashboard(
            reader,
            # (read when RBAC refuses a listing of namespaces: kubectl's namespace at least)
            namespaces=list(namespace or [kubectl_namespace(kubeconfig)]),
            visibility=url,
            interval=interval,
            poll_ms=max(500, int(interval * 1000)),
        )
        typer.echo(f"The dashboard: http://{host}:{sock.getsockname()[1]}/ (Ctrl-C ends it)")
        aiohttp.web.run_app(board.app(), sock=sock, print=None)


def listening(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port` (0: any free port), or IdlegateError saying why
    it cannot be (a port out of range, in use, an address not this machine's): bound before
    the page's address is printed, so a printed address is one that answers."""
    if not 0 <= port <= 65535:
        raise IdlegateError(f"--port is a port number from 0 to 65535, not {port}")
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise IdlegateError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port, "
            "or a --host address of this machine"
        ) from None
