"""The machine's own scaling ceiling: the same CPU-bound work run as 1, 2, ..., N independent
processes at once. Each process does a fixed amount of work; the slowdown of one process when N run
together is what no build can beat (shared caches and memory bandwidth, a lower all-core clock,
hyperthread siblings, other tenants of a virtual machine). A build's speed-up with N workers is at
most N / (that slowdown).

Workloads (``--work``):
  loop      a fixed pure-Python loop (integer arithmetic, a dict and a list): the interpreter alone
  pipeline  the real build chain (rules extractor, localize, generate) on the first ``--studies``
            synthetic studies, as a shard does it (prior scene graph of the same patient), nothing
            written: the work of a build's shard phase without its I/O

Processes are fresh interpreters (``subprocess``); each builds its pipeline first, says it is
ready, and all start the timed work at the same moment (a byte on their stdin), so set-up does not
overlap the measurement. ``--pin`` pins process i to the i-th CPU of a list that takes one CPU of
every physical core before any hyperthread sibling (``/sys/devices/system/cpu/*/topology``).

Prints the CPU topology, then one JSON row per (work, N): each process's wall and CPU seconds, the
mean slowdown against N = 1, the aggregate speed-up (N x wall(1) / slowest wall) and the load.

  python benchmarks/cpu_ceiling.py --procs 1,2,8,16 --work loop,pipeline
  python benchmarks/cpu_ceiling.py --procs 1,2 --work pipeline --studies 300 --pin
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def topology() -> dict[str, object]:
    """CPUs, physical cores and hyperthread sibling groups as Linux reports them (empty where /sys
    has no topology, e.g. not Linux)."""
    base = Path("/sys/devices/system/cpu")
    groups: dict[str, list[int]] = {}
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    for c in cpus:
        f = base / f"cpu{c}" / "topology" / "thread_siblings_list"
        try:
            key = f.read_text().strip()
        except OSError:
            key = str(c)
        groups.setdefault(key, []).append(c)
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": len(cpus), "physical_cores": len(groups), "sibling_groups": sorted(groups),
            "model": model}


def core_order() -> list[int]:
    """One CPU of each physical core first, then the second thread of each core, ...: the order in
    which to place processes so that two never share a core while a free core exists."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores: dict[str, list[int]] = {}
    for c in cpus:
        try:
            key = Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read_text().strip()
        except OSError:
            key = f"cpu{c}"  # no topology: its own core
        cores.setdefault(key, []).append(c)
    groups = sorted(cores.values())
    return [g[level] for level in range(max((len(g) for g in groups), default=0)) for g in groups if level < len(g)]


def _work_loop(n: int) -> int:
    d: dict[int, int] = {}
    acc = 0
    lst = list(range(64))
    for i in range(n):
        k = i & 1023
        d[k] = d.get(k, 0) + i
        acc = (acc + lst[i & 63] * k) % 1_000_003
    return acc + len(d)


