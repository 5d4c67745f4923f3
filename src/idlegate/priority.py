"""How the operator's work shares a node's cores with other processes.

* The replay process runs `NICENESS` behind the operator (`behind`): where the two share a
  core (a pod's CPU limit, a small node), a decision waits behind the replays less
  (docs/research/forecasts.md, "In pairs, off and on in turn").
* The operator's loop asks the kernel for a short scheduling slice (`prompt`): on Linux 6.12
  and later (EEVDF) a task that wakes with a shorter slice than the one running takes the
  core at once instead of waiting for the running task's slice to end. The loop runs about
  a millisecond a wake; beside CPU-bound processes it waited 1.7-4.5 ms for a core on each
  wake, 22-45 % of the wall (benchmarks/README.md, "Where a run's lag comes from"). It asks
  for nothing more than a shorter slice: no privilege is needed and its share is unchanged.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

NICENESS = 10
"""How much lower the replay process's CPU priority is than the operator's (`os.nice`)."""

SLICE = 100e-6
"""The loop's scheduling slice, seconds: the kernel's shortest (its default is about 1.4 ms
on two cores)."""

_SETATTR = {"x86_64": 314, "aarch64": 274}
"""`sched_setattr`'s system call number, by machine (where it is not known, no slice is
asked)."""
_KEEP_POLICY = 0x08
"""SCHED_FLAG_KEEP_POLICY: the thread's policy stays as it is."""


def behind() -> None:
    """In the replay process as it starts: `NICENESS` below the operator's priority. A
    platform without `os.nice` runs the replays at the operator's."""
    nice = getattr(os, "nice", None)
    if nice is not None:
        nice(NICENESS)


def prompt(seconds: float = SLICE) -> bool:
    """Ask for a scheduling slice of `seconds` for the calling thread (its policy, niceness
    and share unchanged). False where it is not asked (not Linux, a machine whose call is not
    known, a policy not the normal ones) or refused; a kernel before EEVDF takes it and
    ignores it."""
    number = _SETATTR.get(platform.machine())
    if number is None or not hasattr(os, "sched_getscheduler"):
        return False
    if os.sched_getscheduler(0) not in (os.SCHED_OTHER, os.SCHED_BATCH):
        return False
    # struct sched_attr (48 bytes): size, policy, flags, nice, priority, runtime, deadline, period
    attr = struct.pack(
        "IIQiIQQQ", 48, 0, _KEEP_POLICY, os.getpriority(os.PRIO_PROCESS, 0), 0,
        round(seconds * 1e9), 0, 0,
    )  # fmt: skip
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(number, 0, ctypes.create_string_buffer(attr), 0) == 0
