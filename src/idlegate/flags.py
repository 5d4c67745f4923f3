"""Command-line options generated from config models: a command declares its options once.

``@flags(config=CompareConfig)`` on a typer command replaces its parameter ``config``
with one option per field of `CompareConfig` (see `idlegate.config`): named
``--field-name`` or by the field's `Flag`, typed by its annotation, its default shown,
its help the field's docstring. The command receives ``config`` as a dict of the values
given on the command line (`Given`; what is not given is left out, so the config's own
default, or a preset's value, applies) and builds the config from it.

Each given value is checked against its field's type and constraints before the
command runs, so a bad one is a sentence that names the flag and the value given
(``--seeds: Input should be greater than or equal to 1 (given 0)``). Every command runs
inside `user_errors`: an IdlegateError becomes one line ``Error: <message>`` on stderr
and exit code 1.

Fields become options when their type reads from text: str, int, float, bool (as
``--x/--no-x``), Path, a Literal or an Enum (a choice), a class with ``parse`` (a
`SchedulerSpec`), a tuple or list of those (a repeatable option), a fixed tuple (one
option of several values), and a dict (``KEY=VALUE``, repeatable). Other fields (nested
configs, objects) are not options.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from idlegate.config import Flag, describe, flag_names, flag_text
from idlegate.errors import IdlegateError
from idlegate.textfiles import discard_empty_dirs

Given = dict[str, Any]
"""What a command receives for a config: the values given on the command line, by field."""

_SCALARS = (bool, int, float, str, Path)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn an IdlegateError, or a missing optional dependency (`missing_extra`), into one
    line on stderr and exit code 1, removing the empty ``--out`` folders the command made
    (`textfiles.discard_empty_dirs`)."""
    try:
        yield
    except IdlegateError as e:
        discard_empty_dirs()
        typer.echo(f"Error: {one_line(e)}", err=True)
        raise typer.Exit(1) from None
    except ModuleNotFoundError as e:
        error = missing_extra(e)
        if error is None:
            raise
        discard_empty_dirs()
        typer.echo(f"Error: {one_line(error)}", err=True)
        raise typer.Exit(1) from None


@contextmanager
def script_extras(name: str) -> Iterator[None]:
    """Around a script's imports that need an extra (the benchmarks'; `name` its
    ``__name__``): run as a script, a missing one is one line ``Error: ...`` naming the
    extra to install (`missing_extra`), even for ``--help``, not a traceback; imported, the
    error is left to its importer."""
    try:
        yield
    except ModuleNotFoundError as exc:
        error = missing_extra(exc)
        if name != "__main__" or error is None:
            raise
        sys.exit(f"Error: {one_line(error)}")


EXTRAS = {
    "kopf": "operator",
    "kubernetes": "operator",
    "prometheus_client": "operator",
    "torch": "train",
    "onnx": "train",
    "gymnasium": "train",
    "matplotlib": "plots",
    "ray": "ray",
    "ortools": "dev",
    "kmock": "dev",
    "playwright": "dev",  # (the dashboard's browser tests and screenshots)
    "aiohttp": "operator",  # (kopf's, which `idlegate dashboard` serves with)
}
"""Optional dependencies, by top-level module, and the extra of pyproject.toml that installs
each."""


def missing_extra(error: ModuleNotFoundError) -> IdlegateError | None:
    """The sentence for an optional dependency that is not installed (None: not one of
    ours, a real bug)."""
    module = (error.name or "").split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    return IdlegateError(
        f"this needs the '{extra}' extra, which is not installed (no module {module!r}): "
        f"pip install -c constraints.txt 'idlegate[{extra}]', or from a clone "
        f".venv/bin/pip install -c constraints.txt -e '.[{extra}]'"
    )


def description(doc: str | None) -> str:
    """A script's ``--help`` description: its docstring's first paragraph on one line (the
    first line alone stops mid-sentence where the docstring wraps; a word wrapped at its
    hyphen, ``CP-`` then ``SAT``, is joined again)."""
    first = (doc or "").split("\n\n")[0]
    return " ".join(re.sub(r"(?<=\w-)\s*\n\s*", "", first).split())


def one_line(error: IdlegateError) -> str:
    """The error's message on one line."""
    return " ".join(str(error).split()) or type(error).__name__


_T = TypeVar("_T")


def run_script(
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace], _T],
    argv: list[str] | None = None,
) -> _T:
    """A script's main (the benchmarks'): `run` on `argv` as `parser` reads it; a user's
    mistake (`IdlegateError`) is one line ``Error: ...`` and exit 1, not a traceback."""
    args = parser.parse_args(argv)
    try:
        return run(args)
    except IdlegateError as exc:
        parser.exit(1, f"Error: {one_line(exc)}\n")


def add_seeds(
    parser: argparse.ArgumentParser,
    seeds: int | None,
    first_seed: int | None = None,
    *,
    help: str | None = None,
) -> None:
    """A script's seed options (the benchmarks'): ``--seeds N`` (default `seeds`) and, given
    `first_seed`, ``--first-seed S`` (its default): the runs' seeds are then S to S + N - 1
    (`seed_range`), else 0 to N - 1. `help` replaces ``--seeds``'s (a default that depends
    on another option)."""
    if help is None:
        span = "" if first_seed is not None else ", 0 to N-1"
        help = f"seeds run{span} (default %(default)s)"
    parser.add_argument("--seeds", type=int, default=seeds, help=help)
    if first_seed is not None:
        parser.add_argument(
            "--first-seed",
            type=int,
            default=first_seed,
            help="the first seed (default %(default)s)",
        )


