"""Pinning pool workers to CPUs (opt-in: ``RADVQA_PIN_WORKERS=1``; docs/scale-out.md has the
measurements that decide whether it pays on a machine).

Workers of the process pool are CPU-bound and long-lived (one per CPU, both phases of a build). Left
to the scheduler they may migrate between CPUs or share a physical core's hyperthreads while another
core idles; pinned, worker i runs on the i-th CPU of ``spread_cpus()``: one CPU of every physical
core before the second thread of any core. Pinning is skipped when the process may use fewer CPUs
than there are workers (two workers on one CPU would be worse than none pinned) and where the OS has
no ``sched_setaffinity``. Output never depends on it: only where a worker runs changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ENV = "RADVQA_PIN_WORKERS"


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def spread_cpus(cpus: list[int] | None = None, sysfs: Path = Path("/sys/devices/system/cpu")) -> list[int]:
    """``cpus`` (default: the allowed ones) ordered one per physical core first: the first thread of
    every core (cores in CPU-number order), then the second thread of every core, ... Cores are the
    sibling groups of ``topology/thread_siblings_list``; a CPU without one is its own core."""
    cpus = allowed_cpus() if cpus is None else sorted(cpus)
    cores: dict[str, list[int]] = {}
    for c in cpus:
        try:
            key = (sysfs / f"cpu{c}" / "topology" / "thread_siblings_list").read_text().strip()
        except OSError:
            key = f"cpu{c}"
        cores.setdefault(key, []).append(c)
    groups = sorted(cores.values())
    order: list[int] = []
    for level in range(max((len(g) for g in groups), default=0)):
        order.extend(g[level] for g in groups if level < len(g))
    return order


def pin_requested() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def pin_plan(workers: int) -> list[int] | None:
    """The CPUs to pin ``workers`` workers to, or None when pinning is off or cannot help."""
    if not pin_requested() or not hasattr(os, "sched_setaffinity"):
        return None
    order = spread_cpus()
    if len(order) < workers:
        return None
    return order[:workers]


def pin_worker(queue: Any) -> None:
    """Pool initializer: take one CPU from ``queue`` and run on it alone. A worker that finds the
    queue empty (a replacement worker) stays unpinned."""
    try:
        cpu = queue.get(timeout=5)  # the parent filled it before the pool started
    except Exception:  # noqa: BLE001 - an empty queue: leave this worker to the scheduler
        return
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass
