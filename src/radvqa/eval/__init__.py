"""radvqa.eval: parse, score and report model answers on radvqa datasets and imported
benchmarks (VQA-RAD, SLAKE), with grounding metrics, an LLM judge and text-only baselines.

    from radvqa.eval.evaluate import evaluate
    from radvqa.eval.report import write_report
    rep = evaluate("DIR", "preds.jsonl", protocol="radvqa")   # or "llava-med"
    write_report(rep, "REPORT_DIR")

Modules: ``predictions`` (JSONL, id detection, join), ``parsers`` (declared extraction
pipelines, vocabulary in ``data/parsers.yaml``), ``boxes`` (formats, IoU, Hungarian),
``scoring`` (protocols), ``aggregate`` (metrics, CIs, breakdowns), ``tags``, ``judge``,
``baselines``, ``importers``, ``report``. See README.md beside this file for what every
number counts.
"""
