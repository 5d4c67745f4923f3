"""The shared sentence for unknown options, parameters and settings (`errors.reject_unknown`)."""

from __future__ import annotations

import pickle

import pytest

from idlegate.errors import IdlegateError, UnknownNameError, reject_unknown
from idlegate.policy.actions import ActionConfig


def test_known_names_pass() -> None:
    reject_unknown({"a": 1, "b": 2}, ["b", "a", "c"], "thing")
    reject_unknown([], [], "thing")


def test_the_first_unknown_name_and_every_accepted_one_in_order() -> None:
    with pytest.raises(IdlegateError) as err:
        reject_unknown(["zeta", "a", "beta"], ["c", "a"], "the widget", noun="option")
    assert str(err.value) == "the widget has no option 'beta'; it takes c, a"


def test_an_owner_that_takes_nothing_says_so() -> None:
    with pytest.raises(IdlegateError) as err:
        reject_unknown({"x": 1}, (), "scheduler 'fifo'")
    assert str(err.value) == "scheduler 'fifo' has no parameter 'x'; it takes no parameters"


def test_a_config_names_an_unknown_setting_and_those_it_takes() -> None:
    with pytest.raises(
        IdlegateError, match=r"^the action space: size: is not a known setting; it takes idle_head"
    ):
        ActionConfig.of({"size": 3})


def test_an_unknown_name_keeps_its_parts_and_crosses_processes() -> None:
    with pytest.raises(UnknownNameError) as err:
        reject_unknown(["x"], ["a", "b"], "the widget", noun="option")
    assert (err.value.unknown, err.value.accepted) == ("x", ["a", "b"])
    again = pickle.loads(pickle.dumps(err.value))
    assert type(again) is UnknownNameError and str(again) == str(err.value)
    assert again.owner == "the widget" and again.noun == "option"
