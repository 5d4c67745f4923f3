"""The workload table and its look-ups: `WORKLOADS` (filled by
`idlegate.sim.workloads.registry`, the catalogue), `workload_config` (a CLI's options
validated into a workload's typed config, errors as `IdlegateError` sentences) and
`build_workload`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from idlegate.config import Config, describe
from idlegate.errors import IdlegateError, reject_unknown
from idlegate.sim.engine import Workload
from idlegate.sim.workloads.base import SeedLike, as_rng


@dataclass(frozen=True)
class WorkloadKind:
    """A named workload: its config model and its generator."""

    name: str
    config: type[Config]
    """Its options; input-only ones are the model's `EXTRA_OPTIONS` (the rigid workloads'
    models, below this package, have none)."""
    generate: Callable[[Any, SeedLike], Workload]
    summary: str

    def options(self) -> dict[str, str]:
        """Option name → description (what `build_workload` accepts for this workload)."""
        out = {k: f.description or "" for k, f in self.config.model_fields.items()}
        out.update(getattr(self.config, "EXTRA_OPTIONS", {}))
        return dict(sorted(out.items()))


WORKLOADS: dict[str, WorkloadKind] = {}
"""Every named workload, in the order `describe_workloads` lists them (the catalogue,
`idlegate.sim.workloads.registry`, enters them when the package is imported)."""


def workload_kind(name: str) -> WorkloadKind:
    """The registry entry `name`, or an IdlegateError listing the valid names."""
    kind = WORKLOADS.get(name)
    if kind is None:
        # a file named where the workload's name goes: the `file` workload reads it
        hint = ""
        if name.lower().endswith(".swf"):
            hint = f" (to run the jobs of an SWF trace: --workload swf --file {name})"
        elif name.lower().endswith(FILE_SUFFIXES):
            hint = f" (to run the workflows of a file: --workload file --file {name})"
        raise IdlegateError(
            f"unknown workload {name!r}; choose one of: {', '.join(WORKLOADS)}{hint}"
        )
    return kind


FILE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
"""Endings of a file name given as a workload's name."""


def workload_config(name: str, **options: Any) -> Config:
    """Validate `options` for workload `name` into its typed config.

    Option names may use '-' or '_' ('num-executors' = 'num_executors'); options whose
    value is None are dropped (so a CLI can forward every flag it has).
    """
    kind = workload_kind(name)
    opts = {k.replace("-", "_"): v for k, v in options.items() if v is not None}
    check_option_names(name, opts)
    try:
        return kind.config.model_validate(opts)
    except ValidationError as exc:
        raise IdlegateError(f"workload {name!r}: {describe(exc, kind.config)}") from None


def check_option_names(name: str, options: Iterable[str]) -> None:
    """`UnknownNameError` (an IdlegateError) if workload `name` takes no option of one of
    `options` (names with '_'), naming those it takes: `workload_config`'s first check."""
    reject_unknown(options, workload_kind(name).options(), f"workload {name!r}", noun="option")


def build_workload(name: str, seed: int = 0, **options: Any) -> Workload:
    """The workload `name` with `options` and `seed`: a pure function of the three."""
    config = workload_config(name, **options)
    rng = as_rng(seed)
    return workload_kind(name).generate(config, rng)


def describe_workloads() -> str:
    """One line per workload: name and summary (for CLI help)."""
    width = max(map(len, WORKLOADS))
    return "\n".join(f"{k.name:<{width}}  {k.summary}" for k in WORKLOADS.values())
