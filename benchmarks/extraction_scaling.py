"""Extraction time per 1,000 characters of report text, from 1k to 100k characters (#20: the
extractor was cubic on long text without sentence punctuation; it must be linear).

    python benchmarks/extraction_scaling.py [--sizes 1000,2000,5000,10000,20000,50000,100000] [--rounds 3]

Inputs at each size (the rules extractor, sentence cache off so that nothing is reused):
- ``run``: the issue's reproducer, ``"pleural effusion " * k`` (one sentence, no punctuation),
  with the sentence limit raised to the report limit so that the analysis itself is timed;
- ``run, default limit``: the same text with the default limit (``MAX_SENTENCE_CHARS``): beyond
  it the report is rejected with a reason, and that is what is timed;
- ``cues``: one unpunctuated sentence dense in negations, qualifiers, alternatives, sides and
  coordinated findings (the costly paths), sentence limit raised as for ``run``;
- ``report``: a long report of distinct, punctuated sentences (no sentence repeats).
Prints milliseconds of process CPU time per 1k characters (best of ``--rounds``: CPU time, because
on a shared machine wall time measures the neighbours) and, per input, the ratio of the slowest to
the fastest size (flat = linear; the target is within 2x), with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import time


def texts(n: int) -> dict[str, str]:
    run = ("pleural effusion " * (n // 17 + 1))[:n]
    unit = ("no pneumothorax or large left pleural effusion and atelectasis versus scarring in the right base "
            "with mild bibasilar opacities compatible with edema or pneumonia ")
    cues = (unit * (n // len(unit) + 1))[:n]
    parts, i = [], 0
    sides = ("left", "right", "bilateral")
    while sum(map(len, parts)) < n:
        parts.append(f"Finding {i}: small {sides[i % 3]} pleural effusion measuring {i % 90 + 1} mm, "
                     f"no pneumothorax, possible atelectasis in zone {i}. ")
        i += 1
    report = "FINDINGS: " + "".join(parts)
    return {"run": run, "run, default limit": run, "cues": cues, "report": report[:n]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000,50000,100000")
    ap.add_argument("--rounds", type=int, default=7, help="best of N per size")
    args = ap.parse_args(argv)
    from radvqa.extract import get_extractor
    from radvqa.extract.rules import MAX_SENTENCE_CHARS
    from radvqa.extract.text import MAX_CHARS
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    raised = get_extractor("rules", ontology=onto, cache_size=0, max_sentence_chars=MAX_CHARS)
    default = get_extractor("rules", ontology=onto, cache_size=0)
    sizes = [int(x) for x in args.sizes.split(",")]
    per: dict[str, list[float]] = {}
    notes: dict[str, set[str]] = {}
    print(f"{'input':<20}" + "".join(f"{s:>10,}" for s in sizes) + "   ms (CPU) per 1k characters")
    for name in ("run", "run, default limit", "cues", "report"):
        row = []
        for n in sizes:
            text = texts(n)[name]
            ex = default if name == "run, default limit" else raised
            best = float("inf")
            for _ in range(max(1, args.rounds)):
                t = time.process_time()
                e = ex.extract(text, "scale")
                best = min(best, time.process_time() - t)
            if e.error:
                notes.setdefault(name, set()).add(e.error.split(" (")[0])
            row.append(best * 1000 / (len(text) / 1000))
        per[name] = row
        print(f"{name:<20}" + "".join(f"{v:10.3f}" for v in row))
    try:
        load = f"{os.getloadavg()[0]:.1f}"
    except OSError:
        load = "?"
    print(f"\nslowest / fastest size (flat = 1; target <= 2), load average {load} on {os.cpu_count()} cores:")
    for name, row in per.items():
        if name in notes:  # analysed up to the limit, rejected beyond it: the ratio of the analysed sizes
            kept = [v for s, v in zip(sizes, row) if s <= MAX_SENTENCE_CHARS] or row
            print(f"  {name:<20} {max(kept) / min(kept):5.2f}   up to {MAX_SENTENCE_CHARS:,} characters; beyond, "
                  f"rejected ({', '.join(sorted(notes[name]))}) in {max(v for s, v in zip(sizes, row) if s > MAX_SENTENCE_CHARS):.3f} ms per 1k")
        else:
            print(f"  {name:<20} {max(row) / min(row):5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
