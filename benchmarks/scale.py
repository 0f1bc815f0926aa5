"""Scale figures of `radvqa build`: QA rows written per second and peak RSS of the whole process tree.

Modes (each prints one table row per run, and the command that reproduces it):

  writer     QA structs -> Arrow -> Parquet in one process: the columnar converter vs the
             list-of-dicts path (``Table.from_pylist``), rows/s.
  synthetic  ``build(synthetic, --studies N)`` for each N and worker count. ``--pipeline real`` runs
             the real chain (rules extractor on the synthetic report text, localize, generate);
             ``--pipeline minimal`` only the runner + writer (radvqa.run.minimal).
  openi      end to end from report text: the OpenI reports of ``--data`` (NLMCXR_reports.tgz)
             replicated with new study/patient ids up to N studies (radvqa.sources.replicate, split
             into position ranges read by the workers), through the real chain.
  source     any registered source on its own inputs (``--source nih-cxr14 --input FILE ...``),
             e.g. a table source (NIH-14's Data_Entry is read in row ranges by the workers;
             the other table sources are read whole by one worker: docs/scale-out.md).

Memory: a separate process (``--sample-rss``, not a thread of the build: it takes none of the
build's GIL or CPU) samples every 0.1 s the sum of VmRSS and of PSS (``smaps_rollup``, where it
exists) over this process and all its descendants; each row prints the peaks over the whole run,
the read phase and the shard phase. The RSS sum counts pages shared by forked workers once per
process, the PSS sum once in all. Each row also prints the read / shard / finish seconds and the
serial part (wall time outside the executor) and its share of the wall time. CPU seconds (this
process + reaped workers) are printed too: on a shared machine wall time depends on other load.
With more than one worker, ``tail`` says how the shard phase ended: each worker's last shard back
against the last of all (``tail_s``, ``idle_share`` of the workers' time, ``last_s`` per worker).
16-core figures: docs/scale-out.md.

  python benchmarks/scale.py writer --rows 200000
  python benchmarks/scale.py synthetic --studies 10000,100000 --workers 1,2 --pipeline real
  python benchmarks/scale.py openi --studies 20000 --workers 2 --data ../shared/data/iu-xray
  python benchmarks/scale.py synthetic --studies 200000 --workers 1,2,16 --digest   # 16 cores
  python benchmarks/scale.py source --source nih-cxr14 --workers 1,16 --digest \
      --input ../shared/data/nih-cxr14/Data_Entry_2017_v2020.csv.gz --input ../shared/data/nih-cxr14/BBox_List_2017.csv

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
import time
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


def _pss(pid: int) -> int | None:
    """Proportional set size (shared pages divided among the processes sharing them), or None
    where /proc/PID/smaps_rollup does not exist."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_memory(root: int, skip: int) -> tuple[int, int | None, int, int, int]:
    """(sum of RSS, sum of PSS or None, number of processes, largest RSS and largest PSS of one
    process other than ``root``: a worker or the fork server) over ``root`` and its descendants,
    leaving out ``skip`` (the sampler itself). The RSS sum counts pages that forked workers share
    with their fork server once per process; PSS counts each page once in all."""
    kids = _children()
    todo, rss, pss, n = [root], 0, 0, 0
    one_rss = one_pss = 0
    have_pss = True
    while todo:
        p = todo.pop()
        if p == skip:
            continue
        try:
            with open(f"/proc/{p}/statm") as f:
                r = int(f.read().split()[1]) * PAGE
            rss += r
            n += 1
            if p != root:
                one_rss = max(one_rss, r)
        except (OSError, ValueError, IndexError):
            pass
        if have_pss:
            v = _pss(p)
            if v is None:
                have_pss = False
            else:
                pss += v
                if p != root:
                    one_pss = max(one_pss, v)
        todo.extend(kids.get(p, []))
    return rss, (pss if have_pss else None), n, one_rss, one_pss


def _sampler_main(root: int, out: str, interval: float) -> None:
    """Runs in its own process (not a thread of the build, so it takes none of the build's GIL or
    CPU accounting): samples the build's process tree until stdin closes, writing one line per
    sample (time, rss, pss, processes)."""
    import select

    me = os.getpid()
    with open(out, "w") as f:
        while True:
            rss, pss, n, one_rss, one_pss = tree_memory(root, me)
            f.write(f"{time.time():.3f} {rss} {pss if pss is not None else -1} {n} {one_rss} {one_pss}\n")
            f.flush()
            r, _, _ = select.select([sys.stdin], [], [], interval)
            if r and not sys.stdin.buffer.read1(1):
                return