def _child(work: str, amount: int, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    if work == "pipeline":
        from radvqa.run.builder import BuildOptions
        from radvqa.run.pipeline import make_pipeline
        from radvqa.sources.synthetic import SyntheticSource

        pipe = make_pipeline(BuildOptions(source="synthetic").worker_options())
        studies = [s for _, s in zip(range(amount), SyntheticSource(studies=amount, seed=0).iter_records())]
        import gc

        gc.set_threshold(100_000, 20, 10)  # as a shard runs (run/worker.py)

        def run() -> int:
            prior = None
            rows = 0
            for st in studies:
                if prior is not None and prior.patient_id != st.patient_id:
                    prior = None
                res = pipe.process(st, prior)
                rows += len(res.qa)
                prior = res.scene_graph
            return rows
    else:
        def run() -> int:
            return _work_loop(amount)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.buffer.read(1)
    c0, t0 = time.process_time(), time.perf_counter()
    r = run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    sys.stdout.write(json.dumps({"wall": wall, "cpu": cpu, "result": r, "cpu_now": os.sched_getaffinity(0) and
                                 _last_cpu()}) + "\n")
    sys.stdout.flush()


def _last_cpu() -> int | None:
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _steal() -> int:
    """Steal ticks of the whole machine (time the hypervisor gave our vCPUs to someone else)."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8])
    except (OSError, ValueError, IndexError):
        return 0


def measure(work: str, amount: int, n: int, pin: bool, cpu_set: list[int] | None = None) -> dict[str, object]:
    order = cpu_set or (core_order() if pin else [])
    procs = []
    for i in range(n):
        cpu = order[i % len(order)] if order else None
        cmd = [sys.executable, os.path.abspath(__file__), "--child", work, str(amount), "" if cpu is None else str(cpu)]
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE))
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != b"ready":
            raise SystemExit(f"a {work} process failed to start")
    s0 = _steal()
    load0 = os.getloadavg()[0]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(b"g")
        p.stdin.flush()
    rows = []
    for p in procs:
        assert p.stdout is not None
        rows.append(json.loads(p.stdout.readline()))
        p.wait()
    ticks = os.sysconf("SC_CLK_TCK")
    return {"walls": [round(r["wall"], 3) for r in rows], "cpus": [round(r["cpu"], 3) for r in rows],
            "last_cpu": [r["cpu_now"] for r in rows], "steal_s": round((_steal() - s0) / ticks, 2),
            "load_before": round(load0, 2), "result": rows[0]["result"]}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if sys.argv[4] else None)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", default="1,2,8,16", help="comma-separated process counts")
    ap.add_argument("--work", default="loop,pipeline", help="comma-separated workloads: loop, pipeline")
    ap.add_argument("--loop", type=int, default=20_000_000, help="loop iterations per process")
    ap.add_argument("--studies", type=int, default=400, help="pipeline: synthetic studies per process")
    ap.add_argument("--pin", action="store_true", help="pin process i to a distinct physical core first")
    ap.add_argument("--cpu-sets", default="",
                    help="';'-separated CPU lists, e.g. '0,1;0,8': one more run per list, one process pinned to each "
                         "CPU (are two CPUs hyperthreads of one host core?)")
    ap.add_argument("--each-cpu", action="store_true",
                    help="one more run per CPU, alone and pinned to it: is every CPU equally fast when idle?")
    a = ap.parse_args()
    print(json.dumps({"topology": topology(), "spread_order": core_order()}), flush=True)
    if a.each_cpu:
        work = a.work.split(",")[0]
        amount = a.loop if work == "loop" else a.studies
        walls = {c: measure(work, amount, 1, False, [c])["walls"][0] for c in sorted(os.sched_getaffinity(0))}
        fast = min(walls.values())
        print(json.dumps({"work": work, "amount": amount, "each_cpu_wall_s": walls,
                          "slowest_over_fastest": round(max(walls.values()) / fast, 3)}), flush=True)
    for spec in filter(None, a.cpu_sets.split(";")):
        cpus = [int(x) for x in spec.split(",")]
        work = a.work.split(",")[0]
        amount = a.loop if work == "loop" else a.studies
        m = measure(work, amount, len(cpus), False, cpus)
        print(json.dumps({"work": work, "amount": amount, "cpu_set": cpus, **m}), flush=True)
    for work in a.work.split(","):
        amount = a.loop if work == "loop" else a.studies
        base = cbase = None
        for n in (int(x) for x in a.procs.split(",")):
            m = measure(work, amount, n, a.pin)
            walls = m["walls"]
            assert isinstance(walls, list)
            mean = statistics.mean(walls)
            cpus = m["cpus"]
            assert isinstance(cpus, list)
            if base is None and n == 1:
                base, cbase = mean, statistics.mean(cpus)
            print(json.dumps({"work": work, "amount": amount, "procs": n, "pin": a.pin,
                              "mean_wall_s": round(mean, 3), "max_wall_s": round(max(walls), 3),
                              "mean_cpu_s": round(statistics.mean(cpus), 3),
                              "slowdown": round(mean / base, 3) if base else None,
                              "cpu_slowdown": round(statistics.mean(cpus) / cbase, 3) if cbase else None,
                              "speedup": round(n * base / max(walls), 2) if base else None, **m}), flush=True)


if __name__ == "__main__":
    main()
