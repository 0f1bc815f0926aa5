"""Scale figures of `radvqa build`: QA rows written per second and peak RSS of the whole process tree.

Modes (each prints one table row per run, and the command that reproduces it):

  writer     QA structs -> Arrow -> Parquet in one process: the columnar converter vs the
             list-of-dicts path (``Table.from_pylist``), rows/s.
  synthetic  ``build(synthetic, --studies N)`` for each N and worker count. ``--pipeline real`` runs
             the real chain (rules extractor on the synthetic report text, localize, generate);
             ``--pipeline minimal`` only the runner + writer (radvqa.run.minimal).
  openi      end to end from report text: the OpenI reports of ``--data`` (NLMCXR_reports.tgz) parsed
             once, then replicated with new study/patient ids up to N studies, through the real chain.

Peak RSS: the sum of VmRSS over this process and all its descendants, sampled every 0.1 s from /proc
(Linux). CPU seconds (this process + reaped workers) are printed too: on a shared machine wall time
depends on other load, CPU time much less. Targets (issue 6): >= 50,000 QA rows/s with 2 workers on a 2-core machine; peak RSS <= 2 GiB
and flat in N.

  python benchmarks/scale.py writer --rows 200000
  python benchmarks/scale.py synthetic --studies 10000,100000 --workers 1,2 --pipeline real
  python benchmarks/scale.py openi --studies 20000 --workers 2 --data ../shared/data/iu-xray

Measured 2026-11-26 on the shared 2-core dev VM (other jobs running; load average in each row):

  run (--pipeline real)            QA rows     wall s  rows/s   rows/CPU-s  peak RSS  load
  synthetic 10k,  1 worker            464,117    18.0   25,835     25,552    211 MiB   1.2
  synthetic 100k, 2 workers         4,682,941    78.7   59,514     32,202    521 MiB   1.7
  openi 200k (replicated), 2 wkrs  10,858,950   252.6   42,997     33,984    505 MiB   2.3
  writer only (to_parquet, zstd)      200,020     1.2  172,961          -          -     1.2

Before this round (same VM): synthetic 10k 1 worker 21,932 rows/CPU-s; 20k 2 workers ~18,900.
Gains: gen-0 GC threshold raised inside shards and the read phase (GC was ~15% of CPU), workers
forked from a fork server that built the pipeline once (-2 CPU-s per build and per-worker start),
C-level counting and column extraction; the rest came with generator changes made meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree_rss(root: int) -> int:
    kids = _children()
    todo, total = [root], 0
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
        todo.extend(kids.get(p, []))
    return total


class PeakRSS:
    def __init__(self, interval: float = 0.1) -> None:
        self.peak = 0
        self.interval = interval
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(me))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, tree_rss(os.getpid()))


def _cpu() -> float:
    """User + system CPU seconds of this process and its reaped children (the worker pool).
    On a shared machine wall time depends on other load; CPU time much less."""
    import resource

    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _row(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def bench_writer(rows: int) -> None:
    from radvqa.io.parquet import ShardWriter
    from radvqa.io.schema import codec
    from radvqa.run.minimal import MinimalPipeline
    from radvqa.sources.synthetic import SyntheticSource

    # realistic QA rows: from the minimal chain over synthetic studies (boxes, answer parts)
    pipe = MinimalPipeline({"seed": 0, "minimal_qa_per_finding": 6})
    qas = []
    for st in SyntheticSource(studies=100_000, seed=0).iter_records():
        qas.extend(pipe.process(st, None).qa)
        if len(qas) >= 20_000:
            break
    base = qas
    c = codec("qa")
    for name, fn in (("columnar", c.to_table), ("pylist", c.to_table_pylist)):
        t0 = time.perf_counter()
        n = 0
        while n < rows:
            fn(base)
            n += len(base)
        dt = time.perf_counter() - t0
        _row(mode="writer", step=f"to_arrow:{name}", rows=n, seconds=round(dt, 3), rows_per_s=round(n / dt))
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        n = 0
        with ShardWriter(Path(d) / "qa" / "part-00000.parquet", "qa") as w:
            while n < rows:
                w.extend(base)
                n += len(base)
        dt = time.perf_counter() - t0
        size = (Path(d) / "qa" / "part-00000.parquet").stat().st_size
        _row(mode="writer", step="to_parquet(zstd, columnar)", rows=n, seconds=round(dt, 3), rows_per_s=round(n / dt),
             bytes_per_row=round(size / n, 1))


def openi_records(data: Path, n: int) -> Iterator[object]:
    """OpenI studies parsed once, then replicated (new study and patient ids) up to n studies."""
    from radvqa.model import Reject, Study
    from radvqa.sources import get_source

    tgz = data / "NLMCXR_reports.tgz"
    base = [r for r in get_source("openi").iter_records([tgz]) if isinstance(r, Study)]
    if not base:
        raise SystemExit(f"no OpenI studies read from {tgz}")
    made = 0
    k = 0
    while made < n:
        for s in base:
            if made >= n:
                return
            if k == 0:
                yield s
            else:
                yield Study(id=f"{s.id}~r{k}", patient_id=f"{s.patient_id}~r{k}", source=s.source, images=s.images,
                            report_text=s.report_text, labels=s.labels, boxes=s.boxes, region_boxes=s.region_boxes,
                            split=s.split, study_time=s.study_time, meta=s.meta)
            made += 1
        k += 1
    _ = Reject


def bench_build(mode: str, studies: list[int], workers: list[int], pipeline: str, data: Path, keep: bool,
                shard_studies: int) -> None:
    from radvqa.run.builder import BuildOptions, build
    from radvqa.sources.synthetic import SyntheticSource

    for n in studies:
        for w in workers:
            out = Path(tempfile.mkdtemp(prefix=f"radvqa-scale-{mode}-{n}-{w}-"))
            opts = BuildOptions(source="synthetic" if mode == "synthetic" else "openi", out=str(out), workers=w,
                                studies=n if mode == "synthetic" else None, shard_studies=shard_studies,
                                pipeline="radvqa.run.minimal:MinimalPipeline" if pipeline == "minimal" else None)
            recs = openi_records(data, n) if mode == "openi" else None
            if mode == "synthetic" and pipeline == "minimal":
                recs = SyntheticSource(studies=n, seed=0).iter_records()
            t0 = time.perf_counter()
            c0 = _cpu()
            with PeakRSS() as rss:
                m = build(opts, records=recs)
            wall = time.perf_counter() - t0
            cpu = _cpu() - c0
            c = m["counts"]
            cmd = (f"python benchmarks/scale.py {mode} --studies {n} --workers {w} --pipeline {pipeline}"
                   + (f" --data {data}" if mode == "openi" else ""))
            _row(mode=mode, pipeline=pipeline, studies=n, workers=w, qa_rows=c["qa_rows"], studies_out=c["studies_out"],
                 wall_s=round(wall, 2), qa_rows_per_s=round(c["qa_rows"] / wall), cpu_s=round(cpu, 2),
                 qa_rows_per_cpu_s=round(c["qa_rows"] / cpu) if cpu else None,
                 load_avg_1m=round(os.getloadavg()[0], 2), studies_per_s=round(n / wall, 1),
                 peak_rss_mib=round(rss.peak / 2**20), timings=m["timings"], cpus=os.cpu_count(), command=cmd)
            if not keep:
                shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("writer", "synthetic", "openi"))
    ap.add_argument("--rows", type=int, default=200_000, help="writer: rows to convert/write")
    ap.add_argument("--studies", default="10000", help="comma-separated study counts")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--pipeline", choices=("real", "minimal"), default="real")
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "iu-xray")
    ap.add_argument("--shard-studies", type=int, default=2000)
    ap.add_argument("--keep", action="store_true", help="keep the output folders")
    a = ap.parse_args()
    if a.mode == "writer":
        bench_writer(a.rows)
        return
    bench_build(a.mode, [int(x) for x in a.studies.split(",")], [int(x) for x in a.workers.split(",")], a.pipeline,
                a.data.resolve(), a.keep, a.shard_studies)


if __name__ == "__main__":
    sys.exit(main())