class PeakRSS:
    """Peak memory of this process tree, sampled by a separate process (``_sampler_main``)."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.samples: list[tuple[float, int, int | None, int, int, int]] = []
        self._file = tempfile.NamedTemporaryFile(prefix="radvqa-rss-", suffix=".txt", delete=False).name

    def __enter__(self) -> PeakRSS:
        import subprocess

        self._p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--sample-rss", str(os.getpid()),
                                    self._file, str(self.interval)], stdin=subprocess.PIPE)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._p.stdin is not None
        self._p.stdin.close()
        self._p.wait(timeout=30)
        with open(self._file) as f:
            for line in f:
                t, rss, pss, n, one_rss, one_pss = line.split()
                self.samples.append((float(t), int(rss), None if pss == "-1" else int(pss), int(n),
                                     int(one_rss), int(one_pss)))
        os.unlink(self._file)

    def peak(self, t0: float = 0.0, t1: float = float("inf")) -> dict[str, int | None]:
        """Peak RSS sum, peak PSS sum (MiB), most processes, and the largest RSS / PSS of one child
        process (a worker or the fork server), between wall-clock times t0 and t1."""
        win = [s for s in self.samples if t0 <= s[0] <= t1] or self.samples[-1:]
        pss = [s[2] for s in win if s[2] is not None]
        return {"rss_mib": round(max((s[1] for s in win), default=0) / 2**20),
                "pss_mib": round(max(pss) / 2**20) if pss else None,
                "procs": max((s[3] for s in win), default=0),
                "one_child_rss_mib": round(max((s[4] for s in win), default=0) / 2**20),
                "one_child_pss_mib": round(max((s[5] for s in win), default=0) / 2**20) if pss else None}


class PhaseClock:
    """A build Progress that notes when each phase starts (wall clock, for the memory windows) and
    when each shard's result came back and from which worker (for the tail: ``tail``)."""

    def __init__(self) -> None:
        self.starts: dict[str, float] = {}
        self.shards: list[tuple[float, int, int]] = []  # (time back, worker pid, shard)
        self.shard_timings: list[dict[str, float]] = []  # each shard's own wall / CPU seconds
        self.parts: list[tuple[float, int, int, float]] = []  # read parts: (time back, pid, part, seconds)

    def phase(self, name: str, total: int | None = None) -> None:
        self.starts.setdefault(name, time.time())

    def advance(self, n: int = 1) -> None: ...

    def shard_done(self, stats: object) -> None:
        self.shards.append((time.time(), int(getattr(stats, "pid", 0)), int(getattr(stats, "shard", -1))))
        self.shard_timings.append(dict(getattr(stats, "timings", {}) or {}))

    def part_done(self, stats: object) -> None:
        self.parts.append((time.time(), int(getattr(stats, "pid", 0)), int(getattr(stats, "part", -1)),
                           float(getattr(stats, "seconds", 0.0))))

    def studies_done(self, shard: int, n: int) -> None: ...
    def message(self, text: str) -> None: ...


def tail(shards: list[tuple[float, int, int]], t0: float, workers: int) -> dict[str, object] | None:
    """How the shard phase ended: each worker's last shard back, against the last one of all.
    ``tail_s``: from the first worker to run out of shards to the end of the phase; ``idle_share``:
    the worker-seconds spent idle after a worker's last shard, over workers x the phase's wall
    time (0 = all finished together); ``last_s``: seconds from each worker's last result to the
    end, sorted; ``order``: the shard indices in the order they came back (first and last few)."""
    if workers < 2 or not shards:
        return None
    end = max(t for t, _, _ in shards)
    last: dict[int, float] = {}
    for t, pid, _ in shards:
        last[pid] = max(last.get(pid, 0.0), t)
    gaps = sorted(round(end - t, 2) for t in last.values())
    gaps += [round(end - t0, 2)] * max(0, workers - len(gaps))  # a worker that ran no shard idled all along
    wall = max(end - t0, 1e-9)
    order = [k for _, _, k in sorted(shards)]
    return {"tail_s": max(gaps), "idle_share": round(sum(gaps) / (workers * wall), 3), "last_s": gaps,
            "shards_per_worker": round(len(shards) / workers, 1), "order": order[:4] + ["..."] + order[-4:]}