def seed_range(args: argparse.Namespace) -> range:
    """The seeds `add_seeds`'s options ask for: ``--seeds`` of them from ``--first-seed``;
    IdlegateError for no seed or a negative one (a script printed its header, then an
    IndexError)."""
    if args.seeds is None or args.seeds < 1:
        raise IdlegateError(f"--seeds must be at least 1, got {args.seeds}")
    first = getattr(args, "first_seed", 0)
    if first < 0:
        raise IdlegateError(f"--first-seed must be 0 or more, got {first}")
    return range(first, first + args.seeds)


def flags(
    *, defaults: bool = True, **models: type[BaseModel]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the options of `models`' fields (see the module docstring).

    Each keyword names a parameter of the command that receives a `Given`; `defaults`
    False hides the models' defaults in ``--help`` (when a preset decides them).
    """

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        options: dict[str, tuple[str, str, FieldInfo, str]] = {}
        params = [
            inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
        ]
        for param in signature.parameters.values():
            if param.name not in models:
                params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
                continue
            for field, info in models[param.name].model_fields.items():
                option = _option(field, info, defaults)
                if option is not None:
                    key = f"{param.name}__{field}"
                    params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, **option))
                    options[key] = (param.name, field, info, flag_text(field, info))
        taken = [n for _, field, info, _ in options.values() for n in flag_names(field, info)]
        if len(set(taken)) < len(taken):  # two configs of one command share a field name
            raise TypeError(f"{command.__name__}: two options named alike in {sorted(taken)}")

        @functools.wraps(command)
        def run(ctx: typer.Context, **values: Any) -> None:
            with user_errors():
                given: dict[str, Given] = {name: {} for name in models}
                for key, (name, field, info, flag) in options.items():
                    value = values.pop(key)
                    if ctx.get_parameter_source(key).name != "DEFAULT":
                        given[name][field] = _checked(flag, info, value)
                command(**values, **given)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


def _option(field: str, info: FieldInfo, defaults: bool) -> dict[str, Any] | None:
    """The annotation and default of `field`'s option (None: the field is no option)."""
    kind = _kind(info.annotation)
    if kind is None:
        return None
    names = flag_names(field, info)
    if kind is bool:
        names = [f"{names[0]}/--no-{names[0][2:]}", *names[1:]]
    help_text = " ".join((info.description or "").split())  # (plain help: no markup)
    required = info.is_required()
    default = ... if required else _shown(info.get_default(call_default_factory=True))
    choices = _choices(info.annotation)
    metavar = "|".join(choices) if choices else None
    if metavar is not None and len(metavar) > _METAVAR_WIDTH:  # (a --help line past 80)
        metavar = "<choice>"
        if not all(c in help_text for c in choices):
            help_text += f" One of {', '.join(choices[:-1])} or {choices[-1]}."
    option = typer.Option(
        *names,
        help=help_text,
        show_default=defaults and not required,
        metavar=metavar,
    )
    return {"annotation": Annotated[kind, option], "default": default}


_METAVAR_WIDTH = 40
"""The longest list of choices shown as an option's metavar (``a|b|c``): a longer one
would push its --help line past 80 columns, so it reads ``<choice>`` and the help names
them."""


def _kind(annotation: Any) -> Any:
    """The type typer reads the option as (None: not an option)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        return _kind(rest[0]) if len(rest) == 1 else None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return str  # the choices are checked as the field's, and shown as its metavar
    if origin in (dict, Mapping):
        return list[str]
    if origin in (tuple, list, Sequence) and (len(args) == 1 or args[1:] == (Ellipsis,)):
        item = _kind(args[0])
        return list[item] if item is not None and get_origin(item) is None else None
    if origin is tuple:
        items = [_kind(a) for a in args]
        return tuple[tuple(items)] if all(i in _SCALARS for i in items) else None
    if annotation in _SCALARS:
        return annotation
    return str if hasattr(annotation, "parse") or _enum(annotation) else None


def _enum(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Enum)


def _choices(annotation: Any) -> list[str]:
    """The values of a Literal or Enum field (also inside Optional or a tuple), else []."""
    if get_origin(annotation) is Literal:
        return [str(v) for v in get_args(annotation)]
    if _enum(annotation):
        return [str(m.value) for m in annotation]
    return next((c for a in get_args(annotation) if (c := _choices(a))), [])


def _shown(default: Any) -> Any:
    """A field's default as the option's (typer shows it in --help)."""
    if isinstance(default, tuple | list):
        return [str(v) for v in default] or None
    if isinstance(default, Mapping) or default is None:
        return None
    return default if isinstance(default, _SCALARS) else str(default)


def _checked(flag: str, info: FieldInfo, value: Any) -> Any:
    """`value` as the field will read it; IdlegateError naming `flag` if it cannot."""
    if isinstance(value, list) and get_origin(info.annotation) in (dict, Mapping):
        value = key_values(flag, value)
    meta = tuple(m for m in info.metadata if not isinstance(m, Flag))
    try:
        TypeAdapter(
            Annotated[(info.annotation, *meta)] if meta else info.annotation
        ).validate_python(value)
    except ValidationError as exc:
        raise IdlegateError(describe(exc, name=flag)) from None
    return value


def key_values(flag: str, pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` texts as a dict (the config validates the values)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise IdlegateError(f"{flag} {pair!r}: write KEY=VALUE, e.g. size_distribution=pareto")
        if key in out:
            raise IdlegateError(f"{flag} {key} is given twice; give each option once")
        out[key] = value.strip()
    return out
