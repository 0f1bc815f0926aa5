"""Scoring throughput: N predictions of mixed types (yes/no, multiple choice, counts, open,
grounding with 1-3 boxes, some missing / unparsable / boxes in <box> tags), scored on one
core by the same code path as ``radvqa eval`` (load + join + parse + score + aggregate +
bootstrap CIs; report files not written). Target (issue 7): 1,000,000 in under 30 s; peak
RSS is printed (memory must stay bounded: compact per-question columns, see eval/README.md).
``--partitions N`` scores by N hash partitions (eval/stream.py; 0: one per 125,000 rows),
``--workers W`` in W processes; without --partitions evaluate() decides (in memory up to
1,000,000 rows). The fixture is built by a child process (not counted in the RSS figures).

    .venv/bin/python benchmarks/eval_scale.py [--n 1000000] [--partitions 0] [--workers 1]
"""

from __future__ import annotations

import os

# one core: no thread pools in Arrow / BLAS, so CPU time is one core's time
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import json
import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


BATCH = 100_000


def build(workdir: Path, n: int, seed: int = 0, unique: float = 0.5, jobs: int = 1) -> tuple[Path, Path]:
    """The fixture: parquet parts of BATCH rows and the predictions JSONL; each batch has its own
    seeded generator, so ``jobs`` processes build the same files as one."""
    ds = workdir / f"ds-{n}-u{unique}-v2"
    preds = workdir / f"preds-{n}-u{unique}-v2.jsonl"
    if (ds / "qa").is_dir() and preds.is_file():
        return ds, preds
    (ds / "qa").mkdir(parents=True, exist_ok=True)
    args = [(ds, preds, n, seed, unique, k) for k in range(-(-n // BATCH))]
    if jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(jobs) as pool:
            pool.map(_batch, args)
    else:
        for x in args:
            _batch(x)
    tmp = Path(str(preds) + ".tmp")
    with open(tmp, "wb") as out:
        for x in args:
            part = Path(f"{preds}.{x[-1]:05d}")
            out.write(part.read_bytes())
            part.unlink()
    tmp.rename(preds)
    return ds, preds


def _batch(x: tuple) -> None:
    from radvqa.io.schema import qa_schema

    ds, preds, n, seed, unique, part = x
    rng = random.Random(seed * 1_000_003 + part)
    schema = qa_schema()
    findings = ["pleural_effusion", "pneumothorax", "nodule", "cardiomegaly", "consolidation", "atelectasis"]
    choices = ["pleural effusion", "pneumothorax", "nodule", "no finding"]
    yes_no_ans = ["Yes.", "No.", "Yes, there is a small effusion.", "There is no pneumothorax.", "Normal study.",
                  "I'm sorry, I cannot see the image.", "It may be present.", "No evidence of it."]
    mc_ans = ["B", "(C)", "Option A", "The answer is D.", "pneumothorax", "I cannot tell.", "The lungs are clear."]
    open_ans = ["Small left pleural effusion.", "No acute cardiopulmonary process.", "Right lower lobe consolidation.",
                "Cardiomegaly with mild edema."]
    fh = open(f"{preds}.{part:05d}", "w")
    start = part * BATCH
    cols: dict[str, list] = {f.name: [] for f in schema}
    for i in range(start, min(n, start + BATCH)):
        k = i % 5
        qid = f"q{i:08d}"
        f = findings[i % len(findings)]
        row = dict(qa_id=qid, source="synthetic", split="test", patient_id=f"p{i // 50}", study_id=f"s{i // 10}",
                   strategy=("qba", "vindr", "rin", "diff")[i % 4], question_type="", template_id="", template_version=1,
                   question="", answer="", image_ids=[f"i{i // 10}"], image_paths=[], answer_short=None, choices=None,
                   polarity=None, findings=[f], regions=["left_lung"], answer_parts=[], boxes=[], grade="A",
                   grade_reasons=[], provenance=[], modality="CR", reference_study_id=None, reasoning=None)
        p: dict = {"qa_id": qid}
        if k == 0:
            row.update(question_type="D02_has_finding", template_id="qba.D02", question=f"Is there {f}?",
                       answer="Yes.", answer_short=rng.choice(["yes", "no"]), polarity=rng.choice(["positive", "negative"]))
            p["prediction"] = rng.choice(yes_no_ans)
        elif k == 1:
            row.update(question_type="pathology_mc", template_id="rin.mc", question="Which finding?", answer="B",
                       answer_short=rng.choice("ABCD"), choices=choices)
            p["prediction"] = rng.choice(mc_ans)
        elif k == 2:
            row.update(question_type="how_many", template_id="vindr.how_many", question="How many?", answer="2", answer_short=str(rng.randint(0, 3)))
            p["prediction"] = rng.choice(["2", "There are two.", "none", "several"])
        elif k == 3:
            row.update(question_type="B01_describe_all", template_id="qba.B01", question="Describe.", answer=rng.choice(open_ans))
            p["prediction"] = rng.choice(open_ans)
        else:
            nb = rng.randint(0, 3)
            gold = []
            for _ in range(nb):
                x, y = rng.uniform(0, 800), rng.uniform(0, 800)
                gold.append({"image_id": f"i{i // 10}", "x1": x, "y1": y, "x2": x + rng.uniform(20, 200), "y2": y + rng.uniform(20, 200),
                             "source": "expert", "reader": None, "label": f})
            row.update(question_type="where", template_id="vindr.where", question=f"Where is {f}?", answer="Left upper zone.", boxes=gold)
            p["prediction"] = "Left upper zone."
            r = rng.random()
            if r < 0.6 and gold:
                p["boxes"] = [[b["x1"] + rng.uniform(-20, 20), b["y1"] + rng.uniform(-20, 20), b["x2"], b["y2"]] for b in gold]
            elif r < 0.8:
                p["prediction"] = "Here <box>(100,120),(300,340)</box>"
                p["image_size"] = [1024, 1024]
        for c in cols:
            cols[c].append(row[c])
        if "prediction" in p and rng.random() < unique:
            # a distinct string per question, so parsing cannot be served from the
            # parse cache (real model outputs repeat, but not all of them)
            p["prediction"] = p["prediction"] + f" (seen on image {i}, series {i % 97})"
        if rng.random() >= 0.01:  # 1% of questions get no prediction (scored wrong)
            fh.write(json.dumps(p) + "\n")
    pq.write_table(pa.Table.from_pydict(cols, schema=schema), ds / "qa" / f"part-{part:05d}.parquet")
    fh.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--workdir", default=os.environ.get("TMPDIR", "/tmp") + "/radvqa-eval-scale")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--unique", type=float, default=0.5, help="share of predictions made distinct strings")
    ap.add_argument("--partitions", type=int, default=None, help="score by N hash partitions (0: ~125,000 rows each)")
    ap.add_argument("--workers", type=int, default=1, help="processes scoring partitions")
    ap.add_argument("--in-memory", action="store_true", help="the in-memory scorer whatever the size (the pre-streaming path)")
    ap.add_argument("--jobs", type=int, default=1, help="processes building the fixture")
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    if a.build_only:
        build(wd, a.n, unique=a.unique, jobs=a.jobs)
        return
    import subprocess
    import sys

    # built apart: the fixture's own memory is not the scorer's
    subprocess.run([sys.executable, __file__, "--build-only", "--n", str(a.n), "--workdir", str(wd), "--unique", str(a.unique),
                    "--jobs", str(a.jobs)], check=True)
    ds, preds = build(wd, a.n, unique=a.unique)
    print(f"fixture: {ds} ({time.perf_counter() - t:.1f} s to build or reuse)")
    from radvqa.eval import stream
    from radvqa.eval.evaluate import evaluate

    if a.in_memory:
        stream.STREAM_ABOVE = 1 << 62

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    t0 = time.perf_counter()
    c0 = time.process_time()
    rep = evaluate(ds, preds, bootstrap=a.bootstrap, audit=False, partitions=a.partitions, workers=a.workers)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    o = rep["overall"]
    print(f"questions: {o['n']:,}  (missing predictions {rep['predictions']['missing']:,}; {100 * a.unique:.0f}% distinct answer strings)")
    print(f"closed: n={o['closed']['n']:,} acc={o['closed']['accuracy']:.4f}  open: n={o['open']['n']:,} F1={o['open']['token_f1']:.4f}")
    g = rep["grounding"]["positive_questions"]
    print(f"grounding positives: n={g['n']:,} mean IoU={g['mean_iou']:.4f}")
    print(f"timings: {rep['timings_s']}")
    print(f"scored {o['n']:,} predictions in {wall:.1f} s wall, {cpu:.1f} s CPU (one process, one thread; "
          f"target < 30 s for 1,000,000; wall exceeds CPU only when other processes share the core)")
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS: {peak / 1024:.0f} MB ({peak * 1024 / o['n']:.0f} bytes a question)")
    if a.workers > 1 and "scoring_process_peak_rss_mb" in rep["timings_s"]:
        w = rep["timings_s"]["scoring_process_peak_rss_mb"]
        print(f"  worker processes: {w} MB peak each, {a.workers} at once: parent + workers <= {peak / 1024 + a.workers * w:.0f} MB")
    print(f"load average now: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