def _timeline(path: Path, clock: PhaseClock, t0: float, t1: float, rss: PeakRSS) -> None:
    """One run's timeline as JSON (seconds from the build's start): phase starts, every shard's
    return (worker pid, shard, its own wall and CPU seconds) and the memory samples, to see where a
    many-worker build waits (``--timeline DIR``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shards = [{"t": round(t - t0, 3), "pid": pid, "shard": k, "wall": round(tm.get("wall", 0.0), 3),
               "cpu": round(tm.get("total", 0.0), 3)}
              for (t, pid, k), tm in zip(clock.shards, clock.shard_timings)]
    path.write_text(json.dumps({"wall": round(t1 - t0, 3),
                                "phases": {k: round(v - t0, 3) for k, v in clock.starts.items()},
                                "parts": [{"t": round(t - t0, 3), "pid": pid, "part": k, "seconds": sec}
                                          for t, pid, k, sec in clock.parts],
                                "shards": shards,
                                "memory": [(round(s[0] - t0, 2), s[1] >> 20, s[3]) for s in rss.samples]}))


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


def _digest(out: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in [*sorted((out / "qa").glob("*.parquet")), *sorted((out / "scene_graphs").glob("*.parquet")),
              out / "rejected.jsonl"]:
        h.update(f.relative_to(out).as_posix().encode())
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()[:16]


def bench_build(mode: str, studies: list[int], workers: list[int], pipeline: str, data: Path, keep: bool,
                shard_studies: int, digest: bool = False, source_name: str | None = None, source_inputs: list[str] | None = None,
                timeline: Path | None = None) -> None:
    from radvqa.run.builder import BuildOptions, build

    for n in studies:
        for w in workers:
            out = Path(tempfile.mkdtemp(prefix=f"radvqa-scale-{mode}-{n}-{w}-"))
            if mode == "openi":
                # the OpenI reports replicated with new ids up to n studies, read by the workers
                source, inputs = "radvqa.sources.replicate:ReplicatedOpenI", [str(data / "NLMCXR_reports.tgz")]
            elif mode == "source":
                source, inputs = str(source_name), [str(Path(x).resolve()) for x in source_inputs or []]
            else:
                source, inputs = "synthetic", []
            opts = BuildOptions(source=source, inputs=inputs, out=str(out), workers=w, studies=None if mode == "source" else n,
                                shard_studies=shard_studies,
                                pipeline="radvqa.run.minimal:MinimalPipeline" if pipeline == "minimal" else None)
            clock = PhaseClock()
            t0 = time.perf_counter()
            c0 = _cpu()
            with PeakRSS() as rss:
                tw0 = time.time()
                m = build(opts, progress=clock)  # type: ignore[arg-type]
                tw1 = time.time()
            wall = time.perf_counter() - t0
            cpu = _cpu() - c0
            c = m["counts"]
            t = m["timings"]
            t_sh = clock.starts.get("building shards", tw1)
            t_fin = clock.starts.get("writing manifest and card", tw1)
            serial = wall - float(t.get("read_parallel", 0.0)) - float(t["shards"])
            cmd = (f"python benchmarks/scale.py {mode} --studies {n} --workers {w} --pipeline {pipeline}"
                   + (f" --data {data}" if mode == "openi" else "")
                   + (f" --source {source}" + "".join(f" --input {x}" for x in inputs) if mode == "source" else ""))
            _row(mode=mode, pipeline=pipeline, studies=n, workers=w, qa_rows=c["qa_rows"], studies_out=c["studies_out"],
                 wall_s=round(wall, 2), qa_rows_per_s=round(c["qa_rows"] / wall), cpu_s=round(cpu, 2),
                 qa_rows_per_cpu_s=round(c["qa_rows"] / cpu) if cpu else None,
                 read_s=t["read_sources"], read_parts=t.get("read_parts"), shards_s=t["shards"],
                 finish_s=t.get("finish"), serial_s=round(serial, 2), serial_frac=round(serial / wall, 3),
                 tail=tail(clock.shards, t_sh, w), peak_all=rss.peak(), peak_read=rss.peak(tw0, t_sh), peak_shards=rss.peak(t_sh, t_fin),
                 load_avg_1m=round(os.getloadavg()[0], 2), studies_per_s=round((c["studies_out"] if mode == "source" else n) / wall, 1),
                 timings=t, cpus=os.cpu_count(), digest=_digest(out) if digest else None, command=cmd)
            if timeline is not None:
                _timeline(timeline / f"{mode}-{n}-{w}.json", clock, tw0, tw1, rss)
            if not keep:
                shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--sample-rss":
        _sampler_main(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("writer", "synthetic", "openi", "source"))
    ap.add_argument("--source", help="source: registry name (e.g. nih-cxr14)")
    ap.add_argument("--input", action="append", default=[], help="source: an input file or folder (repeatable)")
    ap.add_argument("--rows", type=int, default=200_000, help="writer: rows to convert/write")
    ap.add_argument("--studies", default="10000", help="comma-separated study counts")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--pipeline", choices=("real", "minimal"), default="real")
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "iu-xray")
    # the build's own default (run.shards.DEFAULT_SHARD_STUDIES), so a benchmark runs what users run
    ap.add_argument("--shard-studies", type=int, default=None, help="studies per shard (default: the build's)")
    ap.add_argument("--timeline", type=Path, default=None,
                    help="write each run's timeline (phases, shard returns, memory samples) as JSON into this folder")
    ap.add_argument("--keep", action="store_true", help="keep the output folders")
    ap.add_argument("--digest", action="store_true",
                    help="print a SHA-256 over the shard files and rejected.jsonl (equal for any worker count)")
    a = ap.parse_args()
    from radvqa.run.shards import DEFAULT_SHARD_STUDIES

    if a.mode == "writer":
        bench_writer(a.rows)
        return
    bench_build(a.mode, [int(x) for x in a.studies.split(",")], [int(x) for x in a.workers.split(",")], a.pipeline,
                a.data.resolve(), a.keep, a.shard_studies or DEFAULT_SHARD_STUDIES, a.digest, a.source, a.input,
                a.timeline)


if __name__ == "__main__":
    sys.exit(main())
