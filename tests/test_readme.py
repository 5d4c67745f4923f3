"""What the README and the docs tell a user to run or open exists: the two front-door
commands are Makefile targets, every ``idlegate COMMAND --flag`` written in a code block or
span is a command taking that flag, and every local link and image resolves, and a Deployment written in a YAML block patches the
operator's container with flags it has and volumes it declares."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.core
import typer.main
import yaml

from idlegate import cli, cli_run
from idlegate.cli_whatif import FileOrCommand
from tests.helpers import benchmark_help

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    "README.md",
    "deploy/README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")),
]


def _code(text: str) -> str:
    """The fenced code blocks and inline code spans (where commands are written), with
    backslash continuations joined; a block fenced as ``text`` is a program's output quoted,
    not commands."""
    blocks = [b for b in re.findall(r"```.*?```", text, re.DOTALL) if not b.startswith("```text")]
    rest = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return "\n".join(blocks + re.findall(r"`[^`\n]+`", rest)).replace("\\\n", " ")


def _invocations(text: str) -> Iterator[tuple[str, str, list[str]]]:
    """(command, the word after it, its --flags) of every ``idlegate COMMAND ...`` up to the
    line's end or a pipe (the word names the command of a group, e.g. ``history export``)."""
    for match in re.finditer(r"\bidlegate ([a-z][a-z-]*)([^\n`|;&]*)", _code(text)):
        word = match[2].split()[0] if match[2].split() else ""
        yield match[1], word, re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", match[2])


