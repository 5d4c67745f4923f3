"""How the operator's API client names its requests: the paths of objects, its User-Agent."""

from __future__ import annotations

from urllib.parse import quote

from idlegate import __version__


def api_path(api: str, plural: str, namespace: str | None, name: str = "") -> str:
    """The path of the `plural` objects of `api` in `namespace` (None: of every namespace or
    cluster-scoped), or of the one named `name`."""
    path = (
        f"{api}/namespaces/{quote(namespace, safe='')}/{plural}" if namespace else f"{api}/{plural}"
    )
    return f"{path}/{quote(name, safe='')}" if name else path


def user_agent(identity: str | None) -> str:
    """The User-Agent of the operator's requests: ``idlegate/VERSION (IDENTITY)``, or
    without the parentheses when there is no identity (a one-off command's client)."""
    return f"idlegate/{__version__} ({identity})" if identity else f"idlegate/{__version__}"
