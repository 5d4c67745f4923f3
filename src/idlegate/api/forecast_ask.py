"""What if, as its asker and the operator read it: the question (a DagWorkflow the one
parser takes), where it is asked, and how sure the answer is said to be.

Apart from `operator.forecasting.whatif`, which replays the pool to answer: ``idlegate forecast
FILE`` checks the question and prints the answer with this module alone, so that its own
start stays a small part of the 2 s an answer may take (docs/research/forecasts.md, "What if")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from idlegate.errors import SpecError

WHAT_IF_PATH = "/visibility/forecast"
"""Where the operator answers a what-if (POST a DagWorkflow, YAML or JSON)."""


def read_what_if(text: str) -> dict[str, Any]:
    """A what-if's body (YAML or JSON) as the operator takes it: a DagWorkflow whose spec
    the one parser takes (`parse_workflow`), its pod templates of the shape admission
    takes (`check_templates`, as lint). SpecError (a sentence) if it is not: the
    operator answers it with 400, and ``idlegate forecast FILE`` says it before asking."""
    import yaml

    from idlegate.api.kinds import KIND
    from idlegate.api.names import check_workflow_name
    from idlegate.api.status import check_object_size
    from idlegate.api.template import check_templates
    from idlegate.documents import YamlLoader, YamlRefusal
    from idlegate.sim.spec import parse_workflow

    try:  # (a key given twice refused, as by lint)
        docs = [d for d in yaml.load_all(text, Loader=YamlLoader) if d is not None]
    except YamlRefusal:
        raise  # (a SpecError: its place and sentence; `YamlRefusal.at` names a file)
    except yaml.YAMLError as exc:
        raise SpecError(f"it is not YAML or JSON ({' '.join(str(exc).split())})") from None
    if len(docs) > 1:  # (YAML with ---: not "not YAML", as it was said)
        raise SpecError(
            f"it holds {len(docs)} documents; a what-if asks about one DagWorkflow: give a "
            "file of one"
        )
    body = docs[0] if docs else None
    if not isinstance(body, dict) or body.get("kind", KIND) != KIND:
        kind = body.get("kind") if isinstance(body, dict) else None
        an = "an" if isinstance(kind, str) and kind[:1].lower() in "aeiou" else "a"
        was = f"it is {an} {kind}, not" if isinstance(kind, str) else "it is not"
        raise SpecError(f"{was} a {KIND} (kind: {KIND}, with a spec)")
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if isinstance(name, str):  # (the rule lint and admission hold it to)
        check_workflow_name(name)
    spec = parse_workflow(body.get("spec"), "spec")
    check_object_size(body, spec)  # (a workflow too big to store: 10,000 stages)
    check_templates(spec, "spec")  # (as admission would)
    return body


def sureness(replays: int, held: Mapping[str, Any] | None) -> str:
    """A what-if answer's second line: how many replays gave its 80 % intervals and how
    often the pool's resolved forecasts fell inside theirs (`held`: kind → (inside,
    resolved), `ForecastBook.coverage`; None or empty: not measured)."""
    said = f"80 % intervals from {replays} replay{'s' * (replays != 1)}"
    (s_in, s_of), (f_in, f_of) = ((held or {}).get(k) or (0, 0) for k in ("start", "finish"))
    if not s_of and not f_of:
        return (
            f"{said}; none of this pool's forecasts has resolved yet, so how often they "
            "hold here is not measured."
        )

    def share(inside: int, resolved: int, what: str) -> str:
        if not resolved:
            return f"no {what} yet"
        return f"{inside} of {resolved} {what} ({100 * inside / resolved:.0f} %)"

    return (
        f"{said}; this pool's last forecasts held {share(s_in, s_of, 'starts')} and "
        f"{share(f_in, f_of, 'finishes')} inside their intervals."
    )
