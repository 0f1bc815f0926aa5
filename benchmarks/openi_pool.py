"""Write the OpenI report XMLs of one R2Gen pool into a folder, for a build of that pool alone
(the hand audits of #13: docs/generation.md, tests/data/audit/).

    python benchmarks/openi_pool.py --archive ../shared/data/iu-xray/NLMCXR_reports.tgz \\
        --split ../shared/data/iu-xray/r2gen_split.csv --pool outside --out /tmp/aud_out
    radvqa build openi --input /tmp/aud_out --out /tmp/aud_out0 --workers 2

Pools: ``train+val`` (2,365 reports: the reports the rules were tuned on), ``test`` (590: held out
in session 6, validation since round 10), ``outside`` (the 1,000 reports R2Gen left out, 972 with
text: the held-out pool of session 7). A report's id is ``CXR`` + its XML file name's number, the
split table's ``report_id``."""

from __future__ import annotations

import argparse
import csv
import tarfile
from pathlib import Path

POOLS = {"train+val": {"train", "val"}, "test": {"test"}, "outside": set()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archive", type=Path, required=True, help="NLMCXR_reports.tgz")
    ap.add_argument("--split", type=Path, required=True, help="r2gen_split.csv (report_id, ..., split)")
    ap.add_argument("--pool", choices=sorted(POOLS), required=True)
    ap.add_argument("--out", type=Path, required=True, help="folder for the pool's XMLs (created)")
    args = ap.parse_args(argv)
    with args.split.open(newline="", encoding="utf-8-sig") as fh:
        split = {r["report_id"]: r["split"] for r in csv.DictReader(fh)}
    want = POOLS[args.pool]
    args.out.mkdir(parents=True, exist_ok=True)
    n = 0
    with tarfile.open(args.archive) as tar:
        for m in tar:
            name = Path(m.name).name
            if not (m.isfile() and name.endswith(".xml")):
                continue
            s = split.get("CXR" + name[:-4])
            if (s in want) if want else s is None:
                (args.out / name).write_bytes(tar.extractfile(m).read())  # type: ignore[union-attr]
                n += 1
    print(f"{n} reports of pool {args.pool} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
