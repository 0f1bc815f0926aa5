"""QA generation throughput on synthetic scene graphs (one process).

    .venv/bin/python benchmarks/generate.py [--studies 2000] [--strategies qba,vindr,rin,diff]
    .venv/bin/python benchmarks/generate.py --scene-graphs OUT_DIR [--profile 25] [--digest]

Builds typical scene graphs from the packaged ontology: chest X-ray report studies (2 images,
region boxes on the frontal one, 3-9 observations: positives with regions / severities, negatives,
a device), box-labelled NIH/VinDr-style images (3 readers + fused box), follow-up pairs of a
patient (diff) and RadImageNet-style CT/MR images, then times ``Generator.generate`` alone and prints
QA rows per second. Target (issue 5): >= 40,000 QA/s per process.

``--scene-graphs DIR`` times the generator on the scene graphs of a finished build instead
(``DIR/scene_graphs/*.parquet``, e.g. from ``radvqa build synthetic --studies 3000 --out DIR`` or
``radvqa build openi ...``): realistic graphs from the real chain, each study paired with its
patient's previous study as the runner does. ``--profile N`` prints the N costliest functions
(cProfile, one pass); ``--digest`` prints a hash of every generated row (msgspec JSON), so a speed
change can be checked to leave the output byte-identical; ``--hold 10000`` keeps rows alive as
the writer's row-group buffer does, which is where Python's cyclic GC makes a difference. The
GC threshold is set as the build runner sets it per shard (``run.worker.GC_THRESHOLD``), so the
figure is what real builds spend.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter

from radvqa.generate import GenerateOptions, Generator
from radvqa.model import Box, Image, Indication, Observation, Report, SceneGraph, Sentence, Span


def _findings(onto):
    chest = [f for f in sorted(onto.findings) if not onto.findings[f].anatomies
             and onto.findings[f].category in ("ANATOMICAL_FINDING", "DISEASE") and onto.findings[f].abnormal]
    devices = [f for f in sorted(onto.findings) if onto.findings[f].category == "DEVICE"]
    return chest, devices


def report_sg(i: int, onto, rng: random.Random, chest, devices, regions, time_: str = "1",
              patient: str | None = None) -> SceneGraph:
    sid = f"synthetic:r{i}:{time_}"
    img = f"{sid}/f"
    rboxes = []
    for k, r in enumerate(regions):
        x = 50 + (k * 37) % 600
        y = 50 + (k * 53) % 600
        rboxes.append(Box(image_id=img, x1=x, y1=y, x2=x + 200, y2=y + 180, source="region", label=r))
    rb = {b.label: b for b in rboxes}
    obs = []
    sents = []
    text = ""
    npos = rng.randint(0, 4)
    nneg = rng.randint(2, 4)
    picks = rng.sample(chest, npos + nneg)
    for k, fid in enumerate(picks):
        f = onto.findings[fid]
        pos = k < npos
        reg = [r for r in f.default_regions if r in rb][:1] if rng.random() < 0.7 else []
        sev = f.severities[rng.randrange(len(f.severities))] if (pos and f.severities and rng.random() < 0.5) else None
        s = f"{'There is' if pos else 'No'} {f.name}."
        sents.append(Sentence(id=f"S{k + 1:02d}", section="FINDINGS", start=len(text), end=len(text) + len(s), text=s))
        obs.append(Observation(id=f"O{k + 1:02d}", finding=fid, certainty="present" if pos else "absent",
                               laterality=rng.choice([None, "left", "right"]) if f.lateralised else None,
                               regions=reg, severity=sev, boxes=[rb[r] for r in reg],
                               evidence=[Span(start=len(text), end=len(text) + len(s), text=s,
                                              sentence_id=f"S{k + 1:02d}")]))
        text += s + " "
    if rng.random() < 0.4:
        d = rng.choice(devices)
        obs.append(Observation(id="O90", finding=d, regions=[r for r in onto.findings[d].default_regions if r in rb][:1]))
    return SceneGraph(study_id=sid, patient_id=patient or f"synthetic:p{i}", source="synthetic",
                      images=[Image(id=img, width=1000, height=1000, view="PA"),
                              Image(id=f"{sid}/l", width=1000, height=1000, view="LATERAL")],
                      report=Report(text=text, sentences=sents), observations=obs, region_boxes=rboxes,
                      indication=Indication(text="Cough", evaluate=[picks[0]]), study_time=time_)


def box_sg(i: int, rng: random.Random, classes) -> SceneGraph:
    sid = f"vindr-cxr:b{i}"
    obs = []
    for k, fid in enumerate(rng.sample(classes, rng.randint(0, 3))):
        x, y = rng.randint(0, 700), rng.randint(0, 700)
        boxes = [Box(image_id=sid, x1=x + r, y1=y + r, x2=x + 150 + r, y2=y + 120 + r, source="expert",
                     reader=f"R{r}", label=fid) for r in range(3)]
        boxes.append(Box(image_id=sid, x1=x + 1, y1=y + 1, x2=x + 151, y2=y + 121, source="expert_fused", label=fid))
        obs.append(Observation(id=f"O{k}", finding=fid, source="label", from_report=False, boxes=boxes))
    return SceneGraph(study_id=sid, patient_id=sid, source="vindr-cxr",
                      images=[Image(id=sid, width=1024, height=1024, view="PA")], observations=obs)


def rin_sg(i: int, rng: random.Random, onto) -> SceneGraph:
    anat = sorted(a for a in {a for f in onto.findings.values() for a in f.anatomies})
    a = anat[i % len(anat)] if anat else "knee"
    paths = [f.id for f in onto.findings.values() if a in f.anatomies and f.abnormal]
    fid = rng.choice(paths) if paths and rng.random() < 0.7 else None
    sid = f"radimagenet:{i}"
    return SceneGraph(study_id=sid, patient_id=sid, source="radimagenet", anatomy=a, modality="MR",
                      images=[Image(id=sid, width=256, height=256, modality="MR")],
                      observations=[Observation(id="O1", finding=fid, source="label")] if fid else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=2000)
    ap.add_argument("--strategies", default="qba,vindr,rin,diff")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scene-graphs", metavar="DIR", default=None,
                    help="time generation over the scene graphs of a finished build (DIR/scene_graphs)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="print the N costliest functions of one pass (cProfile)")
    ap.add_argument("--digest", action="store_true", help="print a hash of all generated rows")
    ap.add_argument("--hold", type=int, default=0, metavar="ROWS",
                    help="keep the last ROWS rows alive, as the writer's row-group buffer does in a real "
                         "build (10000): the cyclic GC then costs far more per row")
    args = ap.parse_args(argv)
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    if args.scene_graphs:
        pairs0 = _pairs_from_build(args.scene_graphs)
        return _time(onto, pairs0, args)
    rng = random.Random(0)
    chest, devices = _findings(onto)
    regions = [r for r in sorted(onto.regions) if onto.regions[r].boxable][:30]
    classes = [f for fids in onto.schemes["vindr"].labels.values() for f in fids]
    pairs: list[tuple[SceneGraph, SceneGraph | None]] = []
    for i in range(args.studies):
        kind = i % 4
        if kind in (0, 1):
            pairs.append((report_sg(i, onto, rng, chest, devices, regions), None))
        elif kind == 2:
            pairs.append((box_sg(i, rng, classes), None))
        else:  # a follow-up pair of one patient, or an MR image
            if i % 8 == 3:
                p = f"synthetic:fu{i}"
                a = report_sg(i, onto, rng, chest, devices, regions, "1", p)
                b = report_sg(i, onto, rng, chest, devices, regions, "2", p)
                pairs.append((a, None))
                pairs.append((b, a))
            else:
                pairs.append((rin_sg(i, rng, onto), None))
    return _time(onto, pairs, args)


def _pairs_from_build(out: str) -> list[tuple[SceneGraph, SceneGraph | None]]:
    """Scene graphs of a build in stored order, each with the prior the runner would pass
    (the patient's previous study when the scene graph links it)."""
    from radvqa.io.parquet import read_scene_graphs

    sgs = read_scene_graphs(out)
    if not sgs:
        raise SystemExit(f"no scene graphs under {out}/scene_graphs")
    pairs: list[tuple[SceneGraph, SceneGraph | None]] = []
    prev: SceneGraph | None = None
    for sg in sgs:
        prior = prev if (prev is not None and sg.prior_study_id and prev.study_id == sg.prior_study_id) else None
        pairs.append((sg, prior))
        prev = sg
    return pairs


def _time(onto, pairs: list[tuple[SceneGraph, SceneGraph | None]], args) -> int:
    import gc

    from radvqa.run.worker import GC_THRESHOLD

    # as the build runner does per shard (run/worker.py): time what real builds run
    gc.set_threshold(GC_THRESHOLD, 20, 10)
    gen = Generator(onto, GenerateOptions(strategies=tuple(args.strategies.split(",")), seed=0))
    if args.digest:
        import hashlib

        import msgspec

        h = hashlib.blake2b(digest_size=16)
        enc = msgspec.json.Encoder()
        for sg, prior in pairs:
            for r in gen.generate(sg, prior):
                h.update(enc.encode(r))
                h.update(b"\n")
        print(f"digest of all rows: {h.hexdigest()}")
    if args.profile:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        for sg, prior in pairs:
            gen.generate(sg, prior)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(args.profile)
    best = 0.0
    best_cpu = 0.0
    n = 0
    c: Counter[str] = Counter()
    multi = 0
    for rep in range(args.repeat):
        t0 = time.perf_counter()
        c0 = time.process_time()
        n = 0
        held: list = []
        for sg, prior in pairs:
            rows = gen.generate(sg, prior)
            n += len(rows)
            if args.hold:
                held.extend(rows)
                if len(held) >= args.hold:
                    held = []
            if rep == 0:
                for r in rows:
                    c[r.strategy] += 1
                    multi += len(r.answer_parts) > 1 and r.strategy == "qba"
        dt = time.perf_counter() - t0
        dc = time.process_time() - c0
        best = max(best, n / dt)
        best_cpu = max(best_cpu, n / dc)
    print(f"scene graphs: {len(pairs)}  QA rows: {n}  ({n / len(pairs):.1f} per study)")
    print("rows by strategy: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if c["qba"]:
        print(f"qba rows with several answer parts: {multi / c['qba']:.1%}")
    print(f"generation throughput (best of {args.repeat}, one process): {best:,.0f} QA/s wall clock, "
          f"{best_cpu:,.0f} QA/s per CPU-second (the machine is shared: CPU time is the steadier figure)")
    print(f"CPU-seconds per 100k QA rows: {100_000 / best_cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
