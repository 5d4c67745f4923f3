"""Leader election on a ``coordination.k8s.io/v1`` Lease: several replicas, one writer.

Each replica runs an :class:`Elector` over the Lease API, through the operator's own API
client (:class:`idlegate.operator.edge.kube.KubeApi`). The rules are client-go's:

* **Acquire.** A replica takes the Lease when there is none (create: 409 if another
  created it first), when it has no holder (released by a leader that stopped), or when
  its holder has not renewed it for ``leaseDurationSeconds`` *as this replica has
  observed it*: the time counts from when this replica last saw the Lease change, on its
  own monotonic clock, so no two clocks are compared; a standby looks again at that
  expiry rather than at its next period. Taking it is a PUT guarded by the
  Lease's resourceVersion: of two standbys that try at once, one gets 409 and stays a
  standby, cleanly.
* **Renew.** The leader writes ``renewTime`` every ``retry_period`` (the same guarded PUT).
  It counts as leader (:attr:`Elector.is_leader`) only while its last successful renewal,
  timed from *before* it was sent, is less than ``renew_deadline`` old. So it stops
  writing at the deadline even when a renewal hangs (the API unreachable: the client
  retries for ever) or its loop is late, and the deadline is shorter than the lease
  duration: it has stopped before any standby may take over.
* **Lose.** At the deadline, on a 409, or when the Lease shows another holder, the
  leader loses for good: ``on_lost`` is called and the elector ends. Its state was built
  as the writer and may not match what the next leader writes, so the operator then
  exits and comes back as a standby with an empty state (as controller-runtime's
  managers do), rather than ever lead again on it.
* **Stop.** A replica told to stop (SIGTERM) never takes the Lease from then on; a leader
  renews it while it writes what is pending, then empties the holder, so that a standby
  takes over at its next look rather than after the duration. Identities are unique by
  construction (:func:`identity`): a Lease naming one was written by this very process.

Why an elector of its own: the ``kubernetes`` client's ``leaderelection`` runs blocking
loops on ``time.time`` with its own API client, untestable in fake time; kopf's peering
elects on KopfPeering resources, not a Lease, and pauses a standby's handlers (and so its
indexes). This one is a small async loop with the clock injected.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import random
import time
from collections.abc import Callable
from typing import Any

from idlegate.api.settings import Settings
from idlegate.operator.edge.kube import ApiError, KubeApi, WriteGate, identity
from idlegate.sim.timestamps import micro_time

log = logging.getLogger(__name__)

API_VERSION = "coordination.k8s.io/v1"
HINTS = {
    403: ": the operator's service account needs get, create and update on "
    "leases.coordination.k8s.io in namespace {namespace} (the Role idlegate-operator-leader "
    "in deploy/base/rbac.yaml)",
    404: ": does namespace {namespace} exist? Create it or pass --lease-namespace",
}
"""What to do about an attempt on the Lease refused with these statuses."""
JITTER = 0.2
"""A standby looks every retry period times 1 to 1 + JITTER (two standbys drift apart)."""
EXPIRY_SLACK = 1e-3
"""Seconds before its expiry at which a Lease held by another counts as expired. A standby
sleeps to the expiry it saw, but the event loop fires a timer up to its clock's resolution
early (a fake loop time rounds sleeps to its own): without the slack, a look a hair before
the expiry would sleep that hair again, and again, without the time ever advancing."""


class Elector:
    """One replica's side of the election (see the module docstring)."""

    def __init__(
        self,
        api: KubeApi,
        identity: str,
        namespace: str,
        name: str,
        *,
        duration: int,
        renew_deadline: float,
        retry_period: float,
        on_elected: Callable[[], None] | None = None,
        on_lost: Callable[[str], None] | None = None,
        now: Callable[[], float] | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api, self.identity = api, identity
        self.namespace, self.name = namespace, name
        self.duration, self.renew_deadline = duration, renew_deadline
        self.retry_period = retry_period
        self.on_elected, self.on_lost = on_elected, on_lost
        self.now = now or (lambda: asyncio.get_running_loop().time())
        """The clock of every duration: the event loop's (monotonic)."""
        self.wall = wall
        """The clock of the times written in the Lease (read by people, not by electors)."""
        self.elected = asyncio.Event()
        """Set once this replica has been elected (it stays set after a loss)."""
        self.ended = False
        """It lost the lease: it never leads again (a new elector would)."""
        self.stopping = False
        """Told to stop: it never takes the Lease (a leader renews it until released)."""
        self.holder = ""
        """The holder of the Lease as last read ("" for none, or not read yet)."""
        self.uid = ""
        """The Lease's uid, as last read (its Events' involved object)."""
        self._leading = False
        self._renewed_at = 0.0
        """`now()` before the leader's last successful acquire or renewal was sent."""
        self._seen: dict[str, Any] | None = None
        """The Lease as last read or written."""
        self._seen_at = 0.0
        """`now()` when the Lease was last seen to change."""
        self.expires = 0.0
        """`now()` when the Lease, as last seen held by another replica, expires."""
        self._attempt: asyncio.Task[bool] | None = None
        """The acquire or renewal in flight (at most one: a hanging one is awaited, not
        piled up)."""
        self._told: set[int] = set()
        """The statuses of failed attempts already logged."""

    @property
    def is_leader(self) -> bool:
        """Whether this replica may write now: elected, and renewed within the deadline."""
        return self._leading and self.now() - self._renewed_at < self.renew_deadline

    async def run(self) -> None:
        """Try to acquire, then renew, every retry period, until the lease is lost."""
        while not self.ended:
            await self.step()
            if not self.ended:
                await asyncio.sleep(self._pause())

    async def step(self) -> None:
        """One attempt to acquire or renew; a leader waits for it no longer than its
        renew deadline (then it has lost)."""
        if self.ended:
            return
        if self._attempt is None:
            self._attempt = asyncio.ensure_future(self._try(self.now()))
        attempt = self._attempt
        limit = None
        if self._leading:
            limit = max(0.0, self._renewed_at + self.renew_deadline - self.now())
        done, _ = await asyncio.wait({attempt}, timeout=limit)
        if not done:
            self._lose(f"it could not renew the Lease within {self.renew_deadline:g} s")
            return
        self._attempt = None
        try:
            attempt.result()
        except ApiError as exc:
            self._failed(exc)
        except Exception:
            log.exception("The attempt on the Lease %s/%s failed.", self.namespace, self.name)
        if self._leading and not self.is_leader:
            self._lose(f"it could not renew the Lease within {self.renew_deadline:g} s")

    async def release(self) -> None:
        """Empty the Lease's holder if its last write named this replica (a leader, or an
        acquire that landed as it was told to stop), once the attempt in flight is done (or
        its write would make this one a conflict). Best effort, for two retry periods."""
        self.stopping, self._leading, self.ended = True, False, True
        if (attempt := self._attempt) is not None:
            await asyncio.wait({attempt}, timeout=self.retry_period)
            attempt.cancel()
        held = (self._seen or {}).get("spec", {}).get("holderIdentity")
        if self._seen is None or held != self.identity:
            return
        body = copy.deepcopy(self._seen)
        spec = body.setdefault("spec", {})
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time(self.wall()))
        try:
            await asyncio.wait_for(
                self.api.replace_lease(self.namespace, self.name, body), self.retry_period
            )
            log.info("Released the Lease %s/%s.", self.namespace, self.name)
        except (ApiError, TimeoutError) as exc:
            log.info("Could not release the Lease %s/%s: %s", self.namespace, self.name, exc)

    # -- internals ---------------------------------------------------------------------------

    def _pause(self) -> float:
        """Seconds to the next attempt: a retry period (a standby's spread by JITTER), or
        less to the expiry of the Lease a standby saw held (no period added to a takeover)."""
        if self._leading:
            return self.retry_period
        pause = self.retry_period * (1.0 + JITTER * random.random())
        left = self.expires - self.now()
        return left if 0 < left < pause else pause

    async def _try(self, started: float) -> bool:
        """Acquire or renew; True if this replica holds the Lease (from `started` on)."""
        lease = await self.api.get_lease(self.namespace, self.name)
        if lease is None:
            return await self._write(None, started)
        self._see(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder != self.identity and self._leading:
            self._lose(f"the Lease is held by {holder or 'nobody'} now")
            return False
        self.expires = self._seen_at + float(spec.get("leaseDurationSeconds") or self.duration)
        if holder and holder != self.identity and self.now() < self.expires - EXPIRY_SLACK:
            return False
        return await self._write(lease, started)

    async def _write(self, lease: dict[str, Any] | None, started: float) -> bool:
        """Create (`lease` None) or replace the Lease as held by this replica; False if
        another replica wrote it first (409)."""
        if self.stopping and not self._leading:
            return False
        now = micro_time(self.wall())
        body = copy.deepcopy(lease) if lease is not None else self._new()
        spec = body.setdefault("spec", {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            if lease is not None:
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=self.duration)
        spec["renewTime"] = now
        try:
            if lease is None:
                written = await self.api.create_lease(self.namespace, body)
            else:
                written = await self.api.replace_lease(self.namespace, self.name, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            if self._leading:
                self._lose("another replica wrote the Lease first (409 Conflict)")
            return False
        self._see(written)  # (kept for `release`, should it have stopped meanwhile)
        if self.ended or (self.stopping and not self._leading):
            return False
        self._renewed_at = started
        if not self._leading:
            self._leading = True
            self._told.clear()
            log.info(
                "Elected leader on the Lease %s/%s as %s.", self.namespace, self.name, self.identity
            )
            self.elected.set()
            if self.on_elected is not None:
                self.on_elected()
        return True

    def _new(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"leaseTransitions": 0},
        }

    def _see(self, lease: dict[str, Any]) -> None:
        """Note `lease` as read now: its expiry counts from when it last changed."""
        meta = lease.get("metadata") or {}
        seen = (self._seen or {}).get("metadata") or {}
        if self._seen is None or meta.get("resourceVersion") != seen.get("resourceVersion"):
            self._seen_at = self.now()
        self._seen = lease
        self.uid = meta.get("uid", "")
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        if holder != self.holder:
            log.info(
                "The Lease %s/%s is held by %s.", self.namespace, self.name, holder or "nobody"
            )
            self.holder = holder

    def _lose(self, why: str) -> None:
        if self.ended:
            return
        self._leading, self.ended = False, True
        log.error("Lost the Lease %s/%s: %s. Writing stops now.", self.namespace, self.name, why)
        if self.on_lost is not None:
            self.on_lost(why)

    def _failed(self, exc: ApiError) -> None:
        """An attempt the API refused: said once per status (the next attempt may pass)."""
        if exc.status in self._told:
            return
        self._told.add(exc.status)
        hint = HINTS.get(exc.status, "").format(namespace=self.namespace)
        where = f"{self.namespace}/{self.name}"
        log.warning("The attempt on the Lease %s failed (%s)%s. Trying again.", where, exc, hint)


def elect(
    settings: Settings,
    kube: KubeApi,
    gate: WriteGate,
    *,
    on_elected: Callable[[], None],
    on_lost: Callable[[str], None],
) -> Elector:
    """The elector of `settings`' Lease, over `kube`; `gate` (the one that the API
    client, the lanes and the applier were built with) follows it, so that every write
    but the Lease's waits for its election and stops at its loss."""
    namespace = settings.lease_namespace or os.environ.get("POD_NAMESPACE") or "default"
    elector = Elector(
        kube,
        identity(),
        namespace,
        settings.lease_name,
        duration=settings.lease_duration,
        renew_deadline=settings.lease_renew_deadline,
        retry_period=settings.lease_retry_period,
        on_elected=on_elected,
        on_lost=on_lost,
    )
    gate.follow(lambda: elector.is_leader)
    lease, every = f"{namespace}/{settings.lease_name}", settings.lease_retry_period
    duration = f"lease {settings.lease_duration} s, renewed every {every:g} s"
    log.info(f"Standing by for the Lease {lease} as {elector.identity} ({duration}).")
    return elector
