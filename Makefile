# The two front-door commands: `make demo` and `make test`. Each makes its own
# virtual environment in .venv and installs what it needs (torch only ever at the
# version pinned in constraints.txt).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install -q --disable-pip-version-check -c constraints.txt
OUT ?= out

.PHONY: demo test lint format bench clean

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

test: $(VENV)/.dev  ## lint, then the whole test suite
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -n 2 -q

lint: $(VENV)/.dev
	$(BIN)/ruff check .

format: $(VENV)/.dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(VENV)/.dev  ## simulator speed on the TPC-H traces (needs ../shared/data)
	$(BIN)/python benchmarks/sim_speed.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache .hypothesis
