"""Pick the OpenI reports of the extraction gold set (reproducible: fixed seed, stratified).

Run: python tests/data/extraction_gold/select_reports.py NLMCXR_reports.tgz r2gen_split.csv OUT_DIR
Writes OUT_DIR/candidates_dev.jsonl and OUT_DIR/candidates_test.jsonl ({"report_id", "split",
"text"}), the reports to annotate by hand, in annotation order. The text is ``Study.report_text``
exactly as the openi source gives it to the extractor.

Stratum "marked": the FINDINGS/IMPRESSION text has a hedge, an alternative, a qualified negative, a
side or a change word (what the gold set measures); "ordinary": the rest. Each split draws
MARKED marked + ORDINARY ordinary reports, then SUPPLEMENT reports of the stricter STRICT stratum. The dev set is drawn from the R2Gen train+val split and
also includes the train/val reports quoted in issue #12; the test set only from the R2Gen test split.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

from radvqa.ontology import load_ontology
from radvqa.model import Study
from radvqa.sources import get_source

SEED = 12
MARKED = 60
ORDINARY = 40
# Supplement (drawn after the main draw, from its own random stream, so the first 100 stay as they
# are): reports whose text has an alternative between findings, a hedge, a qualified negative or
# a change word (not merely a side word or a negated list), to give the certainty and change
# figures more cases.
SUPPLEMENT = {"dev": 40, "test": 20}
STRICT = re.compile(
    r"\b(versus|vs|and/or|could|may|maybe|might|possible|possibly|probable|probably|likely|suggestive|"
    r"suggests?|suggesting|concerning|concern|cannot|questionable|differential|represents?|"
    r"representing|reflects?|borderline|upper limits? of normal|top normal|"
    r"no (?:large|definite|significant|displaced|gross|obvious|overt|convincing|substantial|sizable|"
    r"typical|suspicious)|grossly clear|improved|improving|increased|decreased|resolved|resolving|"
    r"worsened|worsening|healed|sequelae?)\b|"
    r"\b(?:atelectasis|scarring|infiltrate|pneumonia|fibrosis|edema|effusion|scar) or \w|"
    r"\w or (?:atelectasis|scarring|infiltrate|pneumonia|fibrosis|edema|effusion|scar)\b",
    re.IGNORECASE,
)
ISSUE_EXAMPLES = ["CXR1105", "CXR1513", "CXR1075", "CXR1542", "CXR1654", "CXR1339"]

MARK = re.compile(
    r"\b(or|versus|vs|and/or|could|may|might|possible|possibly|probable|probably|likely|suggest\w*|"
    r"concern\w*|cannot|question\w*|favor\w*|differential|represent\w*|reflect\w*|"
    r"no (?:large|definite|significant|displaced|gross|obvious|overt|convincing|appreciable|"
    r"substantial|sizable|visible|typical)|grossly|"
    r"left|right|bilateral|bilaterally|bibasilar|biapical|bases|both|"
    r"stable|unchanged|improved|improving|increased|decreased|resolved|resolving|new|interval|"
    r"worse\w*|again|persistent|old|healed|chronic|prior|previous)\b|\w/\w",
    re.IGNORECASE,
)


def body(text: str) -> str:
    """FINDINGS and IMPRESSION lines only (the indication and comparison are not findings)."""
    return "\n".join(l for l in text.splitlines() if l.startswith(("FINDINGS:", "IMPRESSION:")))


def main(tgz: str, split_csv: str, out: str) -> None:
    splits: dict[str, str] = {}
    for line in Path(split_csv).read_text().splitlines()[1:]:
        rid, _, sp = line.split(",")
        splits[rid] = sp
    rows: dict[str, dict[str, str]] = {}
    for rec in get_source("openi").iter_records([Path(tgz)], ontology=load_ontology()):
        if not isinstance(rec, Study) or not rec.report_text.strip():
            continue
        rid = rec.id.split(":", 1)[1]
        if rid in splits:
            rows[rid] = {"report_id": rid, "split": splits[rid], "text": rec.report_text}
    rng = random.Random(SEED)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    for name, allowed in (("dev", {"train", "val"}), ("test", {"test"})):
        ids = sorted((r for r in rows if rows[r]["split"] in allowed), key=lambda r: int(r[3:]))
        forced = [r for r in ISSUE_EXAMPLES if r in ids] if name == "dev" else []
        marked = [r for r in ids if MARK.search(body(rows[r]["text"])) and r not in forced]
        ordinary = [r for r in ids if not MARK.search(body(rows[r]["text"]))]
        pick = forced + rng.sample(marked, MARKED - len(forced)) + rng.sample(ordinary, ORDINARY)
        rng.shuffle(pick)
        if SUPPLEMENT[name]:
            strict = [r for r in ids if r not in set(pick) and STRICT.search(body(rows[r]["text"]))]
            pick += random.Random(f"{SEED}-supplement-{name}").sample(strict, SUPPLEMENT[name])
        with open(outdir / f"candidates_{name}.jsonl", "w") as f:
            for r in pick:
                f.write(json.dumps(rows[r]) + "\n")
        print(name, len(ids), "reports;", len(marked) + len(forced), "marked,", len(ordinary), "ordinary; picked", len(pick))


if __name__ == "__main__":
    main(*sys.argv[1:4])
