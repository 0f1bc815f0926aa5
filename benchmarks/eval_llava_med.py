"""VQA-RAD test split (451 questions: 272 closed, 179 open) and LLaVA-Med v1.0's three public
answer files, scored with both protocols, next to the text-only baselines.

    .venv/bin/python benchmarks/eval_llava_med.py [--data ../shared/data/vqa-rad]

The ``llava-med`` protocol reproduces LLaVA-Med v1.0's ``llava/eval/run_eval.py``: its
normalisation, closed = gold string found in the prediction, open = token recall. The column
"v1 script" is what that script printed: it silently dropped closed questions whose answer
contained "yes"/"no" (as substrings) but not the gold, so its denominator is smaller than 272.
The ``radvqa`` protocol parses answers strictly (refusals / ambiguity = unparsed = wrong) and
scores open answers by token F1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("answer-file.jsonl", "answer-file-1epoch.jsonl", "answer-file-llava-zeorshot.jsonl")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("RADVQA_VQA_RAD", str(ROOT.parent / "shared" / "data" / "vqa-rad")))
    a = ap.parse_args()
    data = Path(a.data)
    if not (data / "VQA_RAD Dataset Public.json").is_file():
        sys.exit(f"VQA-RAD not found at {data} (pass --data or set RADVQA_VQA_RAD)")
    from radvqa.eval.baselines import run_baseline, write_predictions
    from radvqa.eval.dataset import load_qa
    from radvqa.eval.evaluate import evaluate
    from radvqa.eval.importers import iter_vqa_rad, write_dataset

    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "vqa-rad"
        m = write_dataset(ds, iter_vqa_rad(data), "vqa-rad", [str(data)], {})
        c = m["counts"]
        print(f"VQA-RAD imported: {c['qa']} questions, splits {c['by_split']}, {c['rejected']} rejected")
        runs = [(f, data / "predictions" / "llava-med-v1" / f) for f in FILES]
        rows = load_qa(ds)
        for method in ("bow", "majority", "prior", "random"):
            ids, preds, info = run_baseline(rows, method)
            p = Path(tmp) / f"baseline-{method}.jsonl"
            write_predictions(p, ids, preds, info)
            runs.append((f"text-only {method}" if method in ("bow", "majority") else method, p))
        print()
        print("| predictions | llava-med closed (all 272) | llava-med closed (v1 script, n) | llava-med open recall (179) "
              "| radvqa closed acc [95% CI] (unparsed) | radvqa open token F1 |")
        print("|---|---|---|---|---|---|")
        for name, path in runs:
            lm = evaluate(ds, path, protocol="llava-med", bootstrap=0, audit=False)["llava_med"]
            rv = evaluate(ds, path, protocol="radvqa", bootstrap=1000, seed=0, audit=False)["overall"]
            cl, op = rv["closed"], rv["open"]
            print(f"| {name} | {100 * lm['closed_accuracy']:.2f} | {100 * lm['closed_accuracy_v1_script']:.2f} ({lm['closed_n_v1_script']}) "
                  f"| {100 * lm['open_recall']:.2f} | {100 * cl['accuracy']:.2f} [{100 * cl['ci95'][0]:.1f}, {100 * cl['ci95'][1]:.1f}] "
                  f"({cl['unparsed']}/{cl['n']}) | {100 * op['token_f1']:.2f} |")


if __name__ == "__main__":
    main()
