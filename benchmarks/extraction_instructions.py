"""Per-report cost of rules extraction (+ NIH-14 labelling) in machine instructions: a figure that
does not move with the load of a shared machine.

The extractor is built first (not counted); then one pass over the first N OpenI reports with a
fresh extractor runs inside ``functools.reduce`` (a C function), so valgrind counts only that pass:

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce --instr-atstart=no \\
        --callgrind-out-file=/dev/null python benchmarks/extraction_instructions.py --cache 50000 -n 1000 --instrument

Instructions per report = valgrind's "Collected" / N. ``--cache 0`` turns the sentence and section
caches off (every sentence analysed, as on a corpus where no sentence repeats). Compare two
checkouts with PYTHONPATH=<checkout>/src and PYTHONHASHSEED=0.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "iu-xray")
    ap.add_argument("-n", type=int, default=1000, help="reports (the first N of the archive with text)")
    ap.add_argument("--cache", type=int, default=50_000, help="cache_size of the extractor (0: no caches)")
    ap.add_argument("--instrument", action="store_true",
                    help="switch valgrind's instrumentation on (callgrind_control -i on) once the extractor is "
                         "built: run valgrind with --instr-atstart=no as well (the setup then runs several times faster)")
    ap.add_argument("--warm", action="store_true", help="count a second pass over the same reports (warm caches: "
                    "the per-report work that remains when every sentence is cached)")
    args = ap.parse_args()

    from radvqa.extract import get_extractor
    from radvqa.extract.inputs import read_reports
    from radvqa.extract.labels import Labeler
    from radvqa.model import Reject
    from radvqa.ontology import load_ontology

    texts = [r for r in read_reports(args.data / "NLMCXR_reports.tgz") if not isinstance(r, Reject)][: args.n]
    onto = load_ontology()
    labeler = Labeler(onto, "nih14")
    warm = get_extractor("rules", ontology=onto, cache_size=0)
    for rid, text in texts[:50]:  # lazy imports, first-call paths
        labeler.label(warm.extract(text, rid))
    ex = get_extractor("rules", ontology=onto, cache_size=args.cache)
    if args.warm:  # count a second pass: every section and sentence is then a cache hit
        for rid, text in texts:
            labeler.label(ex.extract(text, rid))
    if args.instrument:  # valgrind ran uninstrumented (--instr-atstart=no) so far: much faster
        import os
        import subprocess

        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)

    def step(acc: int, item: tuple) -> int:
        labeler.label(ex.extract(item[1], item[0]))
        return acc + 1

    n = functools.reduce(step, texts, 0)
    print(f"{n} reports extracted and labelled (cache_size {args.cache})")


if __name__ == "__main__":
    main()
