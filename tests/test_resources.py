"""Kubernetes quantities, resource vectors and pods' effective requests (`sim.resources`):
known answers from Kubernetes' documentation and the kube-scheduler's rules."""

from __future__ import annotations

from fractions import Fraction

import pytest

from idlegate.errors import IdlegateError
from idlegate.sim.resources import (
    MAX_QUANTITY,
    ResourceVector,
    format_quantity,
    parse_quantity,
    pod_request,
)

GI = 1024**3


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("1", 1000),
        ("1.5", 1500),
        ("0.1", 100),
        (".5", 500),
        ("5.", 5000),
        ("+2", 2000),
        ("-0", 0),
        ("2e3", 2_000_000),
        ("1E3", 1_000_000),
        ("1e-3", 1),
        ("1k", 1_000_000),
        ("100M", 100 * 10**6 * 1000),
        ("1G", 10**9 * 1000),
        ("1E", 10**18 * 1000),
        ("1Ki", 1024 * 1000),
        ("4Gi", 4 * GI * 1000),
        ("1.5Gi", 1536 * 1024**2 * 1000),
        ("0.1m", 1),  # finer than a milli-unit: rounded up, as the API server does
        ("1n", 1),
        ("250u", 1),
        (2, 2000),
        (0.25, 250),
        ("100Ei", MAX_QUANTITY * 1000),  # beyond 2^63 - 1: capped
    ],
)
def test_quantities_parse_as_kubernetes_does(text, milli):
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("text", ["", "m", "1.2.3", "1 Gi", "1gi", "1KI", "1e", "Gi", "1b", "0x10"])
def test_a_bad_quantity_is_a_sentence_naming_it(text):
    with pytest.raises(IdlegateError, match=r"^cpu: .* is not a quantity; write a number"):
        parse_quantity(text, "cpu")


def test_a_huge_exponent_is_read_at_once():
    # 10 ** 999999999 took minutes; past the cap, or below a milli-unit, is all it can be
    assert parse_quantity("1e999999999") == MAX_QUANTITY * 1000
    assert parse_quantity("5e-999999999") == 1
    assert parse_quantity("0e999999999") == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # the API server requires whole pods and extended resources (issue 60, 14)
        ("nvidia.com/gpu=0.5", r"--resources.nvidia.com/gpu: '0.5' is not a whole number"),
        ("pods=1500m", r"--resources.pods: '1500m' is not a whole number; .* write 2 or more"),
        # capped to 2^63 - 1 it was a pool of which every request is 0 % (issue 60, 15)
        ("cpu=1e400", r"--resources: cpu=1e400 is beyond the largest quantity Kubernetes"),
        ("memory=100Ei", r"--resources: memory=100Ei is beyond the largest quantity"),
    ],
)
def test_a_capacity_is_whole_and_below_the_cap(text, message):
    with pytest.raises(IdlegateError, match=message):
        ResourceVector.parse(text)


def test_a_request_of_a_fraction_of_an_extended_resource_is_refused():
    with pytest.raises(IdlegateError, match=r"^example.com/fpga: 0.5 is not a whole number"):
        ResourceVector.of({"example.com/fpga": 0.5}, "")
    # native resources split: a fraction of a core, of memory, of a kubernetes.io/ resource
    v = ResourceVector.of({"cpu": "0.5", "memory": "0.5", "kubernetes.io/x": "0.5"}, "")
    assert v == ResourceVector({"cpu": 500, "memory": 1000, "kubernetes.io/x": 1000})
    assert ResourceVector.of({"nvidia.com/gpu": "1000m"})["nvidia.com/gpu"] == 1000


def test_negative_and_non_text_quantities_are_refused():
    with pytest.raises(IdlegateError, match=r"memory: '-1Gi' is negative"):
        parse_quantity("-1Gi", "memory")
    with pytest.raises(IdlegateError, match=r"cpu: True is not a quantity"):
        parse_quantity(True, "cpu")  # type: ignore[arg-type]
    with pytest.raises(IdlegateError, match=r"cpu: \[1\] is not a quantity"):
        parse_quantity([1], "cpu")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("milli", "binary", "text"),
    [
        (500, False, "500m"),
        (2000, False, "2"),
        (0, False, "0"),
        (4 * GI * 1000, True, "4Gi"),
        (10**8 * 1000, True, "100M"),
        (2_000_000, False, "2k"),
        (1024 * 1000, False, "1024"),
    ],
)
def test_quantities_format_back(milli, binary, text):
    assert format_quantity(milli, binary=binary) == text


def test_a_vector_counts_cpu_in_milli_units_and_the_rest_in_units():
    v = ResourceVector.of({"cpu": "0.0001", "memory": "1500m", "nvidia.com/gpu": 1})
    assert v["cpu"] == 1 and v["memory"] == 2000 and v["nvidia.com/gpu"] == 1000
    assert v["pods"] == 0 and "pods" not in v
    assert v.units("cpu") == Fraction(1, 1000)


