"""Kubernetes resources: quantities, resource vectors and a pod's effective request.

Pure (no kubernetes import); what the kube-scheduler does, restated:

* A *quantity* (`parse_quantity`) is Kubernetes' text form of a number: digits with an
  optional sign, fraction and suffix, binary (``Ki`` … ``Ei``: powers of 1024), decimal
  (``n``, ``u``, ``m``, none, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or an exponent
  (``2e3``). It is held exactly, as whole milli-units: a finer value is rounded up to the
  next milli-unit and a larger one than 2^63 - 1 is capped, as the API server does
  (``0.1m`` is ``1m``). The arithmetic on it is on Python integers, so it is exact.
  A pool's capacity (`ResourceVector.parse`, a config's or an ExecutorPool's
  ``resources``) may not be capped: ``cpu=1e400`` is refused, not read as 2^63 - 1
  cores of which every request is 0 %.
* A *resource vector* (`ResourceVector`) maps resource names (``cpu``, ``memory``,
  ``pods``, ``nvidia.com/gpu`` …) to quantities. A resource it does not name is 0. CPU
  is counted in milli-units and every other resource in whole units, rounded up, as the
  kube-scheduler counts them (``MilliValue`` for CPU, ``Value`` for the others).
  ``pods`` and the extended resources (a name with a prefix other than
  ``kubernetes.io/``: ``nvidia.com/gpu``) are whole numbers, as the API server requires
  of a pod's requests and a node's capacity: ``nvidia.com/gpu: 0.5`` is refused.
* A pod fits a node (NodeResourcesFit) where each of its requests, and one of the node's
  ``pods``, is at most what the node has free; of the nodes it fits, the default scoring
  (LeastAllocated, `least_allocated`) puts it on the one left with the largest share of
  its CPU and memory free, the mean of the two (ties: the first node, where the
  kube-scheduler picks one at random).
* A pod's *effective request* (`pod_request`) is what the kube-scheduler fits on a node:
  the sum of its containers' requests, at least the request of each init container (with
  the sidecars, init containers with ``restartPolicy: Always``, started before it
  running beside it; sidecars run beside the containers too), plus the pod's
  ``overhead``. A container that states a limit but no request for a resource requests
  its limit, as the API server defaults it. Pod-level ``resources`` (Kubernetes 1.32+)
  replace the containers' sum for the resources they name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from heapq import heapify, heappop, heappush
from operator import itemgetter
from typing import Any

from idlegate.errors import IdlegateError

MILLI = 1000
"""Milli-units per unit: a quantity's value is held as an integer number of these."""

MAX_QUANTITY = 2**63 - 1
"""The largest quantity (in units) Kubernetes represents; larger ones are capped to it."""

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>\d+\.?\d*|\.\d+)"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))"
)

_MILLI_RESOURCES = frozenset({"cpu"})
"""Resources the kube-scheduler counts in milli-units; it counts the others in units."""
_BINARY_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")
"""Resources (or name prefixes) whose quantities read best in binary suffixes (``4Gi``)."""