def test_the_two_commands_are_makefile_targets() -> None:
    first_block = re.search(r"```\w*\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert first_block is not None
    commands = {line.split("#")[0].strip() for line in first_block[1].splitlines()}
    assert {"make demo", "make test"} <= commands
    targets = re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert {"demo", "test"} <= set(targets)


def test_the_readme_is_short_with_one_table_the_demos() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 220, "the README is a user's document: keep it short"
    tables = re.findall(r"<!-- BEGIN make demo table -->\n(.*?)<!-- END", text, re.DOTALL)
    assert len(tables) == 1 and len(re.findall(r"^\|:?-", text, re.MULTILINE)) == 1
    rows = [line.split("|")[1].strip().strip("*") for line in tables[0].splitlines()[2:]]
    assert rows == list(cli_run.DEMO_SCHEDULERS), "paste the table make demo prints now"


FORECAST_PAGE_LINES = 300
"""Lines docs/forecast.md may hold (issue 81): a user's page (how a forecast is made, how to
read it, accuracy at a glance, limits, settings); the research record of how each figure
moved is docs/research/forecasts.md."""


def test_the_forecast_page_is_a_users_page_and_its_record_is_apart() -> None:
    page = (ROOT / "docs" / "forecast.md").read_text()
    assert len(page.splitlines()) <= FORECAST_PAGE_LINES, (
        "docs/forecast.md is a user's page: move measurements and their history to "
        "docs/research/forecasts.md"
    )
    # the record is linked from the page and from the research record's index
    assert "](research/forecasts.md)" in page
    assert "](forecasts.md)" in (ROOT / "docs" / "research" / "README.md").read_text()
    assert "](../forecast.md)" in (ROOT / "docs" / "research" / "forecasts.md").read_text()


GUIDE_LINES = 400
"""Lines each user's and maintainer's guide may hold (issue 94, item 5): how to use a part,
what to set and how to read it, one summary table; what was measured and how each figure
moved is its record, apart."""
GUIDES = {
    "docs/queues.md": ("research/queues.md",),
    "docs/brain.md": ("research/brain-rules.md", "research/brain-cost.md"),
    "docs/operations.md": ("research/live-operator.md",),
    "benchmarks/README.md": (
        "../docs/research/live-operator.md",
        "../docs/research/queues.md",
        "../docs/research/brain-cost.md",
    ),
}
"""Each guide, and the records (relative to it) its measurements moved to."""


@pytest.mark.parametrize("name", sorted(GUIDES))
def test_a_guide_is_short_and_its_record_is_apart(name: str) -> None:
    page = ROOT / name
    text = page.read_text()
    records = GUIDES[name]
    assert len(text.splitlines()) <= GUIDE_LINES, (
        f"{name} is a users' and maintainers' guide of at most {GUIDE_LINES} lines: move "
        f"measurements and their history to its record, {records[0]}"
    )
    # the guide links each record, the research index lists it, and it links the guide back
    assert [r for r in records if f"]({r})" not in text] == []
    index = (ROOT / "docs" / "research" / "README.md").read_text()
    for record in records:
        path = (page.parent / record).resolve()
        assert f"]({path.name})" in index, f"docs/research/README.md does not list {path.name}"
        back = Path(os.path.relpath(page, path.parent)).as_posix()
        assert f"]({back})" in path.read_text(), f"{path.name} does not link {name} back"


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_idlegate_command_and_flag_written_exists(name: str) -> None:
    commands = cli.commands()
    wrong = []
    for command, word, flags in _invocations((ROOT / name).read_text()):
        if command not in commands:
            wrong.append(f"idlegate {command}")
            continue
        found = commands[command]
        if isinstance(found, typer.core.TyperGroup):  # a sub-app: the next word is its command
            if word not in found.commands and isinstance(found, FileOrCommand):
                word = "what-if"  # (`idlegate forecast FILE`)
            if word not in found.commands:
                wrong.append(f"idlegate {command} {word}")
                continue
            found = found.commands[word]
        params = found.params
        known = {"--help", *(o for p in params for o in (*p.opts, *p.secondary_opts))}
        wrong += [f"idlegate {command} {flag}" for flag in flags if flag not in known]
    assert not wrong, f"{name} tells the user to run what does not exist: {sorted(set(wrong))}"


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_file_a_command_reads_is_there_or_made_by_a_command_before_it(name: str) -> None:
    # a newcomer runs the commands in order from a fresh clone: a file read (--file,
    # --history, advise's history) is the repository's, ../shared/data's, or one that an
    # earlier command of the document writes (--out, -o); HISTORY and the like are blanks
    made: set[str] = set()
    missing = []
    for match in re.finditer(
        r"\bidlegate ([a-z][a-z-]*)([^\n`|;&>]*)", _code((ROOT / name).read_text())
    ):
        words = match[2].split()
        read = re.findall(r"--(?:file|history)[ =](\S+)", match[2])
        if match[1] == "advise" and words and not words[0].startswith("-"):
            read.append(words[0])
        placeholder = re.compile(r"[A-Z_]+(\.[a-z]+)?")
        shared = "../shared/data/"  # the data beside the clone (its tests skip without it)
        missing += [
            f
            for f in read
            if not (placeholder.fullmatch(f) or f in made or f.startswith(shared))
            and not (ROOT / f).exists()
        ]
        made.update(re.findall(r"(?:--out|-o)[ =](\S+)", match[2]))
    assert not missing, f"{name} reads files no command before makes: {missing}"


def _takes_first_seed(command: str) -> bool:
    """Whether `command` (``idlegate compare``, ``benchmarks/brain.py``) has --first-seed."""
    if command.startswith("idlegate "):
        found = cli.commands().get(command.split()[1])
        return found is not None and any("--first-seed" in p.opts for p in found.params)
    script = ROOT / command
    return script.is_file() and "--first-seed" in benchmark_help(script.stem)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_command_with_seeds_says_which_seeds(name: str) -> None:
    # a figure's seeds are its command's: compare starts at seed 0 and the benchmarks at
    # the held-out 1000, so a command that counts its seeds names the first one too
    vague = []
    for match in re.finditer(
        r"(idlegate [a-z]+|benchmarks/\w+\.py)([^\n`|;&>]*)", _code((ROOT / name).read_text())
    ):
        given = match[2]
        counted = re.search(r"--seeds\b", given) and not re.search(r"--first-seed\b", given)
        if counted and _takes_first_seed(match[1]):
            vague.append(f"{match[1]}{given[:40]}")
    assert not vague, f"{name}: commands that count seeds without the first: {vague}"


@pytest.mark.parametrize("name", DOCUMENTS)
def test_local_links_and_images_exist(name: str) -> None:
    path = ROOT / name
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    missing = [t for t in local if not (path.parent / t).exists()]
    assert not missing, f"{name} links to missing files: {missing}"


def _deployments(text: str) -> Iterator[dict]:
    """The Deployments (whole, or patches) written in a document's YAML code blocks."""
    for block in re.findall(r"```ya?ml\n(.*?)```", text, re.DOTALL):
        try:
            docs = list(yaml.safe_load_all(block))
        except yaml.YAMLError:
            continue  # (a fragment, e.g. a few lines of a manifest)
        yield from (d for d in docs if isinstance(d, dict) and d.get("kind") == "Deployment")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_a_deployment_written_runs_operator_flags_and_mounts_its_volumes(name: str) -> None:
    base = yaml.safe_load((ROOT / "deploy/base/deployment.yaml").read_text())
    base_spec = base["spec"]["template"]["spec"]
    operator = cli.commands()["operator"]
    known = {o for p in operator.params for o in (*p.opts, *p.secondary_opts)}
    wrong = []
    for deployment in _deployments((ROOT / name).read_text()):
        assert deployment["metadata"]["name"] == base["metadata"]["name"], name
        spec = deployment["spec"]["template"]["spec"]
        volumes = {v["name"] for v in (*base_spec["volumes"], *spec.get("volumes", []))}
        for container in spec["containers"]:
            assert container["name"] in {c["name"] for c in base_spec["containers"]}, name
            flags = [a.split("=")[0] for a in container.get("args", []) if a.startswith("--")]
            wrong += [f"idlegate operator {f}" for f in flags if f not in known]
            wrong += [
                f"volumeMount {m['name']}"
                for m in container.get("volumeMounts", [])
                if m["name"] not in volumes
            ]
    assert not wrong, f"{name} writes a Deployment the operator would not run: {wrong}"


_KUSTOMIZATIONS = re.compile(
    r"\bkubectl (?:apply|create|delete|diff)\b[^\n`|;&#]*?-k ([^\s`]+)|\bkubectl kustomize ([^\s`|]+)"
)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_kustomization_written_is_a_directory_kubectl_builds(name: str) -> None:
    # `kubectl kustomize` takes one directory and has no subcommands (`kustomize edit` is
    # the standalone kustomize's); a path under deploy/ must be one of the repository's
    wrong = []
    text = (ROOT / name).read_text()
    for match in _KUSTOMIZATIONS.finditer(_code(text)):
        path = match[1] or match[2]
        if path.startswith("deploy/"):
            if not (ROOT / path / "kustomization.yaml").is_file():
                wrong.append(path)
        elif "/" not in path and path != ".":  # a user's own overlay is a path, not a word
            wrong.append(path)
    # the docs ask for kubectl only: the standalone kustomize's commands are not there
    wrong += re.findall(r"(?<!kubectl )\bkustomize (?:edit|build|create)\b", _code(text))
    assert not wrong, f"{name} names kustomizations kubectl cannot build: {wrong}"


OUTPUTS = ("out", "out_dir", "output")
"""Parameter names of the options through which a command writes files."""
KEPT = ("out/", "/", "-", "$", "src/idlegate/policy/", "deploy/base/")
"""Where a command in the docs may write: the ignored out/ folder, an absolute path,
standard output, a variable, or on purpose the package's shipped models and the
generated CRDs."""


def _written(text: str) -> Iterator[str]:
    """The paths each ``idlegate COMMAND`` writes through an output option, and each shell
    redirection's target, in the code of `text`."""
    commands = cli.commands()
    for match in re.finditer(r"\bidlegate ([a-z][a-z-]*)([^\n`|;&]*)", _code(text)):
        found = commands.get(match[1])
        words = match[2].split()
        if isinstance(found, typer.core.TyperGroup) and words:
            found = found.commands.get(words[0])
        if found is None:
            continue
        outputs = {o for p in found.params if p.name in OUTPUTS for o in p.opts}
        for i, word in enumerate(words):
            flag, _, value = word.partition("=")
            if flag in outputs and (value or i + 1 < len(words)):
                yield value or words[i + 1]
        yield from _positional_outputs(found, words)
    # the scripts' (benchmarks/gantt.py --out)
    for match in re.finditer(r"\bpython3?\b([^\n`|;&]*)", _code(text)):
        yield from re.findall(r"--out[ =]([^\s-][^\s]*)", match[1])
    for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", text, re.DOTALL):
        yield from re.findall(r"(?<=\s)>\s*([^\s&|;`>]+)", block)


def _positional_outputs(command: Any, words: list[str]) -> Iterator[str]:
    """The words of `words` given to an output argument of `command` (export-onnx's
    OUTPUT), counting positions past the options and their values."""
    valued = {
        o
        for p in command.params
        if p.param_type_name == "option" and not getattr(p, "is_flag", False)
        for o in p.opts
    }
    positional, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in valued
        else:
            positional.append(word)
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    for argument, word in zip(arguments, positional, strict=False):
        if argument.name in OUTPUTS:
            yield word


@pytest.mark.parametrize("name", DOCUMENTS)
def test_no_command_in_the_docs_writes_into_the_checkout(name: str) -> None:
    # a file written beside the sources shows in `git status` (out/ is ignored)
    inside = [p for p in _written((ROOT / name).read_text()) if not p.startswith(KEPT)]
    assert inside == [], f"{name}: write these under out/ (git ignores it): {inside}"


def test_the_check_of_written_paths_finds_them() -> None:
    text = (
        "```sh\nidlegate history simulate -w k8s-batch --out h.jsonl\n"
        "idlegate history export -A -o=x.yaml\nidlegate simulate -o repeat=2\n"
        "idlegate advise out/h.jsonl --out out/advice\nkubectl get x > y.json 2>&1\n```\n"
        "```\na -> b > c\n```\n"
    )
    assert list(_written(text)) == ["h.jsonl", "x.yaml", "out/advice", "y.json"]
    # the README's picture once went over its tracked copy; an ONNX policy is OUTPUT
    text = (
        "by `.venv/bin/python benchmarks/gantt.py --out docs/img/idle-slot.png`\n"
        "```sh\nidlegate export-onnx out/t/best.pt my.onnx\n"
        "```\n"
    )
    assert sorted(_written(text)) == ["docs/img/idle-slot.png", "my.onnx"]


def test_the_command_line_section_names_the_extra_training_needs() -> None:
    """`make demo`'s environment has no torch (issue 93, item 15): the section that runs
    train and export-onnx says which extra to install first."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The command line", 1)[1].split("\n## ", 1)[0]
    head = section.split("```", 1)[0]
    assert ".[train]" in head and "export-onnx" in head and "no torch" in head
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(PIP) -e '.[plots]'" in makefile  # (what demo installs: no train extra)