def test_vectors_parse_from_the_command_line_and_print_back():
    v = ResourceVector.parse("cpu=8, memory=32Gi,nvidia.com/gpu=2")
    assert v == ResourceVector.of({"cpu": 8, "memory": "32Gi", "nvidia.com/gpu": "2"})
    assert v.format() == "cpu=8,memory=32Gi,nvidia.com/gpu=2"
    assert v.to_list() == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}
    assert ResourceVector().format() == "none"
    assert ResourceVector.of({"cpu": 0}) == ResourceVector()  # zero entries dropped


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cpu=8,cpu=4", r"--resources: cpu is given twice"),
        ("cpu", r"--resources: 'cpu' is not NAME=QUANTITY"),
        ("", r"--resources: no resource given"),
        ("cpu=eight", r"--resources.cpu: 'eight' is not a quantity"),
        ("CPU Cores=2", r"--resources: 'CPU Cores' is not a resource name"),
        ("cpu=0,memory=1Gi", r"--resources: cpu=0 is no capacity: a pool counts only"),
        ("memory=0Gi", r"--resources: memory=0Gi is no capacity"),
    ],
)
def test_bad_vectors_are_sentences(text, message):
    with pytest.raises(IdlegateError, match=message):
        ResourceVector.parse(text)


def test_vector_arithmetic_fits_and_dominant_share():
    cap = ResourceVector.parse("cpu=8,memory=2Gi")
    demand = ResourceVector.parse("cpu=2,memory=1Gi")
    assert demand.fits(cap) and (demand * 2).fits(cap) and not (demand * 3).fits(cap)
    assert cap - demand * 2 == ResourceVector.parse("cpu=4")
    assert cap - demand * 2 + demand * 2 == cap
    assert 3 * demand == demand + demand + demand
    assert demand.dominant_share(cap) == Fraction(1, 2)
    gpu = ResourceVector.parse("nvidia.com/gpu=1")
    assert not gpu.fits(cap) and gpu.too_large(cap) == ["nvidia.com/gpu"]
    assert gpu.dominant_share(cap) == float("inf")
    assert ResourceVector().dominant_share(cap) == 0
    assert ResourceVector().fits(ResourceVector())
    assert demand.max(ResourceVector.parse("cpu=1,memory=4Gi")) == ResourceVector.parse(
        "cpu=2,memory=4Gi"
    )
    assert cap.restricted(["cpu", "pods"]) == ResourceVector.parse("cpu=8")


def _c(requests=None, limits=None, **extra):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def test_a_pods_request_is_its_containers_sum():
    spec = {"containers": [_c({"cpu": "500m", "memory": "1Gi"}), _c({"cpu": "1"}), _c()]}
    assert pod_request(spec) == ResourceVector.parse("cpu=1500m,memory=1Gi")
    assert pod_request({"containers": [{"name": "c"}]}) == ResourceVector()


def test_a_limit_stands_in_for_a_missing_request():
    spec = {"containers": [_c({"cpu": "250m"}, {"cpu": "1", "memory": "2Gi"})]}
    assert pod_request(spec) == ResourceVector.parse("cpu=250m,memory=2Gi")


def test_init_containers_take_the_max_and_overhead_adds():
    spec = {
        "initContainers": [_c({"cpu": "2"}), _c({"memory": "3Gi"})],
        "containers": [_c({"cpu": "1", "memory": "1Gi"}), _c({"cpu": "500m"})],
        "overhead": {"cpu": "100m", "memory": "64Mi"},
    }
    # max(cpu 1.5 vs init 2, memory 1Gi vs init 3Gi) + overhead
    assert pod_request(spec) == ResourceVector.parse("cpu=2100m,memory=3136Mi")


def test_sidecars_run_beside_later_init_containers_and_the_containers():
    spec = {
        "initContainers": [
            _c({"cpu": "1"}, restartPolicy="Always"),  # a sidecar
            _c({"cpu": "2"}),  # runs with the sidecar: 3
        ],
        "containers": [_c({"cpu": "1"})],  # with the sidecar: 2
    }
    assert pod_request(spec) == ResourceVector.parse("cpu=3")


def test_pod_level_resources_replace_the_containers_sum_for_what_they_name():
    spec = {
        "resources": {"requests": {"cpu": "4"}},
        "containers": [_c({"cpu": "1", "memory": "1Gi"})],
    }
    assert pod_request(spec) == ResourceVector.parse("cpu=4,memory=1Gi")


def test_a_bad_request_names_its_path():
    spec = {"containers": [_c(), _c({"memory": "lots"})]}
    with pytest.raises(
        IdlegateError, match=r"^spec\.containers\[1\]\.resources\.requests\.memory: 'lots'"
    ):
        pod_request(spec)
