"""Commands of the quality area: ``radvqa grade`` (judge pass over a built dataset) and
``radvqa audit`` (mechanical defect counts; ``audit shortcuts``: answer shortcuts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("audit")
    def audit_cmd(
        args: List[str] = typer.Argument(..., help="DIR (a radvqa build folder), or: shortcuts DATASET"),
        json_out: Optional[Path] = typer.Option(None, "--json", help="also write the result as JSON here"),
        no_store: bool = typer.Option(False, "--no-store", help="do not record the audit in DIR's manifest and card"),
    ) -> None:
        """Count mechanical defects of a built dataset (self-contradicting answers, duplicate
        statements, raw identifiers, modifiers from negated phrases, answers named by the question),
        print them as a table with examples, record them in manifest.json and the dataset card.
        Exit 1 when a count that must be 0 is not. ``radvqa audit shortcuts DATASET``: answer
        shortcuts (questions answerable without the image)."""
        if args[0] == "shortcuts":
            if len(args) != 2:
                typer.echo("usage: radvqa audit shortcuts DATASET [--json FILE]", err=True)
                raise typer.Exit(2)
            try:
                from radvqa.eval.shortcuts import cli_main  # eval's baselines: it lives above quality
            except ImportError:
                typer.echo("error: `radvqa audit shortcuts` is not available in this version "
                           "(radvqa.eval.shortcuts is missing)", err=True)
                raise typer.Exit(2) from None
            raise typer.Exit(int(cli_main(Path(args[1]), json_out)))
        if len(args) != 1:
            typer.echo("usage: radvqa audit DIR  |  radvqa audit shortcuts DATASET", err=True)
            raise typer.Exit(2)
        from rich.console import Console
        from rich.table import Table

        from radvqa.quality.audit import CHECKS, DESCRIPTIONS, MUST_BE_ZERO, audit_dataset, store

        dataset = Path(args[0])
        try:
            res = audit_dataset(dataset)
        except FileNotFoundError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        n = max(1, res["rows"])
        tab = Table(title=f"radvqa audit {dataset} ({res['rows']:,} rows)")
        for col in ("defect", "must be 0", "rows", "share", "example"):
            tab.add_column(col, overflow="fold")
        for c in CHECKS:
            k = res["counts"][c]
            ex = res["examples"][c]
            e = f"{ex[0]['question']} -> {ex[0]['answer']}" if ex else ""
            tab.add_row(f"{DESCRIPTIONS[c]} ({c})", "yes" if c in MUST_BE_ZERO else "no", f"{k:,}",
                        f"{100.0 * k / n:.2f}%", e[:200])
        Console(width=160).print(tab)
        if json_out is not None:
            json_out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
        if not no_store:
            store(dataset, res)
        if res["failed"]:
            typer.echo(f"FAILED: must be 0: {', '.join(res['failed'])}", err=True)
            raise typer.Exit(1)
        typer.echo("ok: every must-be-0 count is 0")

    @app.command("grade")
    def grade_cmd(
        dataset: Path = typer.Argument(..., help="a radvqa build output folder"),
        judge_url: str = typer.Option(..., "--judge-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1"),
        judge_model: str = typer.Option(..., "--judge-model", help="model name sent to the server"),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="write here (default: DATASET in place)"),
        limit: Optional[int] = typer.Option(None, "--limit", min=0, help="ask the judge about at most N rows"),
        concurrency: int = typer.Option(4, "--concurrency", "-k", min=1, help="requests in flight"),
        cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="judge cache folder (default: RADVQA_CACHE_DIR or ~/.cache/radvqa/predict/grade-judge)"),
        resume: bool = typer.Option(False, "--resume", help="finish an interrupted pass (finished shards are kept)"),
        api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY, optional)"),
        retries: int = typer.Option(4, "--retries", min=0, help="retries per request on 429/5xx/connection errors"),
        timeout_s: float = typer.Option(120.0, "--timeout", help="seconds per request"),
        as_json: bool = typer.Option(False, "--json", help="print the manifest's judge section as JSON"),
    ) -> None:
        """Judge every QA row against its report (CXR-QBA's criteria: entailment, relevance,
        completeness, question and answer clarity); grade = min(rule grade, judge criteria).
        Rewrites the qa shards and adds a "judge" section to manifest.json."""
        from radvqa.models.base import AdapterError
        from radvqa.quality.judge import CriteriaJudge
        from radvqa.quality.regrade import GradeError, grade_dataset

        try:
            judge = CriteriaJudge(judge_url, judge_model, cache_dir=cache_dir, api_key_env=api_key_env,
                                  timeout_s=timeout_s, max_retries=retries)
        except AdapterError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None

        def on_shard(name: str, st: object) -> None:
            s = st.__dict__  # type: ignore[attr-defined]
            typer.echo(f"{name}: {s['rows']} rows, judged {s['judged']}, failed {s['failed']}, "
                       f"not applicable {s['not_applicable']}, lowered {s['lowered']}", err=True)

        try:
            sec = grade_dataset(dataset, judge, out, limit=limit, concurrency=concurrency, resume=resume,
                                on_shard=on_shard)
        except (GradeError, FileNotFoundError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        finally:
            judge.close()
        if as_json:
            typer.echo(json.dumps(sec, indent=1))
            return
        typer.echo(f"judge {sec['model']} (prompt {sec['prompt_version']}): {sec['rows']} rows; judged "
                   f"{sec['judged']} ({sec['from_cache']} from cache), failed {sec['failed']}, not applicable "
                   f"{sec['not_applicable']}, not judged (--limit) {sec['not_judged_limit']}; lowered {sec['lowered']}")
        typer.echo(f"grades before {sec['grades_before']}")
        typer.echo(f"grades after  {sec['grades_after']}")
        if sec["failed"]:
            typer.echo(f"failures: {sec['failure_reasons']}", err=True)
            if not sec["judged"]:  # nothing got through: most likely a wrong URL or model name
                raise typer.Exit(1)

    judge_app = typer.Typer(help="Check the LLM judge against human judgements.", no_args_is_help=True)
    app.add_typer(judge_app, name="judge")

    @judge_app.command("validate")
    def judge_validate(
        judge_url: str = typer.Option(..., "--judge-url", metavar="URL", help="OpenAI-compatible base URL of the judge."),
        judge_model: str = typer.Option(..., "--judge-model", metavar="NAME", help="Judge model name."),
        radnli: Optional[Path] = typer.Option(None, "--radnli", metavar="FILE", help="RadNLI radnli_dev_v1.jsonl / radnli_test_v1.jsonl."),
        rexval: Optional[Path] = typer.Option(None, "--rexval", metavar="DIR", help="ReXVal folder (the two CSV tables)."),
        significant_only: bool = typer.Option(False, "--significant-only", help="ReXVal: count only clinically significant errors."),
        cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", metavar="DIR", help="Judge cache (default: the user cache)."),
        json_out: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Also write the figures as JSON."),
    ) -> None:
        """RadNLI accuracy of the judge's entailment calls; ReXVal Kendall tau of its error counts."""
        from radvqa.quality.judge_validate import (
            ValidationError, make_judge, read_radnli, read_rexval, validate_radnli, validate_rexval,
        )

        if radnli is None and rexval is None:
            typer.echo("error: give --radnli FILE and/or --rexval DIR", err=True)
            raise typer.Exit(2)
        out: dict[str, object] = {"judge_model": judge_model}
        try:
            if radnli is not None:
                pairs = read_radnli(radnli)
                j = make_judge(judge_url, judge_model, "radnli", cache_dir)
                try:
                    r = validate_radnli(j, pairs)
                finally:
                    j.close()
                out["radnli"] = {"file": str(radnli), "prompt_version": j.prompt.version, **r}
                def pct(x: float | None) -> str:
                    return "n/a" if x is None else f"{100 * x:.1f}%"

                rec = ", ".join(f"{k} {pct(v['recall'])} (n={v['n']})" for k, v in r["per_class_recall"].items())
                typer.echo(f"RadNLI: accuracy {pct(r['accuracy_over_judged'])} of {r['judged']} judged "
                           f"({pct(r['accuracy_over_all'])} of all {r['pairs']}, unjudged counted wrong); recall: {rec}")
            if rexval is not None:
                items = read_rexval(rexval, significant_only)
                j = make_judge(judge_url, judge_model, "rexval", cache_dir)
                try:
                    r = validate_rexval(j, items)
                finally:
                    j.close()
                out["rexval"] = {"folder": str(rexval), "significant_only": significant_only, "prompt_version": j.prompt.version, **r}
                def rnd(x: float | None) -> str:
                    return "n/a" if x is None else str(round(x, 3))

                ci = r["ci95"]
                typer.echo(f"ReXVal: Kendall tau-b {rnd(r['tau_b'])} (95% bootstrap CI {rnd(ci[0])} to {rnd(ci[1])}) "
                           f"over {r['judged']} of {r['pairs']} candidate reports")
        except ValidationError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1)  # bad input files (docs/CLI.md: 2 is for command-line misuse)
        if json_out:
            json_out.write_text(json.dumps(out, indent=1) + "\n", "utf-8")
        unjudged = sum(int(v.get("unjudged", 0)) for v in out.values() if isinstance(v, dict))
        judged = sum(int(v.get("judged", 0)) for v in out.values() if isinstance(v, dict))
        if unjudged:
            typer.echo(f"{unjudged} items could not be judged", err=True)
            if not judged:
                raise typer.Exit(1)
