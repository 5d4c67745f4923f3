# The two front-door commands: `make demo` and `make test`. Each makes its own
# virtual environment in .venv and installs what it needs (torch only ever at the
# version pinned in constraints.txt). `make e2e` runs the tests against a real Airflow,
# installed into a virtualenv of its own (.venv-airflow) at the versions pinned in
# tests/data/airflow/requirements-e2e.txt, with the machine's PostgreSQL.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install -q --disable-pip-version-check -c constraints.txt
OUT ?= out

AIRFLOW_VENV ?= .venv-airflow
AIRFLOW_REQUIREMENTS := tests/data/airflow/requirements-e2e.txt

.PHONY: demo test e2e postgresql chromium lint format bench docs-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.base: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[plots]'
	touch $@

$(VENV)/.dev: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[dev,operator,train,plots]'
	touch $@ $(VENV)/.base

demo: $(VENV)/.base  ## compare the baseline schedulers on the built-in workload
	$(BIN)/idlegate demo --out $(OUT)/demo

test: $(VENV)/.dev chromium  ## lint, check types, then the whole test suite
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -n 2 -q

$(AIRFLOW_VENV)/.installed: $(AIRFLOW_REQUIREMENTS)
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install -q --disable-pip-version-check -r $(AIRFLOW_REQUIREMENTS)
	touch $@

postgresql:  # Debian's PostgreSQL server, unless initdb is found already
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || \
		(apt-get update -q && apt-get install -y -q postgresql)

chromium:  # Debian's chromium, for the dashboard's browser tests, unless found already
	@command -v chromium >/dev/null || test -x /usr/bin/chromium || \
		(apt-get update -q && apt-get install -y -q chromium)

e2e: $(VENV)/.dev $(AIRFLOW_VENV)/.installed postgresql  ## tests against a real Airflow 3
	IDLEGATE_AIRFLOW_PYTHON=$(abspath $(AIRFLOW_VENV))/bin/python $(BIN)/pytest -n 0 -q -m airflow_e2e

lint: $(VENV)/.dev
	$(BIN)/ruff check .

format: $(VENV)/.dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(VENV)/.dev  ## simulator speed on the TPC-H traces (needs ../shared/data)
	$(BIN)/python benchmarks/sim_speed.py

# reruns the command of every figure the docs mark and lists those that moved (minutes;
# not part of `make test`): run it before submitting a change to a policy.
# DOCS_CHECK="--slow" adds the runs marked slow, "--fix" writes the new figures in
docs-check: $(VENV)/.dev
	$(BIN)/python benchmarks/docs_figures.py $(DOCS_CHECK)

clean:
	rm -rf $(VENV) $(AIRFLOW_VENV) $(OUT) .pytest_cache .ruff_cache .mypy_cache .hypothesis
