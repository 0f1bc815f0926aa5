"""Count the corpus priors shipped in ``data/priors.yaml`` from public data.

    python -m radvqa.generate.priors_build [--data ../shared/data] [--out src/radvqa/generate/data/priors.yaml]

Sources (both under ``../shared/data/iu-xray``, see its README):
- ``NLMCXR_reports.tgz``: the 3,955 IU X-ray (OpenI) reports; each report's MeSH ``major`` codes
  (``Opacity/lung/base/left/mild``) give the findings (head term -> ontology finding through the
  ``openi_mesh`` scheme when the ontology has it, else its synonyms) and the regions (location
  words -> ontology region through its synonyms). A region positive in a report is positive for
  its parent regions too.
- ``openi_gold_nih14.csv``: human NIH-14 labels of 3,851 of those reports; for the findings they
  cover, these rates replace the MeSH-derived ones.
Rates are "share of reports in which the finding / region is positive".
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

SIDES = {"left": "left", "right": "right", "bilateral": None}


def _majors(xml: str) -> list[str]:
    return [m.strip() for m in re.findall(r"<major>([^<]*)</major>", xml)]


def _region_of(onto: Any, locs: list[str], side: str | None) -> str | None:
    tries: list[str] = []
    if side:
        tries.append(f"{side} {' '.join(locs)}")
        tries.extend(f"{side} {loc}" for loc in locs)
    tries.append(" ".join(locs))
    tries.extend(locs)
    for t in tries:
        if not t.strip():
            continue
        r = onto.region_by_synonym(t)
        if r is not None:
            return r.id
    return None


def _finding_of(onto: Any, head: str) -> list[str]:
    schemes = getattr(onto, "schemes", {})
    if "openi_mesh" in schemes:
        try:
            return list(onto.map_label("openi_mesh", head))
        except KeyError:
            pass
    f = onto.finding_by_synonym(head.lower())
    return [f.id] if f is not None else []


def build(data: Path, onto: Any) -> dict[str, Any]:
    tgz = data / "iu-xray" / "NLMCXR_reports.tgz"
    fcount: Counter[str] = Counter()
    rcount: Counter[str] = Counter()
    n = 0
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            if not m.name.endswith(".xml"):
                continue
            fh = tar.extractfile(m)
            if fh is None:
                continue
            xml = fh.read().decode("utf-8", "replace")
            n += 1
            fs: set[str] = set()
            rs: set[str] = set()
            for major in _majors(xml):
                for entry in major.split(";"):
                    segs = [s.strip() for s in entry.split("/") if s.strip()]
                    if not segs or segs[0].lower() in ("normal", "no indexing"):
                        continue
                    fs.update(_finding_of(onto, segs[0]))
                    side = next((SIDES[s.lower()] for s in segs[1:] if s.lower() in SIDES), None)
                    locs = [s.lower() for s in segs[1:] if s.lower() not in SIDES]
                    # drop modifier words (severity, shape): keep what looks like anatomy
                    locs = [w for w in locs if onto.region_by_synonym(w) is not None or " " in w or w in (
                        "base", "apex", "hilum", "lingula")]
                    r = _region_of(onto, locs, side) if locs else None
                    if r is not None:
                        rs.add(r)
                        rs.update(onto.region_ancestors(r))
            fcount.update(fs)
            rcount.update(rs)
    frate = {k: round(v / n, 5) for k, v in fcount.items()}
    gold = data / "iu-xray" / "openi_gold_nih14.csv"
    if gold.exists():
        rows = list(csv.DictReader(io.StringIO(gold.read_text())))
        for label in rows[0].keys():
            if label in ("filename", "normal"):
                continue
            try:
                fids = onto.map_label("nih14", label.replace("_", " "))
            except KeyError:
                try:
                    fids = onto.map_label("nih14", label)
                except KeyError:
                    continue
            pos = sum(1 for r in rows if r[label] == "1")
            if pos == 0:
                continue  # no positive in the gold set (Hernia): keep the MeSH count
            for fid in fids:
                frate[fid] = round(pos / len(rows), 5)
    rrate = {k: round(v / n, 5) for k, v in rcount.items()}
    return {
        "source": (f"Counted by python -m radvqa.generate.priors_build from {n} IU X-ray (OpenI) reports' "
                   "MeSH major codes (NLMCXR_reports.tgz) and the 3,851 human NIH-14 gold labels "
                   "(openi_gold_nih14.csv); ontology " + str(getattr(onto, "version", "?"))),
        "reports": n,
        "default_finding_rate": 0.002,
        "default_region_rate": 0.002,
        "finding_positive_rate": dict(sorted(frate.items())),
        "region_positive_rate": dict(sorted(rrate.items())),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--out", default=str(Path(__file__).parent / "data" / "priors.yaml"))
    args = ap.parse_args(argv)
    from radvqa.ontology import load_ontology

    out = build(Path(args.data), load_ontology())
    header = ("# Corpus priors for negative sampling (share of reports where a finding / region is positive).\n"
              "# Aggregate counts only (no report text): see radvqa/generate/priors_build.py for the sources.\n"
              "# Regenerate: python -m radvqa.generate.priors_build --data ../shared/data\n")
    Path(args.out).write_text(header + yaml.safe_dump(out, sort_keys=False, width=100), encoding="utf-8")
    print(f"wrote {args.out}: {len(out['finding_positive_rate'])} findings, "
          f"{len(out['region_positive_rate'])} regions from {out['reports']} reports")


if __name__ == "__main__":
    main()
