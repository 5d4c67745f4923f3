"""The scheduler spec: known parses, the canonical text, round trips and error sentences."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idlegate.errors import IdlegateError
from idlegate.policy import SCHEDULERS, SchedulerSpec, make_scheduler
from idlegate.policy.spec import BASE_KINDS, PATH_KINDS

S = SchedulerSpec


@pytest.mark.parametrize(
    ("text", "spec", "canonical"),
    [
        ("fair", S("fair"), "fair"),
        (" SJF_CP ", S("sjf-cp"), "sjf-cp"),
        ("default", S("default"), "default"),
        ("analytic", S("analytic"), "analytic"),
        ("analytic:fair", S("analytic", base=S("fair")), "analytic:fair"),
        (
            "full=learned:default?window=32",
            S("learned", "default", params=(("window", "32"),), label="full"),
            "full=learned:default?window=32",
        ),
        ("out/p.onnx", S("learned", "out/p.onnx"), "learned:out/p.onnx"),
        (
            "a.onnx?window=8&window-head=2",
            S("learned", "a.onnx", params=(("window", "8"), ("window_head", "2"))),
            "learned:a.onnx?window=8&window_head=2",
        ),
        ("learned:out/x=1.onnx", S("learned", "out/x=1.onnx"), "learned:out/x=1.onnx"),
        (" a = learned:m.onnx ", S("learned", "m.onnx", label="a"), "a=learned:m.onnx"),
        (
            "lookahead:learned:x.onnx?window=32",
            S("lookahead", base=S("learned", "x.onnx", params=(("window", "32"),))),
            "lookahead:learned:x.onnx?window=32",
        ),
        (
            "lookahead?horizon=60:srpt",
            S("lookahead", base=S("srpt"), params=(("horizon", "60"),)),
            "lookahead?horizon=60:srpt",
        ),
        ("reject:sjf", S("reject", base=S("sjf")), "reject:sjf"),
        (
            "reject?max_rejections=10:easy:sjf?extra_nodes=false",
            S(
                "reject",
                base=S("easy", "sjf", params=(("extra_nodes", "false"),)),
                params=(("max_rejections", "10"),),
            ),
            "reject?max_rejections=10:easy:sjf?extra_nodes=false",
        ),
        (
            "inspect:out/insp.onnx:easy:sjf",
            S("inspect", "out/insp.onnx", base=S("easy", "sjf")),
            "inspect:out/insp.onnx:easy:sjf",
        ),
        ("window:w.onnx", S("window", "w.onnx"), "window:w.onnx"),
    ],
)
def test_known_parses_and_their_canonical_text(text: str, spec: SchedulerSpec, canonical: str):
    assert S.parse(text) == spec
    assert spec.format() == canonical
    assert S.parse(canonical) == spec


def test_title_is_the_label_else_the_text():
    assert S.parse("full=learned:default?window=32").title == "full"
    assert S.parse("learned:default?window=32").title == "learned:default?window=32"
    assert S.parse("full=fair").format(label=False) == "fair"


def test_parameter_values():
    spec = S.parse("lookahead?horizon=60.5&samples=3&wait=false&name=7&candidates=fair+srpt:srpt")
    assert spec.keywords() == {
        "horizon": 60.5,
        "samples": 3,
        "wait": False,
        "name": "7",
        "candidates": "fair+srpt",
    }
    assert S.parse("learned:default?starvation_factor=none&window=off").keywords() == {
        "starvation_factor": None,
        "window": None,
    }
    assert S.parse("fair").keywords({"keep_source": True}) == {"keep_source": True}
    with pytest.raises(IdlegateError, match="gives window in the spec and as a keyword"):
        S.parse("learned:default?window=8").keywords({"window": 16})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "typo:sjf",
            "unknown scheduler 'typo' in 'typo:sjf'; valid names are fifo, sjf, sjf-cp, srpt, "
            "lcfs, fair, weighted-fair, random, analytic, fcfs, saf, srf, f1, argo, airflow, portfolio, "
            "default, and the "
            "kinds learned:…, window:…, strict:…, easy:…, analytic:…, lookahead:…, reject:…, "
            "inspect:…, pods-gate:…, admission:… take an argument (a bare PATH.onnx is learned:PATH.onnx)",
        ),
        ("learned:", "'learned:': learned needs a path, e.g. learned:default"),
        ("lookahead", "'lookahead': lookahead needs a base scheduler, e.g. lookahead:sjf-cp"),
        ("analytic:", "'analytic:': analytic needs a base heuristic, e.g. analytic:fair"),
        ("easy:", "'easy:': easy needs a priority order, e.g. easy:sjf"),
        ("window:", "'window:': window needs a model path, e.g. window:out/window.onnx"),
        (
            "inspect:x.onnx",
            "'inspect:x.onnx' is not inspect:PATH.onnx:BASE; give the model file (ending in "
            ".onnx) and a base, e.g. inspect:out/insp.onnx:easy:sjf",
        ),
        (
            "reject:fair:sjf",
            "'reject:fair:sjf': fair takes no argument; the kinds with one are learned:…, "
            "window:…, strict:…, easy:…, analytic:…, lookahead:…, reject:…, inspect:…, pods-gate:…, admission:…",
        ),
        ("=fair", "'=fair': write LABEL=SPEC (e.g. full=learned:default) or the spec alone"),
        (
            "my label=fair",
            "'my label=fair': label 'my label': use letters, digits and . _ + - "
            "(e.g. full, learned-no-idle)",
        ),
        (
            "learned:default?window",
            "'learned:default?window': parameter window has no value: write window=VALUE, "
            "or leave it out for its default",
        ),
        (
            "portfolio?candidates=analytic:srpt",
            "'portfolio?candidates=analytic:srpt': parameter candidates='analytic:srpt': write "
            "?KEY=VALUE&KEY=VALUE with names and values without spaces, & ? or : (they "
            "separate a spec's parts), e.g. learned:default?window=64",
        ),
        ("fair?a=1&a=2", "'fair?a=1&a=2': a is given twice; give each parameter once"),
    ],
)
def test_errors_are_sentences(text: str, message: str):
    with pytest.raises(IdlegateError) as err:
        S.parse(text)
    assert str(err.value) == message


def test_a_spec_is_checked_when_made_in_code_too():
    with pytest.raises(IdlegateError, match="reject needs a base"):
        S("reject")
    with pytest.raises(IdlegateError, match="fair takes no argument"):
        S("fair", "x")
    with pytest.raises(IdlegateError, match="a label names a whole spec"):
        S("lookahead", base=S("srpt", label="x"))
    with pytest.raises(IdlegateError, match="without spaces, & \\? or :"):
        S("lookahead", base=S("srpt"), params=(("candidates", "a:b"),))


def test_default_is_the_portfolio_and_its_options_are_the_portfolios(tmp_path):
    from idlegate.policy import DEFAULT_POLICY_PATH, model_files
    from idlegate.policy.portfolio import PortfolioConfig, PortfolioScheduler

    built = make_scheduler("default")
    assert isinstance(built, PortfolioScheduler) and built.config == PortfolioConfig()
    assert make_scheduler("default?window=100&margin=0.05").config == PortfolioConfig(
        window=100, margin=0.05
    )
    assert make_scheduler("learned:default").name == "default"  # the ONNX policy, by name
    trained = tmp_path / "trained.onnx"
    assert model_files(f"default?policy={trained}") == (DEFAULT_POLICY_PATH, trained)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("portfolio?window=x", "window: Input should be a valid integer (given 'x')"),
        ("default?margin=-1", "margin: Input should be greater than or equal to 0 (given -1)"),
        ("lookahead?samples=x:srpt", "samples: Input should be a valid integer (given 'x')"),
        ("analytic?min_gain=x", "min_gain: Input should be a valid number (given 'x')"),
        ("learned:default?window=abc", "window='abc' (observation window) is invalid: Input"),
    ],
)
def test_a_bad_option_says_the_value_given_and_what_it_should_be(text, said):
    with pytest.raises(IdlegateError) as raised:
        make_scheduler(text)
    assert said in str(raised.value)


def test_default_inside_the_portfolio_cannot_recurse():
    from idlegate.policy.portfolio import candidate_specs, portfolio_config

    specs = candidate_specs(portfolio_config(S("portfolio"), {})[0])
    assert "learned:default" in specs  # its learned candidate is the ONNX policy by name
    assert not {S.parse(c).kind for c in specs} & {"default", "portfolio"}
    with pytest.raises(IdlegateError, match="unknown candidate 'default'"):
        make_scheduler("default?candidates=default+srpt")
    for start in ("default", "portfolio", "lookahead:default"):
        with pytest.raises(IdlegateError, match=f"cannot start by following '{start}'"):
            make_scheduler("default", start=start)


# ---------------------------------------------------------------------------------------
# round trips

_TEXT = st.text("abcXYZ019_./-+=:,", min_size=1, max_size=12)
_VALUE = st.text("abcXYZ019_./-+=,", min_size=1, max_size=8)
_KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
_PARAMS = st.dictionaries(_KEYS, _VALUE, max_size=3).map(lambda d: tuple(d.items()))


def _specs() -> st.SearchStrategy[SchedulerSpec]:
    names = st.builds(S, st.sampled_from([*SCHEDULERS, "default"]), params=_PARAMS)
    leaves = st.builds(S, st.sampled_from(PATH_KINDS), _TEXT, params=_PARAMS)
    inspect = _TEXT.filter(lambda t: ".onnx:" not in f"{t}.onnx")
    return st.recursive(
        names | leaves,
        lambda inner: st.one_of(
            st.builds(S, st.sampled_from(BASE_KINDS[:3]), base=inner, params=_PARAMS),
            st.builds(S, st.just("inspect"), inspect.map(lambda t: f"{t}.onnx"), inner, _PARAMS),
        ),
        max_leaves=4,
    )


@given(_specs(), st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,6}", fullmatch=True))
def test_parse_reads_back_what_format_writes(spec: SchedulerSpec, label: str | None):
    from dataclasses import replace

    spec = replace(spec, label=label)
    assert S.parse(spec.format()) == spec


@given(st.text(max_size=30))
def test_any_text_is_a_spec_or_an_idlegate_error(text: str):
    try:
        spec = S.parse(text)
    except IdlegateError:
        return
    assert S.parse(spec.format()) == spec


def test_a_candidate_with_a_colon_is_named_and_underscores_stay() -> None:
    spec = "lookahead?candidates=fair+analytic:sjf-cp&planning_delay=0.187:learned:default"
    with pytest.raises(IdlegateError) as caught:
        SchedulerSpec.parse(spec)
    message = str(caught.value)
    assert "the candidate 'analytic:sjf-cp' cannot be written in a spec" in message
    assert "(analytic is analytic:sjf-cp), from fifo, sjf, sjf-cp," in message
    assert "planning-delay" not in message
    with pytest.raises(IdlegateError, match="unknown scheduler 'sjf_cpx'"):
        SchedulerSpec.parse("sjf_cpx")
    # the form docs/research/lookahead.md gives: `analytic` is the analytic rule over sjf-cp
    planner = make_scheduler("lookahead?candidates=fair+srpt+sjf-cp+weighted-fair+analytic:sjf")
    assert planner.config.candidates[-1] == "analytic"
    assert make_scheduler("analytic").name == make_scheduler("analytic:sjf-cp").name