_RESOURCE_NAME = re.compile(
    r"^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
"""A resource name: an optional DNS-subdomain prefix and '/', then a name
(``cpu``, ``nvidia.com/gpu``), as the API server accepts in a ResourceList."""


def parse_quantity(value: str | int | float, name: str = "quantity") -> int:
    """A Kubernetes quantity in milli-units (``"500m"`` -> 500, ``"4Gi"`` -> 4294967296000).

    `value` is a quantity's text or a number (a YAML ``cpu: 2``). A value that is not a
    quantity, or is negative, raises IdlegateError naming `name` (e.g. ``cpu``)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise IdlegateError(
            f"{name}: {value!r} is not a quantity; write a number with an optional suffix, "
            "e.g. 500m, 2, 4Gi or 100M"
        )
    text = value if isinstance(value, str) else repr(value)
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise IdlegateError(
            f"{name}: {text!r} is not a quantity; write a number with an optional suffix, "
            "e.g. 500m, 2, 4Gi or 100M (suffixes: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, "
            "Ei, or an exponent such as 2e3)"
        )
    if match["sign"] == "-" and Fraction(match["number"]) != 0:
        raise IdlegateError(f"{name}: {text!r} is negative; a request or capacity is >= 0")
    number = Fraction(match["number"])
    if match["exp"] is not None:
        exponent = int(match["exp"][1:])
        # 10 ** 999999999 would take minutes; past the text's own digits (and 30 more) the
        # value is above the cap or below one milli-unit whatever the digits are
        bound = len(text) + 30
        number *= Fraction(10) ** max(-bound, min(exponent, bound)) if number else 0
    elif match["suffix"] in _BINARY:
        number *= 1024 ** _BINARY[match["suffix"]]
    else:
        number *= Fraction(10) ** _DECIMAL[match["suffix"]]
    milli = number * MILLI
    return min(-(-milli.numerator // milli.denominator), MAX_QUANTITY * MILLI)


def format_quantity(milli: int, *, binary: bool = False) -> str:
    """A quantity of `milli` milli-units as Kubernetes writes it (``500m``, ``2``, ``4Gi``,
    ``100M``); `binary` prefers the suffixes of 1024 (memory)."""
    return format_quantities((milli,), binary=binary)[0]


def format_quantities(amounts: Sequence[int], *, binary: bool = False) -> list[str]:
    """Quantities of milli-units (`format_quantity`'s) in one unit, the largest that writes
    each of them whole, so that they read side by side: ``18000m/21250m``, not ``18/21250m``;
    ``12288Mi/32256Mi``, not ``12Gi/32256Mi``."""
    given = [m for m in amounts if m]
    if any(m % MILLI for m in given):
        return [f"{m}m" if m else "0" for m in amounts]
    units = [m // MILLI for m in given]
    suffixes = sorted(_BINARY.items(), key=lambda s: -s[1]) if binary else []
    for suffix, power in suffixes:
        if units and all(u % 1024**power == 0 for u in units):
            return [f"{m // MILLI // 1024**power}{suffix}" if m else "0" for m in amounts]
    for suffix, power in sorted(_DECIMAL.items(), key=lambda s: -s[1]):
        if power > 0 and units and all(u % 10**power == 0 for u in units):
            return [f"{m // MILLI // 10**power}{suffix}" if m else "0" for m in amounts]
    return [str(m // MILLI) for m in amounts]


def is_integer_resource(name: str) -> bool:
    """Whether the API server holds `name` to whole units: ``pods`` and the extended
    resources (a prefix but not ``kubernetes.io/``, not a quota's ``requests.``)."""
    extended = "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")
    return extended or name == "pods"


def _at(where: str) -> str:
    """The start of a message about `where` (nothing when it is said by the caller)."""
    return f"{where}: " if where else ""


def binary_units(resource: str) -> bool:
    """`resource` is written in the suffixes of 1024 (memory, storage)."""
    return resource.startswith(_BINARY_RESOURCES)


def _counted(resource: str, milli: int) -> int:
    """`milli` as the kube-scheduler counts `resource`: CPU in milli-units, the others
    rounded up to whole units."""
    if resource in _MILLI_RESOURCES:
        return milli
    return -(-milli // MILLI) * MILLI


def check_resource_name(name: str, where: str = "resources") -> str:
    """`name` if it can name a resource (``cpu``, ``nvidia.com/gpu``); else IdlegateError."""
    if not isinstance(name, str) or not _RESOURCE_NAME.fullmatch(name):
        raise IdlegateError(
            f"{_at(where)}{name!r} is not a resource name; write cpu, memory, pods, "
            "ephemeral-storage or an extended resource such as nvidia.com/gpu"
        )
    return name


class ResourceVector(Mapping[str, int]):
    """Quantities of resources, in milli-units by name; immutable, and a resource it does
    not name is 0 (`self[name]`). Zero entries are dropped, so equal vectors compare equal.

    Built from a ResourceList-style mapping (`of`) or ``cpu=8,memory=32Gi`` (`parse`);
    CPU is counted in milli-units, the others rounded up to units (the module header)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[str, int] = {k: v for k, v in sorted(pairs) if v}

    # -- building ------------------------------------------------------------------------

    @classmethod
    def of(cls, data: Mapping[str, Any] | None, where: str = "resources") -> ResourceVector:
        """A ResourceList (``{cpu: 500m, memory: 1Gi}``; numbers or texts) as a vector;
        IdlegateError naming `where` and the resource for a bad name or quantity."""
        if data is None:
            return EMPTY
        if not isinstance(data, Mapping):
            raise IdlegateError(
                f"{_at(where)}expected a mapping of resource names to quantities "
                f"(e.g. cpu: 500m, memory: 1Gi), got {data!r}"
            )
        out = {}
        for key, value in data.items():
            check_resource_name(key, where)
            name = f"{where}.{key}" if where else key
            if key in ("requests", "limits") and isinstance(value, Mapping):
                # (a container's resources, written here: "is not a quantity" misled)
                raise IdlegateError(
                    f"{name}: a ResourceList names its quantities directly (cpu: 500m, "
                    "memory: 1Gi), not a container's requests and limits; move the "
                    f"{key}' quantities up a level, in place of {key}"
                )
            milli = parse_quantity(value, name)
            if milli % MILLI and is_integer_resource(key):
                raise IdlegateError(
                    f"{name}: {value!r} is not a whole number; Kubernetes counts {key} in "
                    f"whole units and cannot split one: write {-(-milli // MILLI)} or more"
                )
            out[key] = _counted(key, milli)
        return cls(out)

    @classmethod
    def capacity(
        cls,
        data: Mapping[str, Any],
        where: str = "resources",
        fix: str = "the pool's real capacity",
    ) -> ResourceVector:
        """`of` for what a pool has or a queue's quota: IdlegateError for a quantity past
        the cap (the module header), which would make every request a share of 0 (and a
        sum of quotas quote a number no one wrote); `fix` says what to give instead."""
        vector = cls.of(data, where)
        over = [k for k in vector if vector[k] >= MAX_QUANTITY * MILLI]
        if over:
            raise IdlegateError(
                f"{_at(where)}{over[0]}={data[over[0]]} is beyond the largest quantity "
                f"Kubernetes holds (2^63 - 1); give {fix}"
            )
        return vector

    @classmethod
    def validated(cls, data: object, *, capacity: bool = False) -> ResourceVector:
        """`of` (`capacity` if `capacity`) for a pydantic field validator, on the data as
        given (pydantic would read `true` as the number 1): a bad name or quantity is a
        ValueError with the reason."""
        try:
            if capacity and isinstance(data, Mapping):
                return cls.capacity(data, "")
            return cls.of(data, "")  # type: ignore[arg-type]
        except IdlegateError as exc:
            raise ValueError(str(exc)) from None

    @classmethod
    def parse(cls, text: str, where: str = "--resources") -> ResourceVector:
        """``cpu=8,memory=32Gi,nvidia.com/gpu=2`` as a vector, a pool's capacity (a
        resource given twice or as 0, or a part without '=', is an IdlegateError naming
        `where`)."""
        out: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                raise IdlegateError(
                    f"{_at(where)}{part!r} is not NAME=QUANTITY; write e.g. "
                    "cpu=8,memory=32Gi,nvidia.com/gpu=2"
                )
            if key in out:
                raise IdlegateError(f"{_at(where)}{key} is given twice; give each resource once")
            out[key] = value.strip()
        if not out:
            raise IdlegateError(f"{_at(where)}no resource given; write e.g. cpu=8,memory=32Gi")
        vector = cls.capacity(out, where)
        # a zero entry is dropped, and a vector without it counts nothing of it: cpu=0
        # would quietly be a pool that does not count CPU, rather than one that has none
        zero = [k for k in out if k not in vector]
        if zero:
            raise IdlegateError(
                f"{_at(where)}{zero[0]}={out[zero[0]]} is no capacity: a pool counts only the "
                f"resources it has; give {zero[0]} above 0, or leave it out for a pool that "
                f"does not count it"
            )
        return vector

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """As a config field: ``cpu=8,memory=32Gi`` or a ResourceList mapping in, the
        text out (`format`)."""
        from pydantic_core import core_schema

        def validate(value: Any) -> ResourceVector:
            if isinstance(value, ResourceVector):
                return value
            try:
                if isinstance(value, str):
                    return cls.parse(value, "")
                return cls.capacity(value, "")
            except IdlegateError as exc:
                raise ValueError(str(exc)) from None

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v.format()),
        )

    # -- reading -------------------------------------------------------------------------

    def __getitem__(self, name: str) -> int:
        return self._items.get(name, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ResourceVector):
            return self._items == other._items
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return f"ResourceVector({self.format()!r})"

    def format(self) -> str:
        """``cpu=500m,memory=4Gi`` (``none`` when empty), names in sorted order."""
        if not self._items:
            return "none"
        return ",".join(
            f"{k}={format_quantity(v, binary=binary_units(k))}" for k, v in self._items.items()
        )

    def to_list(self) -> dict[str, str]:
        """The vector as a ResourceList (``{"cpu": "500m", "memory": "4Gi"}``)."""
        return {k: format_quantity(v, binary=binary_units(k)) for k, v in self._items.items()}

    def units(self, name: str) -> Fraction:
        """The quantity of `name` in units (``cpu`` 500m -> 1/2)."""
        return Fraction(self[name], MILLI)

    # -- arithmetic ----------------------------------------------------------------------

    def __add__(self, other: Mapping[str, int]) -> ResourceVector:
        out = dict(self._items)
        for k, v in other.items():
            out[k] = out.get(k, 0) + v
        return ResourceVector(out)

    def __sub__(self, other: Mapping[str, int]) -> ResourceVector:
        """The difference; an entry may go below 0 (more in use than a capacity holds)."""
        out = dict(self._items)
        for k, v in other.items():
            out[k] = out.get(k, 0) - v
        return ResourceVector(out)

    def __mul__(self, k: int) -> ResourceVector:
        return ResourceVector({n: v * k for n, v in self._items.items()})

    __rmul__ = __mul__

    def max(self, other: Mapping[str, int]) -> ResourceVector:
        """The larger of the two per resource."""
        out = dict(self._items)
        for k, v in other.items():
            out[k] = max(out.get(k, 0), v)
        return ResourceVector(out)

    def restricted(self, names: Iterable[str]) -> ResourceVector:
        """Only the resources of `names`."""
        return ResourceVector({n: self[n] for n in names})

    def fits(self, free: Mapping[str, int]) -> bool:
        """Every resource of this demand is at most what `free` has of it (an absent
        one counts 0: a demand on a resource `free` does not name fits only if it is 0)."""
        return all(v <= free.get(k, 0) for k, v in self._items.items())

    def too_large(self, capacity: Mapping[str, int]) -> list[str]:
        """The resources of which this demand asks more than `capacity` has, in order."""
        return [k for k, v in self._items.items() if v > capacity.get(k, 0)]

    def dominant_share(self, capacity: Mapping[str, int]) -> Fraction | float:
        """The largest share of `capacity` this vector takes over its resources (DRF's
        dominant share): ``cpu=2,memory=1Gi`` of ``cpu=8,memory=2Gi`` is 1/2. A resource
        that `capacity` lacks and this vector uses makes it infinite; an empty vector's is 0."""
        share: Fraction | float = Fraction(0)
        for k, v in self._items.items():
            cap = capacity.get(k, 0)
            share = max(share, Fraction(v, cap) if cap > 0 else float("inf"))
        return share


EMPTY = ResourceVector()
"""The vector of no resource: a demand on nothing beyond one pod."""


def check_requested(
    pool: ResourceVector, asked: Iterable[str], what: str, fix: str | None = None
) -> None:
    """IdlegateError when the stages of `what`, which request the resources `asked`, request
    none that `pool` names: such a pool counts its pods only, which is a misnamed resource
    (``gpu`` for ``nvidia.com/gpu``) or forgotten requests (`fix` says how to add them),
    not a sizing. `simulate`'s ``--resources`` and `lint`'s ``--pool-resources`` alike."""
    names = sorted(n for n in pool if n != "pods")
    asked = {n for n in asked if n != "pods"}
    if not names or asked.intersection(names):
        return
    they = f"they request {', '.join(sorted(asked))}" if asked else "they request nothing"
    raise IdlegateError(
        f"the pool counts {' and '.join(names)} but no stage of {what} requests any "
        f"({they}), so it would count its pods only; name a resource the stages request, "
        f"{f'{fix}, ' if fix else ''}or leave the pool's resources out"
    )


def _container_request(container: Mapping[str, Any], where: str) -> ResourceVector:
    """A container's requests, a limit standing in for a request it does not state."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):  # (no resources; a bad shape is the API's to say)
        return EMPTY
    limits = ResourceVector.of(resources.get("limits"), f"{where}.resources.limits")
    requests = ResourceVector.of(resources.get("requests"), f"{where}.resources.requests")
    for name in requests:
        problem = request_problem(name, resources["requests"][name], resources.get("limits"))
        if problem is not None:
            raise IdlegateError(f"{where}.resources.requests.{name}: {problem}")
    return ResourceVector({**{k: limits[k] for k in limits}, **{k: requests[k] for k in requests}})


def overcommittable(name: str) -> bool:
    """Whether a container may request less of `name` than its limit: Kubernetes' native
    resources (no prefix, or ``kubernetes.io/``) but hugepages; an extended resource
    (``nvidia.com/gpu``) is not, so its request equals its limit."""
    native = "/" not in name or name.split("/")[0].endswith("kubernetes.io")
    return native and not name.startswith("hugepages-")


def request_problem(name: str, request: Any, limits: Any) -> str | None:
    """What the API server refuses of a container's request `request` of `name` beside
    its `limits` (a ResourceList, or None; both parsed already): more than its limit, or
    for a resource not `overcommittable` another one. None when it is fine. (A request of
    such a resource with no limit the API server refuses too; the generated workloads and
    the recorded ones write GPUs so, so it is not refused here yet.)"""
    limit = limits.get(name) if isinstance(limits, Mapping) else None
    if limit is None:
        return None
    asked, most = parse_quantity(request, name), parse_quantity(limit, name)
    if asked > most:
        return f"{request!r} is more than its limit {limit!r}; request at most the limit"
    if asked != most and not overcommittable(name):
        return (
            f"{request!r} is not its limit {limit!r}, which Kubernetes requires of {name} (it "
            f"cannot be overcommitted): give both {limit!r}, or the limit alone"
        )
    return None


def _mappings(items: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list (none of anything else)."""
    return [c for c in items if isinstance(c, Mapping)] if isinstance(items, list) else []


def pod_request(pod_spec: Mapping[str, Any], where: str = "spec") -> ResourceVector:
    """The pod's effective request as the kube-scheduler computes it (the module header):
    containers summed, at least each init container (with the sidecars before it),
    pod-level requests for the resources they name, plus the pod's overhead. `pods` is
    not in it: every pod takes one pod slot."""
    containers = ResourceVector()
    for i, c in enumerate(_mappings(pod_spec.get("containers"))):
        containers = containers + _container_request(c, f"{where}.containers[{i}]")
    sidecars = ResourceVector()
    init_peak = ResourceVector()
    for i, c in enumerate(_mappings(pod_spec.get("initContainers"))):
        request = _container_request(c, f"{where}.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":  # a sidecar: runs on beside what follows
            containers = containers + request
            sidecars = sidecars + request
            request = sidecars
        else:
            request = request + sidecars
        init_peak = init_peak.max(request)
    total = containers.max(init_peak)
    pod_level = pod_spec.get("resources")
    if isinstance(pod_level, Mapping) and pod_level:
        own = _container_request({"resources": pod_level}, where)
        total = ResourceVector({**dict(total.items()), **dict(own.items())})
    return total + ResourceVector.of(pod_spec.get("overhead"), f"{where}.overhead")


def least_allocated(
    need: Sequence[int],
    free: Sequence[Sequence[int]],
    allocatable: Sequence[Sequence[int]],
    scored: Sequence[int],
) -> int | None:
    """The node a pod asking `need` goes to (the module header's LeastAllocated): the index
    in `free` (each node's free amounts, in `need`'s order) of the fitting node with the
    largest mean share of its `allocatable` left free over the positions `scored` (cpu,
    memory), the first of equals; None if it fits none."""
    best = max(free_after(need, free, allocatable, scored), key=itemgetter(1), default=None)
    return None if best is None else best[0]


def free_after(
    need: Sequence[int],
    free: Sequence[Sequence[int]],
    allocatable: Sequence[Sequence[int]],
    scored: Sequence[int],
) -> Iterator[tuple[int, float]]:
    """(index, score) of each node of `free` that fits `need`, in order: the score is the
    summed share of its `allocatable` left free after `need` over the positions `scored`
    (what `least_allocated` maximises and `sim.pool.packed` minimises)."""
    for i, (node, total) in enumerate(zip(free, allocatable, strict=True)):
        if all(f >= n for f, n in zip(node, need, strict=True)):
            yield i, sum((node[k] - need[k]) / total[k] for k in scored if total[k] > 0)


class Spread:
    """Pods placed one after another on one table of nodes, each where `least_allocated`
    puts it given the placements before it, in O(log n) after the first of its need.

    Per need, a heap of the fitting nodes by score (then index: the first of equals); a
    placement (`take`) lowers one node's free amounts and marks its entries stale. Free
    amounts only fall, so a stale score is never below the node's true one: a stale entry
    on top is scored again and pushed back, or dropped once the node no longer fits, and
    an entry on top that is not stale is `least_allocated`'s answer."""

    def __init__(
        self, free: list[list[int]], allocatable: Sequence[Sequence[int]], scored: Sequence[int]
    ) -> None:
        self.free, self.allocatable, self.scored = free, allocatable, scored
        self._changed = [0] * len(free)
        self._heaps: dict[tuple[int, ...], list[tuple[float, int, int]]] = {}
        self.taken: set[int] = set()
        """The nodes a pod was placed on."""

    def _score(self, need: Sequence[int], i: int) -> float | None:
        node, total = self.free[i], self.allocatable[i]
        if not all(f >= n for f, n in zip(node, need, strict=True)):
            return None
        return sum((node[k] - need[k]) / total[k] for k in self.scored if total[k] > 0)

    def where(self, need: tuple[int, ...]) -> int | None:
        """`least_allocated(need, self.free, ...)`: the node a pod asking `need` goes to."""
        heap = self._heaps.get(need)
        if heap is None:
            scores = ((self._score(need, i), i) for i in range(len(self.free)))
            heap = self._heaps[need] = [(-s, i, 0) for s, i in scores if s is not None]
            heapify(heap)
        while heap:
            _, i, seen = heap[0]
            if seen == self._changed[i]:
                return i
            heappop(heap)
            score = self._score(need, i)
            if score is not None:
                heappush(heap, (-score, i, self._changed[i]))
        return None

    def take(self, i: int, need: Sequence[int]) -> None:
        """A pod asking `need` goes to node `i` (it may leave less than nothing)."""
        self.free[i] = [f - n for f, n in zip(self.free[i], need, strict=True)]
        self._changed[i] += 1
        self.taken.add(i)
