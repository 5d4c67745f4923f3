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
DATA_TESTS := $(OUT)/data-tests.txt

AIRFLOW_VENV ?= .venv-airflow
AIRFLOW_REQUIREMENTS := tests/data/airflow/requirements-e2e.txt

# `make cluster` builds a real control plane from the Go modules pinned in deploy/local/go.mod
# (docs/local-cluster.md): etcd, kube-apiserver, kube-controller-manager and kube-scheduler
# of k8s.io/kubernetes at one release, its staging modules at their published versions, and
# KWOK; and vap-check, kube-apiserver's own validation of a ValidatingAdmissionPolicy (its CEL
# compiled and type-checked) without a cluster. Nothing but the Go module proxy is reached.
# `make cluster-up` / `cluster-down` start and stop it on loopback with three KWOK nodes.
CLUSTER_DIR ?= $(OUT)/cluster
CLUSTER_BIN := $(CLUSTER_DIR)/bin
K8S_VERSION := v1.36.3
GO_VERSION_PKG := k8s.io/component-base/version
GO_LDFLAGS := -s -w -X $(GO_VERSION_PKG).gitVersion=$(K8S_VERSION) \
	-X $(GO_VERSION_PKG).gitMajor=1 -X $(GO_VERSION_PKG).gitMinor=36 \
	-X $(GO_VERSION_PKG).gitTreeState=clean
CLUSTER_PACKAGES := ./cmd/etcd ./cmd/vap-check k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
	sigs.k8s.io/kwok/cmd/kwok

.PHONY: demo test test-without-data cluster cluster-up cluster-down argo-controller e2e-argo kueue e2e-kueue e2e postgresql chromium lint format bench docs-check docs-images clean

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

cluster:  ## build the local control plane's binaries into out/cluster/bin
	@command -v go >/dev/null || { echo "make cluster builds from Go modules: install Go 1.26 or newer (Debian: golang-go; or go.dev/dl) and run it again"; exit 1; }
	cd deploy/local && go build -trimpath -buildvcs=false -ldflags '$(GO_LDFLAGS)' \
		-o $(abspath $(CLUSTER_BIN))/ $(CLUSTER_PACKAGES)

# Argo's workflow controller from its Go module (github.com/argoproj/argo-workflows/v4, pinned in
# deploy/local/argo/go.mod: a module of its own, its Kubernetes libraries older than the plane's),
# and Argo's CRDs from the same module, for `make e2e-argo`
argo-controller:
	cd deploy/local/argo && go build -trimpath -buildvcs=false -ldflags '-s -w' \
		-o $(abspath $(CLUSTER_BIN))/ github.com/argoproj/argo-workflows/v4/cmd/workflow-controller
	mkdir -p $(CLUSTER_DIR)/argo-crds
	cd deploy/local/argo && cp "$$(go list -m -f '{{.Dir}}' github.com/argoproj/argo-workflows/v4)"/manifests/base/crds/minimal/argoproj.io_*.yaml $(abspath $(CLUSTER_DIR))/argo-crds/
	chmod u+w $(CLUSTER_DIR)/argo-crds/*.yaml

e2e-argo: $(VENV)/.dev cluster argo-controller  ## Argo's own controller beside the operator on the local control plane
	$(BIN)/pytest -n 0 -q -m argo_real tests/real/test_argo.py

# Kueue's controller manager from its Go module (sigs.k8s.io/kueue, pinned in deploy/local/kueue/go.mod:
# a module of its own, its Kubernetes libraries older than the plane's) into out/kueue/bin, and from
# the same module its CRDs, webhook configurations, RBAC and default configuration into
# out/kueue/config, for `make e2e-kueue` and benchmarks/kueue_vs_idlegate.py
# (idlegate.controlplane.kueue starts it against a plane)
KUEUE_DIR ?= $(OUT)/kueue
kueue:
	@command -v go >/dev/null || { echo "make kueue builds from Go modules: install Go 1.26 or newer and run it again"; exit 1; }
	cd deploy/local/kueue && go build -trimpath -buildvcs=false -ldflags '-s -w' \
		-o $(abspath $(KUEUE_DIR))/bin/ sigs.k8s.io/kueue/cmd/kueue
	rm -rf $(KUEUE_DIR)/config && mkdir -p $(KUEUE_DIR)/config
	cd deploy/local/kueue && src="$$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components" && \
		cp -r "$$src"/crd "$$src"/webhook "$$src"/rbac "$$src"/manager $(abspath $(KUEUE_DIR))/config/
	chmod -R u+w $(KUEUE_DIR)/config

e2e-kueue: $(VENV)/.dev cluster kueue  ## Kueue's own controller admitting a Job on the local control plane
	$(BIN)/pytest -n 0 -q -m kueue_real tests/real/test_kueue.py

cluster-up: cluster $(VENV)/.base  ## start it on loopback with 3 KWOK nodes
	$(BIN)/python -m idlegate.controlplane up --dir $(CLUSTER_DIR)

cluster-down: $(VENV)/.base  ## stop it
	$(BIN)/python -m idlegate.controlplane down --dir $(CLUSTER_DIR)

test: $(VENV)/.dev chromium cluster  ## lint, check types, then the whole test suite (tests/real: on the local control plane)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -n 2 -q --list-data-tests=$(DATA_TESTS)

# A fresh clone has no ../shared/data, and each test that reads it must then skip with its
# reason (or pass without it). CI (.ci/run) checks that after `make test`: it reruns the
# tests that read data, which that run listed (tests/data_tests.py: a file opened under
# the data, the resolver's audit event, a process naming a data set), with the data
# hidden: IDLEGATE_SHARED_DATA names a folder that does not exist, the trace variables
# are unset. Only those tests, and only their modules collected: 85 tests of 19 modules
# take about a minute so (58 s on 2 busy cores; most of them skip, one e2e test runs
# 20 s), where the whole suite twice would double CI's ~11 minutes; the listing costs
# `make test` no measurable time (an audit hook). A test is listed for what it tries, not
# what it finds: one that starts a process naming a data set (the process looks for the
# data out of this one's sight) or opens a path under a data folder (the audit event comes
# before the open fails) is listed on a machine without the data too (26 tests of a
# data-less clone), and rerun there without the data a second time; only the resolver's
# event needs the data found.
test-without-data: $(VENV)/.dev
	@if [ -s $(DATA_TESTS) ]; then \
		env -u IDLEGATE_TPCH_DIR -u IDLEGATE_ALIBABA_DIR \
			IDLEGATE_SHARED_DATA=$(abspath $(OUT))/hidden-shared-data \
			$(BIN)/pytest -n 2 -q --only-tests-in=$(DATA_TESTS) \
			$$(cut -d: -f1 $(DATA_TESTS) | sort -u); \
	else echo "no test read ../shared/data in the last make test: nothing to rerun without it"; fi

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

# the README's picture, docs/img/idle-slot.png (tracked): for the maintainer who changes it;
# the README's own command writes out/idle-slot.png, as every command a user copies does
docs-images: $(VENV)/.base
	$(BIN)/python benchmarks/gantt.py --out docs/img/idle-slot.png

clean:
	rm -rf $(VENV) $(AIRFLOW_VENV) $(OUT) .pytest_cache .ruff_cache .mypy_cache .hypothesis
