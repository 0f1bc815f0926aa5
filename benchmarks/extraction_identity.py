"""Dump every scene graph the rules extractor makes, for a byte-for-byte comparison of two versions
of the extraction code (a speed change must not change one byte of output).

    PYTHONPATH=<old>/src python benchmarks/extraction_identity.py --out /tmp/old.jsonl
    PYTHONPATH=<new>/src python benchmarks/extraction_identity.py --out /tmp/new.jsonl
    cmp /tmp/old.jsonl /tmp/new.jsonl

Reports: every OpenI report with text (``--data``), then the hand-annotated gold sets and the
convention tables of the tests. Each is extracted in several configurations: the default extractor
(sentence caches on; every OpenI report twice, so the second pass reads warm caches), the same in
reverse order on a fresh extractor, no caches, and ``hedges="commit"``. Each line: configuration,
report id, the Extraction's JSON and its NIH-14 labels. Prints a SHA-256 of the whole dump."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "iu-xray")
    ap.add_argument("--tests", type=Path, default=ROOT / "tests",
                    help="tests folder with data/extraction_gold and data/extract (read with this code base's files)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    import yaml

    from radvqa.extract import get_extractor
    from radvqa.extract.inputs import read_reports
    from radvqa.extract.labels import Labeler
    from radvqa.model import Reject, to_json
    from radvqa.ontology import load_ontology

    texts: list[tuple[str, str]] = [(r[0], r[1]) for r in read_reports(args.data / "NLMCXR_reports.tgz")
                                    if not isinstance(r, Reject)]  # type: ignore[index]
    extra: list[tuple[str, str]] = []
    for name in ("dev", "test"):
        p = args.tests / "data" / "extraction_gold" / f"{name}.jsonl"
        if p.exists():
            for line in p.read_text().splitlines():
                if line.strip():
                    d = json.loads(line)
                    extra.append((f"gold-{name}:{d['report_id']}", d["text"]))
    for table in ("conventions", "sentences"):
        conv = args.tests / "data" / "extract" / f"{table}.yaml"
        if conv.exists():
            data = yaml.safe_load(conv.read_text())
            for key in ("rows", "regressions"):
                for k, row in enumerate(data.get(key) or []):
                    extra.append((f"{table}-{key}:{k}", str(row[1])))
            for k, rep in enumerate(data.get("reports") or []):
                extra.append((f"{table}-reports:{k}", str(rep["text"])))
    onto = load_ontology()
    labeler = Labeler(onto, "nih14")
    h = hashlib.sha256()
    n = 0
    with args.out.open("wb") as fh:
        def dump(config: str, ex, items: list[tuple[str, str]]) -> None:  # type: ignore[no-untyped-def]
            nonlocal n
            for rid, text in items:
                e = ex.extract(text, rid)
                lab = labeler.label(e)
                line = b"%s\t%s\t%s\t%s\n" % (config.encode(), rid.encode(), to_json(e),
                                             json.dumps(lab, sort_keys=True).encode())
                fh.write(line)
                h.update(line)
                n += 1

        ex = get_extractor("rules", ontology=onto)
        dump("default", ex, texts + extra)
        dump("default-warm", ex, texts + extra)
        dump("reverse", get_extractor("rules", ontology=onto), list(reversed(texts + extra)))
        dump("nocache", get_extractor("rules", ontology=onto, cache_size=0), texts + extra)
        dump("commit", get_extractor("rules", ontology=onto, hedges="commit"), texts + extra)
        # a small cache that is cleared many times
        dump("tinycache", get_extractor("rules", ontology=onto, cache_size=50), texts)
    print(f"{n} scene graphs ({len(texts)} OpenI reports, {len(extra)} test texts), sha256 {h.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
