"""Per-row cost of the NIH ChestX-ray14 reader in machine instructions: a figure that does not move
with the load of a shared machine (CPU seconds there varied 2.09-2.97 s for the same code).

One warm pass, then one pass inside ``functools.reduce`` (a C function), so valgrind counts only
that pass:

    NIHROOT=DIR valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \\
        --callgrind-out-file=/dev/null python benchmarks/nih_read_instructions.py

DIR holds Data_Entry_2017_v2020.csv.gz, BBox_List_2017.csv, images.csv and images/ (default
../shared/data/nih-cxr14). Run it on a copy whose Data_Entry keeps the first N rows and on one with
the header only: (Collected(N) - Collected(0)) / N is the cost of one row. Compare two checkouts
with PYTHONPATH=<checkout>/src and PYTHONHASHSEED=0.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from radvqa.ontology import load_ontology
from radvqa.sources import get_source


def main() -> None:
    root = Path(os.environ.get("NIHROOT", Path(__file__).resolve().parents[2] / "shared" / "data" / "nih-cxr14"))
    inputs = [root / "Data_Entry_2017_v2020.csv.gz", root / "BBox_List_2017.csv", root / "images", root / "images.csv"]
    onto = load_ontology()
    src = get_source("nih-cxr14")
    for _ in src.iter_records(inputs, ontology=onto):  # warm: caches, lazy imports
        pass
    n = functools.reduce(lambda a, _r: a + 1, src.iter_records(inputs, ontology=onto), 0)
    print(f"{n} records read from {root}")


if __name__ == "__main__":
    main()
