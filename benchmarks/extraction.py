"""Report-labelling accuracy and speed of the rules extractor on the OpenI (IU X-ray) reports.

    python benchmarks/extraction.py [--data ../shared/data/iu-xray] [--json out.json]

Prints, for the R2Gen test split, train+val, and all gold reports:
- micro P/R/F1 on the ChestX-ray8 protocol (8 diseases + normal; negated or uncertain = negative),
- micro P/R/F1 over 13 NIH labels (Hernia has no positive in the gold) + normal,
- per-label P/R/F1 and support;
then reports per second (one process, extraction + labelling, texts already in memory) and peak
memory (max RSS). Labels go through the ontology's ``nih14`` scheme, as ``radvqa label`` does.
Rules are tuned on train+val only; test is for reporting.

The NIH figures are printed twice, uncertain = negative both times (the ChestX-ray8 protocol): with
the default extractor, and with ``hedges="commit"``, which reads alternatives ("atelectasis or
scarring") and "likely"/"probable"/"borderline"/"most suggestive of" as present, as the OpenI MeSH gold indexes them
(since #12 the default extractor calls those uncertain).

Beside every full subset line, an "indexed" line scores the same subset without the reports that
OpenI indexed "No Indexing" (``<MeSH><major>No Indexing</major>`` in the XML: the indexer gave
them no MeSH term, so the MeSH-derived gold scores them all-zero, not even normal, whatever the
text says) and says how many it left out. The full lines stay the headline figures.

Observation-level figures against the hand-annotated gold (``tests/data/extraction_gold``,
``--gold dev`` by default; ``--gold test`` only once the rules are frozen): recall, positive
precision, certainty accuracy, overclaim rate, side accuracy, qualifier agreement (definitions
in ``radvqa.extract.gold``).

Speed is printed twice: with the sentence cache (61% of OpenI sentences repeat an earlier one,
which flatters the figure) and without it (every sentence analysed, as on a corpus where no
sentence repeats).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CXR8 = ["Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia", "Pneumothorax"]
NIH13 = CXR8 + ["Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening"]


def _norm(s: str) -> str:
    return s.lower().replace("_", "").replace(" ", "").replace("-", "")


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def mesh_major(archive: Path) -> dict[str, list[str]]:
    """Report id -> the MeSH ``major`` codes of its XML, as shipped (spaces collapsed)."""
    import tarfile
    import xml.etree.ElementTree as ET

    out: dict[str, list[str]] = {}
    with tarfile.open(archive, "r:*") as tf:
        for m in tf.getmembers():
            if not (m.isfile() and m.name.endswith(".xml")):
                continue
            fh = tf.extractfile(m)
            if fh is None:
                continue
            root = ET.fromstring(fh.read())
            uid = root.find("uId")
            if uid is not None and uid.get("id"):
                out[uid.get("id", "")] = [" ".join((c.text or "").split()) for c in root.iterfind("MeSH/major")]
    return out


def score(ids: list[str], gold: dict[str, dict[str, str]], pred: dict[str, dict[str, int]], labels: list[str],
          positive: tuple[int, ...] = (1,)) -> dict:
    per = {}
    T = F = N = 0
    for lab in labels:
        tp = fp = fn = 0
        for i in ids:
            g = gold[i][lab] == "1"
            p = pred[i].get(lab) in positive
            tp += g and p
            fp += p and not g
            fn += g and not p
        per[lab] = {"tp": tp, "fp": fp, "fn": fn, "support": tp + fn, "prf": prf(tp, fp, fn)}
        T, F, N = T + tp, F + fp, N + fn
    return {"micro": prf(T, F, N), "tp": T, "fp": F, "fn": N, "per_label": per, "n": len(ids)}


def _print_indexed(indexed: dict[str, list[str]], subsets: dict[str, list[str]], gold: dict, pred: dict,
                   labels: list[str], out: dict) -> None:
    """The subset lines again without the "No Indexing" reports, each with how many it left out."""
    for name, ids in indexed.items():
        s = score(ids, gold, pred, labels)
        p, r, f = s["micro"]
        left = len(subsets[name.split(",")[0]]) - len(ids)
        print(f"  {name:<19} {s['n']:>5} {p:6.3f} {r:6.3f} {f:6.3f}   {s['tp']}/{s['fp']}/{s['fn']}"
              f"   (without the {left} 'No Indexing' reports: no MeSH terms, so no gold labels)")
        out[name] = s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "iu-xray",
                    help="folder with NLMCXR_reports.tgz, openi_gold_nih14.csv, r2gen_split.csv")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    ap.add_argument("--errors", type=Path, default=None, help="write train+val disagreements (for tuning) as JSONL")
    ap.add_argument("--ontology", type=Path, default=None, help="ontology data folder (default: the packaged one)")
    ap.add_argument("--speed-rounds", type=int, default=3, help="passes over all reports for the speed figure")
    ap.add_argument("--gold", default="dev", help="observation gold: dev, test (only after the rules are frozen), "
                    "a .jsonl path, or none")
    ap.add_argument("--gold-errors", type=Path, default=None, help="write the gold disagreements as JSONL")
    args = ap.parse_args(argv)

    from radvqa.extract import get_extractor
    from radvqa.extract.inputs import read_reports
    from radvqa.extract.labels import Labeler
    from radvqa.model import Reject
    from radvqa.ontology import load_ontology

    data = args.data
    for name in ("NLMCXR_reports.tgz", "openi_gold_nih14.csv", "r2gen_split.csv"):
        if not (data / name).exists():
            print(f"missing {data / name} (pass --data)", file=sys.stderr)
            return 2
    texts: dict[str, str] = {}
    rejected: list[Reject] = []
    for rec in read_reports(data / "NLMCXR_reports.tgz"):
        if isinstance(rec, Reject):
            rejected.append(rec)  # OpenI ships 28 XMLs whose report text is empty
            continue
        texts[rec[0]] = rec[1]  # type: ignore[assignment]
    with (data / "openi_gold_nih14.csv").open(newline="") as fh:
        gold = {r["filename"]: r for r in csv.DictReader(fh)}
    with (data / "r2gen_split.csv").open(newline="") as fh:
        split = {r["report_id"]: r["split"] for r in csv.DictReader(fh)}

    # OpenI indexed 95 reports "No Indexing": the indexer gave them no MeSH terms, so the
    # MeSH-derived gold CSV scores them all-zero (not normal either) whatever the text says.
    mesh = mesh_major(data / "NLMCXR_reports.tgz")
    no_index = {i for i in gold if "No Indexing" in mesh.get(i, ())}

    onto = load_ontology(args.ontology) if args.ontology else load_ontology()
    t0 = time.perf_counter()
    ex = get_extractor("rules", ontology=onto)
    labeler = Labeler(onto, "nih14")
    build_s = time.perf_counter() - t0
    by_norm = {_norm(lab): lab for lab in labeler.labels}
    colmap = {}
    for col in NIH13:
        if _norm(col) not in by_norm:
            print(f"scheme nih14 has no label for gold column {col}", file=sys.stderr)
            return 2
        colmap[col] = by_norm[_norm(col)]
    if not labeler.normal_labels:
        print("scheme nih14 has no normal / No Finding label", file=sys.stderr)
        return 2
    normal_label = labeler.normal_labels[0]

    commit = get_extractor("rules", ontology=onto, hedges="commit")
    pred_commit: dict[str, dict[str, int]] = {}
    pred: dict[str, dict[str, int]] = {}
    extractions = {}
    errors = 0
    rejected_ids = {r.ref.rsplit("(", 1)[-1].rstrip(")") for r in rejected}
    for rid in gold:
        if rid not in texts and rid not in rejected_ids:
            print(f"gold report {rid} missing from the archive", file=sys.stderr)
            return 2
        # a rejected (empty) report gets no label: it scores as all-negative, not skipped
        e = ex.extract(texts.get(rid, ""), rid)
        errors += e.error is not None
        extractions[rid] = e
        lab = labeler.label(e)
        # 1 present, -1 uncertain, 0 absent or not mentioned
        row = {col: (lab[colmap[col]] if lab[colmap[col]] in (1, -1) else 0) for col in NIH13}
        row["normal"] = 1 if lab[normal_label] == 1 else 0
        pred[rid] = row
        lab = labeler.label(commit.extract(texts.get(rid, ""), rid))
        row = {col: (1 if lab[colmap[col]] == 1 else 0) for col in NIH13}
        row["normal"] = 1 if lab[normal_label] == 1 else 0
        pred_commit[rid] = row

    # Speed: every report of the archive, extraction + labelling, texts in memory.
    # Wall-clock rate, and CPU-time rate of this process (the honest figure on a shared machine
    # where other jobs take the cores: it is what one process achieves when it has a core).
    all_texts = list(texts.items())

    def speed(cache_size: int) -> tuple[float, float]:
        best = best_cpu = 0.0
        for _ in range(max(1, args.speed_rounds)):
            # a fresh extractor per pass: its sentence cache starts empty (no credit for having
            # seen these reports before); its build time is not counted
            fresh = get_extractor("rules", ontology=onto, cache_size=cache_size)
            t = time.perf_counter()
            c = time.process_time()
            for rid, txt in all_texts:
                labeler.label(fresh.extract(txt, rid))
            best = max(best, len(all_texts) / (time.perf_counter() - t))
            best_cpu = max(best_cpu, len(all_texts) / max(1e-9, time.process_time() - c))
        return best, best_cpu

    best, best_cpu = speed(50_000)
    best_nc, best_cpu_nc = speed(0)  # no cache: every sentence analysed (no sentence repeated)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    subsets = {
        "test": [i for i in gold if split.get(i) == "test"],
        "train+val": [i for i in gold if split.get(i) in ("train", "val")],
        "all": list(gold),
    }
    # The same subsets without the "No Indexing" reports (they have no gold labels): printed
    # beside the full figures, never instead of them.
    indexed = {f"{name}, indexed": [i for i in ids if i not in no_index] for name, ids in subsets.items()}
    results: dict = {"extractor": ex.version, "ontology": onto.version, "reports": len(all_texts), "rejected": len(rejected),
                     "gold_reports": len(gold), "extraction_errors": errors}
    print(f"radvqa rules extractor {ex.version}, ontology {onto.version}; OpenI reports with text: {len(all_texts)} "
          f"({len(rejected)} XMLs without report text rejected) "
          f"(gold {len(gold)}; R2Gen test {len(subsets['test'])}, train+val {len(subsets['train+val'])})")
    for proto, labels in (("ChestX-ray8 (8 + normal)", CXR8 + ["normal"]), ("NIH 13 + normal", NIH13 + ["normal"])):
        print(f"\n== {proto}: negated or uncertain = negative")
        print(f"{'subset':<10} {'n':>5} {'P':>6} {'R':>6} {'F1':>6}   tp/fp/fn")
        for name, ids in subsets.items():
            s = score(ids, gold, pred, labels)
            p, r, f = s["micro"]
            print(f"{name:<10} {s['n']:>5} {p:6.3f} {r:6.3f} {f:6.3f}   {s['tp']}/{s['fp']}/{s['fn']}")
            results.setdefault(proto, {})[name] = s
        _print_indexed(indexed, subsets, gold, pred, labels, results.setdefault(proto, {}))
        print(f"-- {proto}, hedges='commit' (alternatives and likely/probable/borderline/most suggestive of "
              f"present, as the OpenI MeSH gold counts them)")
        for name, ids in subsets.items():
            s = score(ids, gold, pred_commit, labels)
            p, r, f = s["micro"]
            print(f"{name:<10} {s['n']:>5} {p:6.3f} {r:6.3f} {f:6.3f}   {s['tp']}/{s['fp']}/{s['fn']}")
            results.setdefault(proto + ", hedges=commit", {})[name] = s
        _print_indexed(indexed, subsets, gold, pred_commit, labels, results.setdefault(proto + ", hedges=commit", {}))
    for mode, note in (("", ""), (", hedges=commit", ", hedges='commit'")):
        print(f"\n== per label (NIH 13 + normal{note})")
        print(f"{'label':<19}" + "".join(f"{n + ' P/R/F1 (n)':>27}" for n in subsets))
        for lab in NIH13 + ["normal"]:
            cells = []
            for name in subsets:
                d = results["NIH 13 + normal" + mode][name]["per_label"][lab]
                p, r, f = d["prf"]
                cells.append(f"{p:.2f}/{r:.2f}/{f:.2f} ({d['support']})")
            print(f"{lab:<19}" + "".join(f"{c:>27}" for c in cells))
    try:
        load = " (load average %.1f on %d cores)" % (os.getloadavg()[0], os.cpu_count() or 0)
    except OSError:
        load = ""
    gold_summary = None
    if args.gold != "none":
        from radvqa.extract.gold import load_gold, score_gold

        gpath = Path(args.gold) if args.gold.endswith(".jsonl") else ROOT / "tests" / "data" / "extraction_gold" / f"{args.gold}.jsonl"
        if not gpath.exists():
            print(f"\nno observation gold at {gpath}", file=sys.stderr)
        else:
            gs = score_gold(load_gold(gpath), ex.extract, onto, getattr(ex, "qualifiers", None))
            gold_summary = gs.summary()
            print(f"\n== observation gold {gpath.name}: {gs.reports} reports, {gs.gold} gold observations")
            for key, label, target in (("recall", "recall of gold observations", ">= 0.95"),
                                       ("positive_precision", "precision of non-absent predictions", ">= 0.93"),
                                       ("certainty_accuracy", "certainty accuracy", ">= 0.95"),
                                       ("overclaim_rate", "overclaim rate (present where gold uncertain/absent)", "<= 0.03"),
                                       ("side_accuracy", "side accuracy", ">= 0.95"),
                                       ("qualifier_agreement", "qualifier agreement (gold qualified negatives)", "")):
                print(f"{label:<56} {gold_summary[key]:6.3f}   target {target}")
            c = gold_summary["counts"]
            print(f"(matched {c['matched']}/{gs.gold}; non-absent predictions {c['predicted_non_absent_ok']}/{c['predicted_non_absent']} ok; "
                  f"certainty {c['certainty_ok']}/{c['matched']}; overclaims {c['overclaims']}/{c['gold_not_present']}; "
                  f"sides {c['side_ok']}/{c['side_pairs']}; qualifiers {c['qualifier_ok']}/{c['gold_qualified']})")
            if args.gold_errors:
                with args.gold_errors.open("w") as fh:
                    for err in gs.errors:
                        fh.write(json.dumps(err) + "\n")
    print(f"\nspeed: {best:,.0f} reports/s wall clock, {best_cpu:,.0f} reports/s of process CPU time "
          f"(one process, extract + label, cold sentence cache, best of {args.speed_rounds} passes over {len(all_texts)} reports){load}; "
          f"extractor build {build_s:.2f} s; peak memory (max RSS) {peak_mb:,.0f} MB")
    print(f"speed without the sentence cache (every sentence analysed, as if none repeated): {best_nc:,.0f} reports/s wall "
          f"clock, {best_cpu_nc:,.0f} reports/s of process CPU time")
    results.update({"reports_per_s": best, "reports_per_cpu_s": best_cpu, "build_s": build_s, "peak_rss_mb": peak_mb,
                    "reports_per_s_no_cache": best_nc, "reports_per_cpu_s_no_cache": best_cpu_nc,
                    "gold": gold_summary})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.errors:
        with args.errors.open("w") as fh:
            for rid in subsets["train+val"]:
                # (gold, default prediction 1/-1/0, hedges=commit prediction 1/0) where either disagrees
                diff = {c: (int(gold[rid][c]), pred[rid][c], pred_commit[rid][c]) for c in NIH13 + ["normal"]
                        if int(gold[rid][c]) != (pred[rid][c] == 1) or int(gold[rid][c]) != pred_commit[rid][c]}
                if diff:
                    e = extractions[rid]
                    fh.write(json.dumps({"id": rid, "diff": diff, "text": texts.get(rid, ""), "mesh": mesh.get(rid, []),
                                         "obs": [(o.finding, o.certainty, [s.text for s in o.evidence]) for o in e.observations]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
