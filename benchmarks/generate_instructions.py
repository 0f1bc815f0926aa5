"""Instructions per QA row of ``Generator.generate`` (callgrind): a speed figure that does not
depend on the machine's load, for comparing code trees side by side.

    python benchmarks/generate_instructions.py --scene-graphs OUT_DIR [--studies 300] [--warm] \
        [--src /tmp/pre13/src --src src]

For each ``--src`` tree (default: the imported radvqa), runs the generator over the first
``--studies`` scene graphs of a finished build (each with its patient's previous study, as the
runner pairs them) under ``valgrind --tool=callgrind`` and counts only the generation pass:
loading, the ontology and the Generator's set-up run uninstrumented. ``--warm`` runs the same
studies once uninstrumented first, so the per-sentence caches (grading flags, mention tests)
are filled, as in the best-of-N passes of ``benchmarks/generate.py``; without it the pass is cold
(every sentence graded for the first time, as a real build meets most of them). ``--unvouched
keep|omit`` sets that generation option where the tree has it (issue 13 round 10; ``keep`` emits
the same rows as a tree without it, so instructions per row compare like with like). Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile


def _child(sg_dir: str, studies: int, warm: bool, unvouched: str | None = None) -> None:
    import gc

    from radvqa.generate import GenerateOptions, Generator
    from radvqa.io.parquet import read_scene_graphs
    from radvqa.ontology import load_ontology
    from radvqa.run.worker import GC_THRESHOLD

    onto = load_ontology()
    pairs = []
    prev = None
    for sg in read_scene_graphs(sg_dir)[:studies]:
        prior = prev if (prev is not None and sg.prior_study_id and prev.study_id == sg.prior_study_id) else None
        pairs.append((sg, prior))
        prev = sg
    gc.set_threshold(GC_THRESHOLD, 20, 10)  # as the build runner sets it per shard
    opts = GenerateOptions(seed=0)
    if unvouched and "unvouched" in GenerateOptions.__struct_fields__:
        opts = GenerateOptions(seed=0, unvouched=unvouched)
    gen = Generator(onto, opts)
    if warm:
        for sg, prior in pairs:
            gen.generate(sg, prior)
    me = str(os.getpid())
    subprocess.run(["callgrind_control", "-i", "on", me], check=True, capture_output=True)
    n = 0
    for sg, prior in pairs:
        n += len(gen.generate(sg, prior))
    subprocess.run(["callgrind_control", "-i", "off", me], check=True, capture_output=True)
    print(f"rows {n}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene-graphs", metavar="DIR", required=True)
    ap.add_argument("--studies", type=int, default=300)
    ap.add_argument("--warm", action="store_true", help="fill the per-sentence caches first (uninstrumented)")
    ap.add_argument("--src", action="append", default=[], help="a tree's src folder (repeatable)")
    ap.add_argument("--unvouched", choices=("keep", "omit"), help="the generation option, where a tree has it")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.scene_graphs, args.studies, args.warm, args.unvouched)
        return 0
    for src in args.src or [""]:
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = os.path.abspath(src)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "callgrind.out")
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                   sys.executable, os.path.abspath(__file__), "--child", "--scene-graphs", args.scene_graphs,
                   "--studies", str(args.studies)] + (["--warm"] if args.warm else []) + \
                (["--unvouched", args.unvouched] if args.unvouched else [])
            res = subprocess.run(cmd, env=env, capture_output=True, text=True)
            rows = re.search(r"rows (\d+)", res.stderr)
            text = open(out).read() if os.path.exists(out) else ""
            total = re.search(r"^totals: (\d+)", text, re.M)
            if res.returncode or rows is None or total is None:
                print(res.stderr[-2000:], file=sys.stderr)
                raise SystemExit(f"callgrind run failed for {src or 'the imported radvqa'}")
            n, ir = int(rows.group(1)), int(total.group(1))
            print(f"{src or '(imported radvqa)'}: {args.studies} studies {'warm' if args.warm else 'cold'}, "
                  f"{n} QA rows, {ir:,} instructions, {ir / n:,.0f} per row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
