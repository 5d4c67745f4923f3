"""The base of every configuration: a frozen pydantic model with one docstring per field.

Every config of idlegate derives from `Config` (the featurizer's, the action space's,
the model's, the planner's, a comparison's, a training run's, the operator's settings):

* frozen and closed: an unknown key is an error, and a value cannot change once checked;
* the docstring under each field is its description (pydantic's
  ``use_attribute_docstrings``): the reference for a reader of the code and, through
  `idlegate.flags`, the ``--help`` of the field's command-line option. The option is
  ``--field-name`` unless the field carries a `Flag` with other names;
* checks are field constraints and validators, and a bad value is an IdlegateError
  whose sentence (`describe`) names each field, what is wrong with it and the value
  given, whether the values came as keywords, from a YAML file, a spec string or the
  command line.

A config that names itself in sentences sets ``model_config = ConfigDict(title=...)``,
e.g. "the featurizer": ``FeatureConfig(time_unit=0)`` raises "the featurizer: time_unit:
Input should be greater than 0 (given 0)".
"""

from __future__ import annotations

from typing import Annotated, Any, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, ValidationError
from pydantic.fields import FieldInfo

from idlegate.errors import IdlegateError

Positive = Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)]
"""A finite number > 0 (a whole number is fine, true/false is not a number)."""
NonNegative = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]
"""A finite number >= 0."""


class Flag:
    """Command-line names of a field instead of ``--field-name``, as field metadata:
    ``num_executors: Annotated[int | None, Flag("--executors", "-k")]``. Names without a
    long one (``Flag("-w")``) only add a short name to ``--field-name``."""

    def __init__(self, *names: str) -> None:
        self.names = names


def flag_names(field: str, info: FieldInfo) -> list[str]:
    """A field's command-line names: its `Flag`'s, with ``--field-name`` first unless the
    `Flag` has a long name of its own."""
    given = [n for m in info.metadata if isinstance(m, Flag) for n in m.names]
    own = [] if any(n.startswith("--") for n in given) else [f"--{field.replace('_', '-')}"]
    return [*own, *given]


def flag_text(field: str, info: FieldInfo) -> str:
    """How a message names a field given on the command line: its names, the short one
    first (``-k/--executors``, ``--jobs-count``)."""
    return "/".join(sorted(flag_names(field, info), key=lambda n: n.startswith("--")))


class Config(BaseModel):
    """A configuration (see the module docstring); IdlegateError for a bad value."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    def __init__(self, /, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise IdlegateError(f"{self.title()}: {describe(exc, type(self))}") from None

    # pydantic would call a custom __init__ for every nested config too, and the first
    # error would lose its place in the outer one; this mark says it needs not
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def of(cls, data: Any, source: str | None = None) -> Self:
        """Validate plain data (a mapping, e.g. parsed YAML or JSON) into the config.

        The IdlegateError says ``SOURCE is invalid: ...`` when `source` names the data.
        """
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            where = f"{source} is invalid" if source else cls.title()
            raise IdlegateError(f"{where}: {describe(exc, cls)}") from None

    @classmethod
    def title(cls) -> str:
        """How sentences name this config (its ``title``, else the class name)."""
        return cls.model_config.get("title") or cls.__name__


def describe(
    exc: ValidationError, model: type[BaseModel] | None = None, *, name: str | None = None
) -> str:
    """The first few problems of a pydantic error as one sentence that names each field,
    says what it should be and the value given: ``window: Input should be a valid integer
    (given 'x')``.

    An unknown key is named with the settings its config takes (when `model`, the
    validated class, lets them be found). `name` names a value validated alone (a flag).
    """
    errors = exc.errors()
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in ([name] if name else []) + list(err["loc"]))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            owner = _nested(model, err["loc"][:-1])
            takes = f"; it takes {', '.join(owner.model_fields)}" if owner else ""
            msg = f"is not a known setting{takes}"
        elif loc and isinstance(err.get("input"), _SCALARS):  # (not a mapping: a section)
            msg = f"{msg} (given {_given(err['input'])})"
            if err["type"] in ("bool_parsing", "bool_type"):  # (which words pass varies)
                msg += ": give true or false"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(errors) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


_SCALARS = (str, int, float, bool, type(None))


def _given(value: Any, limit: int = 60) -> str:
    """A value as a message shows it (``'x'``, ``0``), cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _nested(model: type[BaseModel] | None, path: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class at `path` inside `model` (None when the path leaves the models)."""
    for key in path:
        field = model.model_fields.get(str(key)) if model is not None else None
        if field is None:
            return None
        kinds = [field.annotation, *get_args(field.annotation)]
        model = next((k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)), None)
    return model
