"""Commands of the eval area: ``radvqa eval``, ``radvqa import vqa-rad|slake|cxr-align|cxreasonbench|medical-diff-vqa``,
``radvqa baseline text-only|prior|random``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def _fail(msg: str, code: int = 1) -> None:
    """Exit codes (docs/CLI.md): 1 the command failed on its inputs, 2 the command line is wrong."""
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code=code)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("eval")
    def eval_cmd(
        dataset: Path = typer.Argument(..., help="Dataset directory (DIR/qa/part-*.parquet)."),
        predictions: Path = typer.Option(..., "--predictions", "-p", help="Predictions JSONL ({qa_id, prediction, boxes?} or a benchmark's answer file)."),
        out: Path = typer.Option(..., "--out", "-o", help="Report directory: report.json, metrics.json, report.md, report.html, per_question.jsonl."),
        protocol: str = typer.Option("radvqa", help="radvqa (strict, default) or llava-med (LLaVA-Med v1.0 VQA-RAD scoring)."),
        id_field: Optional[str] = typer.Option(None, help="Id field of the predictions (default: detect qa_id, question_id, qid, id)."),
        text_field: Optional[str] = typer.Option(None, help="Answer text field (default: detect prediction, text, answer, output, response)."),
        split: str = typer.Option("auto", help="Rows to evaluate: auto, all, or a split name (auto: the one split all predictions fall in, else all)."),
        box_format: str = typer.Option("auto", help="Coordinates of boxes written in answer text: auto, pixels, norm1, norm1000."),
        bootstrap: int = typer.Option(1000, help="Bootstrap resamples for 95% CIs (0: none)."),
        seed: int = typer.Option(0, help="Bootstrap seed."),
        baseline: Optional[Path] = typer.Option(None, help="Text-only baseline predictions for the shortcut audit (default: a bag-of-words baseline trained on the train split, when there is one)."),
        audit: bool = typer.Option(True, "--audit/--no-audit", help="Shortcut audit (model minus text-only baseline per question type)."),
        judge_url: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL of a judge for open answers, e.g. http://127.0.0.1:8000/v1."),
        judge_model: Optional[str] = typer.Option(None, help="Judge model name (with --judge-url)."),
        judge_key_env: str = typer.Option("OPENAI_API_KEY", help="Environment variable holding the judge API key."),
        judge_cache: Optional[Path] = typer.Option(None, help="Judge cache directory (default $RADVQA_CACHE_DIR or ~/.cache/radvqa)."),
        plots: bool = typer.Option(True, "--plots/--no-plots", help="Draw the report's plots."),
        partitions: Optional[int] = typer.Option(None, "--partitions", min=0, help="Score by N hash partitions of the questions (memory bounded by a partition; 0: one per 125,000 rows). Default: in memory up to 1,000,000 rows, by partitions above. Same numbers either way."),
        workers: int = typer.Option(1, "--workers", min=1, help="Processes scoring partitions at once (with partitions)."),
    ) -> None:
        """Score predictions on a dataset and write the report."""
        from radvqa.eval.boxes import FORMATS
        import pyarrow as pa

        from radvqa.eval.dataset import DatasetError
        from radvqa.eval.evaluate import EvalError, evaluate
        from radvqa.eval.predictions import PredictionError
        from radvqa.eval.report import headline, write_report
        from radvqa.eval.scoring import PROTOCOLS

        if protocol not in PROTOCOLS:
            _fail(f"--protocol must be one of {', '.join(PROTOCOLS)}", code=2)
        if box_format not in FORMATS:
            _fail(f"--box-format must be one of {', '.join(FORMATS)}", code=2)
        if bool(judge_url) != bool(judge_model):
            _fail("--judge-url and --judge-model go together", code=2)
        judge = None
        if judge_url:
            from radvqa.eval.judge import Judge, JudgeConfig

            judge = Judge(JudgeConfig(url=judge_url, model=judge_model or "", api_key_env=judge_key_env,
                                      cache_dir=str(judge_cache) if judge_cache else None))
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                       console=Console(stderr=True), transient=True)
        task = None

        def tick(i: int, n: int) -> None:
            nonlocal task
            if task is None:
                task = bar.add_task("score", total=n)
            bar.update(task, completed=i)

        try:
            with bar:
                rep = evaluate(dataset, predictions, protocol=protocol, id_field=id_field, text_field=text_field,
                               split=split, box_format=box_format, bootstrap=bootstrap, seed=seed, judge=judge,
                               baseline=baseline, audit=audit, progress=tick, partitions=partitions, workers=workers)
        except (DatasetError, PredictionError, EvalError, FileNotFoundError) as e:
            _fail(str(e))
        except (pa.ArrowException, OSError) as e:  # a damaged shard: one line naming it, not a traceback
            from radvqa.io.parquet import damaged_shard

            _fail(damaged_shard(dataset, e))
        finally:
            if judge is not None:
                judge.close()
        paths = write_report(rep, out, plots=plots)
        h = headline(rep)
        for k, v in h.items():
            typer.echo(f"{k}: {round(v, 4) if isinstance(v, float) else v}")
        typer.echo(f"report: {paths['report.html']}")

    @app.command("score-extraction")
    def score_extraction(
        gold: Path = typer.Option(..., "--gold", metavar="FILE", help="Gold entity graphs: RadGraph train/dev/test.json or a RadGraph2 file."),
        fmt: str = typer.Option("radgraph", "--format", metavar="FORMAT", help="radgraph, radgraph2 (change entities scored) or lunguage (Lunguage.csv)."),
        pred: Optional[Path] = typer.Option(None, "--pred", metavar="SG.jsonl", help="Predictions from `radvqa extract` on the gold texts; default: run the rules extractor."),
        labeler: str = typer.Option("labeler_1", "--labeler", help="Which annotator of RadGraph's test.json (labeler_1 or labeler_2)."),
        json_out: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Also write the figures as JSON."),
    ) -> None:
        """Score the report extractor against radiologists' entity graphs (finding, +certainty, +side, +change)."""
        import json

        from radvqa.eval.radgraph import GoldError, format_table, read_predictions, score

        try:
            preds = read_predictions(pred) if pred else None
            res = score(gold, fmt, labeler, predictions=preds)
        except GoldError as e:
            _fail(str(e))
        typer.echo(format_table(res))
        if json_out:
            json_out.write_text(json.dumps(res, indent=1) + "\n", "utf-8")

    imp = typer.Typer(help="Import an existing benchmark into radvqa's QA layout.", no_args_is_help=True)
    app.add_typer(imp, name="import")

    def _import(name: str, path: Path, out: Path, **opts: object) -> None:
        from radvqa.eval.importers import IMPORTERS, ImportError_, write_dataset

        try:
            records = IMPORTERS[name](path, **opts)  # type: ignore[operator]
            m = write_dataset(out, records, name, [str(path)], dict(opts))
        except ImportError_ as e:
            _fail(str(e))
        c = m["counts"]
        typer.echo(f"{name}: {c['qa']} questions ({c['closed']} closed, {c['open']} open; splits {c['by_split']}), "
                   f"{c['rejected']} rejected -> {out}")

    @imp.command("vqa-rad")
    def import_vqa_rad(
        path: Path = typer.Argument(..., help="VQA-RAD folder (with 'VQA_RAD Dataset Public.json') or that file."),
        out: Path = typer.Option(..., "--out", "-o", help="Output dataset directory."),
    ) -> None:
        """VQA-RAD: all questions; split test = phrase_type test_freeform + test_para."""
        _import("vqa-rad", path, out)

    @imp.command("slake")
    def import_slake(
        path: Path = typer.Argument(..., help="SLAKE folder (imgs/ and train/validate/test.json)."),
        out: Path = typer.Option(..., "--out", "-o", help="Output dataset directory."),
        lang: str = typer.Option("en", help="Question language to keep (en or zh); others go to rejected.jsonl."),
    ) -> None:
        """SLAKE: questions of one language, with detection.json boxes."""
        _import("slake", path, out, lang=lang)

    @imp.command("cxr-align")
    def import_cxr_align(
        path: Path = typer.Argument(..., metavar="PATH", help="cxr-align.json, or the folder holding it."),
        out: Path = typer.Option(..., "--out", "-o", help="Output dataset directory."),
        images: Optional[Path] = typer.Option(None, "--images", help="MIMIC-CXR-JPG root: images found by dicom_id."),
        seed: int = typer.Option(0, "--seed", help="Seed of the option order (the correct letter is uniform over positions)."),
    ) -> None:
        """CXR-Align: which of original / negated / omitted report matches the image (multiple choice)."""
        from radvqa.eval.cxralign import import_cxr_align as run
        from radvqa.eval.importers import ImportError_

        try:
            m = run(path, out, images=images, seed=seed)
        except ImportError_ as e:
            _fail(str(e))
        c = m["counts"]
        typer.echo(f"cxr-align: {c['qa']} questions, {c['rejected']} rejected -> {out}")

    @imp.command("cxreasonbench")
    def import_cxreasonbench(
        path: Path = typer.Argument(..., metavar="PATH", help="The CXReasonBench folder (dx_by_dicoms.json and qa/ or qa.zip), qa.zip, or the qa/ folder."),
        out: Path = typer.Option(..., "--out", "-o", help="Output dataset directory."),
        images: Optional[Path] = typer.Option(None, "--images", help="MIMIC-CXR-JPG files/ root: image paths resolved under it."),
    ) -> None:
        """CXReasonBench: path-1 staged questions (init, criteria, body part, measurement, final) with earlier turns as context; `radvqa eval` scores them stage-conditionally."""
        from radvqa.eval.cxreasonbench import import_cxreasonbench as run
        from radvqa.eval.importers import ImportError_

        try:
            m = run(path, out, images=images)
        except ImportError_ as e:
            _fail(str(e))
        c, x = m["counts"], m["cxreasonbench"]
        by = x["turns_by_scoring"]
        typer.echo(f"cxreasonbench: {x['cases']} cases, {c['qa']} turns ({by.get('choice', 0)} one-option, "
                   f"{by.get('any_of', 0)} any-of-several, {by.get('judge', 0)} for the judge), "
                   f"{c['rejected']} rejected (guidance/review paths and unusable cases; see rejected.jsonl) -> {out}")

    @imp.command("medical-diff-vqa")
    def import_medical_diff_vqa(
        path: Path = typer.Argument(..., metavar="PATH", help="Folder or file: the QA table (mimic_pair_questions.csv, any name, .gz ok); a folder may also hold mimic_all.csv."),
        out: Path = typer.Option(..., "--out", "-o", help="Output dataset directory."),
        studies: Optional[Path] = typer.Option(None, "--studies", help="mimic_all.csv (study_date, study_order) for the main/reference order check, when not in PATH."),
        images: Optional[Path] = typer.Option(None, "--images", help="MIMIC-CXR-JPG root (files/pNN/...) for image paths."),
        fix_order: bool = typer.Option(False, "--fix-order", help="Swap study_id/ref_id of reversed difference rows and rewrite their answers, as v1.0.1 did."),
        release: str = typer.Option("unknown", "--release", help="The release you downloaded (1.0, 1.0.1); recorded in the manifest."),
    ) -> None:
        """Medical-Diff-VQA: its seven question types, with a main/reference order check."""
        from radvqa.eval.diffvqa import import_medical_diff_vqa as run
        from radvqa.eval.importers import ImportError_

        try:
            m = run(path, out, studies=studies, images=images, fix_order=fix_order, release=release)
        except ImportError_ as e:
            _fail(str(e))
        c = m["counts"]
        typer.echo(f"medical-diff-vqa: {c['qa']} questions ({c['closed']} closed, {c['open']} open; splits {c['by_split']}), "
                   f"{c['rejected']} rejected -> {out}")
        oc = m["medical_diff_vqa"].get("order_check", {})
        if "pairs" in oc:
            by = oc["pairs_by_order"]
            typer.echo(f"order check: {oc['pairs']} pairs: {by['ok']} ok, {by['reversed']} reversed, {by['tie']} same date, "
                       f"{by['unknown']} not in the study table; fixed {oc['difference_rows_fixed']} difference rows"
                       + (f" ({oc['difference_rows_unfixable']} could not be rewritten)" if oc["difference_rows_unfixable"] else ""))
            if by["reversed"] and not fix_order:
                typer.echo("  reversed pairs are flagged (grade_reasons order:reversed), not changed; --fix-order swaps them", err=True)
        else:
            typer.echo(f"order check: {oc.get('note')}", err=True)

    base = typer.Typer(help="Baselines that never see the image; they write the predictions format.", no_args_is_help=True)
    app.add_typer(base, name="baseline")

    def _baseline(method: str, dataset: Path, out: Path, train_split: str, split: Optional[str], seed: int) -> None:
        from radvqa.eval.baselines import BaselineError, run_baseline, write_predictions
        from radvqa.eval.dataset import DatasetError, load_qa

        try:
            rows = load_qa(dataset)
            ids, preds, info = run_baseline(rows, method, train_split=train_split, eval_split=split, seed=seed)
        except (DatasetError, BaselineError) as e:
            _fail(str(e))
        write_predictions(out, ids, preds, info)
        typer.echo(f"baseline {method}: trained on {info['train_rows']} rows, wrote {len(ids)} predictions -> {out}")

    @base.command("text-only")
    def text_only(
        dataset: Path = typer.Argument(..., help="Dataset directory."),
        out: Path = typer.Option(..., "--out", "-o", help="Predictions JSONL to write."),
        method: str = typer.Option("bow", help="bow (bag-of-words naive Bayes on the question) or majority (majority answer per template)."),
        train_split: str = typer.Option("train", help="Split to learn from."),
        split: Optional[str] = typer.Option(None, help="Split to predict (default: test when there is one, else every row not in --train-split)."),
    ) -> None:
        """Question-only baseline: learns answers from the question text of the train split."""
        if method not in ("bow", "majority"):
            _fail("--method must be bow or majority", code=2)
        _baseline(method, dataset, out, train_split, split, 0)

    @base.command("prior")
    def prior(
        dataset: Path = typer.Argument(..., help="Dataset directory."),
        out: Path = typer.Option(..., "--out", "-o", help="Predictions JSONL to write."),
        train_split: str = typer.Option("train", help="Split to learn the answer prior from."),
        split: Optional[str] = typer.Option(None, help="Split to predict (default: test when there is one, else every row not in --train-split)."),
    ) -> None:
        """The most frequent training answer of each answer kind, for every question."""
        _baseline("prior", dataset, out, train_split, split, 0)

    @base.command("random")
    def random_(
        dataset: Path = typer.Argument(..., help="Dataset directory."),
        out: Path = typer.Option(..., "--out", "-o", help="Predictions JSONL to write."),
        seed: int = typer.Option(0, help="Random seed (same seed, same predictions)."),
        train_split: str = typer.Option("train", help="Split whose answers are the candidates."),
        split: Optional[str] = typer.Option(None, help="Split to predict (default: test when there is one, else every row not in --train-split)."),
    ) -> None:
        """A uniformly random answer of the question's kind (yes/no, one of its options, a training answer)."""
        _baseline("random", dataset, out, train_split, split, seed)
