"""``radvqa extract`` (reports -> scene graphs, JSONL) and ``radvqa label`` (reports -> label CSV)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


# --hedges value -> RulesExtractor(hedges=...): "uncertain" keeps alternatives ("X or Y") and
# "likely"/"probable"/"borderline" uncertain (-1); "commit" counts them present (1), as label sets
# indexed from MeSH do (the OpenI NIH-14 gold). extract/README.md gives the NIH-14 F1 both ways.
HEDGES = {"uncertain": "keep", "commit": "commit"}


def _extractor(name: str, llm_url: Optional[str], llm_model: Optional[str], llm_api_key: Optional[str],
               concurrency: int, cache_dir: Optional[Path], hedges: str = "uncertain"):  # type: ignore[no-untyped-def]
    from radvqa.extract import get_extractor
    from radvqa.ontology import load_ontology

    if hedges not in HEDGES:
        raise typer.BadParameter(f"{hedges!r}: uncertain or commit", param_hint="--hedges")
    onto = load_ontology()
    if name == "llm":
        if hedges != "uncertain":
            raise typer.BadParameter("--hedges commit is a rule of the rules extractor (--extractor rules)",
                                     param_hint="--hedges")
        if not llm_url or not llm_model:
            raise typer.BadParameter("--extractor llm needs --llm-url and --llm-model")
        return onto, get_extractor("llm", ontology=onto, url=llm_url, model=llm_model, api_key=llm_api_key,
                                   concurrency=concurrency, cache_dir=cache_dir)
    if name != "rules":
        raise typer.BadParameter(f"unknown extractor {name!r} (rules or llm)")
    return onto, get_extractor("rules", ontology=onto, hedges=HEDGES[hedges])


def _run(input_path: Path, ex, limit: Optional[int], what: str):  # type: ignore[no-untyped-def]
    """Yield (id, Extraction | Reject) over INPUT with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from radvqa.extract.inputs import count_reports, read_reports
    from radvqa.model import Reject

    try:
        records = read_reports(input_path)
    except (FileNotFoundError, ValueError) as e:
        raise typer.BadParameter(str(e), param_hint="INPUT") from None
    total = count_reports(input_path)
    if limit is not None and total is not None:
        total = min(total, limit)

    def pairs():  # type: ignore[no-untyped-def]
        n = 0
        for rec in records:
            if limit is not None and n >= limit:
                return
            n += 1
            yield rec

    from collections import deque

    rejects: list[Reject] = []
    items: deque[str] = deque()  # ids in input order; extract_many yields in the same order

    progress: list = []  # [bar, task] once the bar exists (texts() runs inside the with block)

    def texts():  # type: ignore[no-untyped-def]
        for rec in pairs():
            if isinstance(rec, Reject):
                rejects.append(rec)
                if progress:
                    progress[0].advance(progress[1])
                continue
            items.append(rec[0])
            yield rec

    with Progress(TextColumn(f"[bold]{what}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  transient=False, disable=None) as bar:
        task = bar.add_task(what, total=total)
        progress.extend((bar, task))
        for extraction in ex.extract_many(texts()):
            rid = items.popleft() if items else ""
            bar.advance(task)
            yield rid, extraction
        yield from ((r.ref, r) for r in rejects)


def _write_rejects(path: Path, rejects: list) -> None:  # type: ignore[type-arg]
    from radvqa.model import to_json

    with path.open("wb") as fh:
        for r in rejects:
            fh.write(to_json(r) + b"\n")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("extract")
    def extract_cmd(
        input_path: Path = typer.Argument(..., metavar="INPUT", help="CSV with id,text; folder of .txt; OpenI XML .tgz or folder."),
        out: Path = typer.Option(..., "--out", help="Output JSONL: one scene graph (SceneGraph JSON) per report."),
        extractor: str = typer.Option("rules", "--extractor", help="rules (offline, default) or llm."),
        llm_url: Optional[str] = typer.Option(None, "--llm-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1"),
        llm_model: Optional[str] = typer.Option(None, "--llm-model", help="Model name on that server."),
        llm_api_key: Optional[str] = typer.Option(None, "--llm-api-key", envvar="RADVQA_LLM_API_KEY", help="API key, if the server needs one."),
        concurrency: int = typer.Option(8, "--concurrency", help="LLM: requests in flight."),
        cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="LLM: on-disk response cache."),
        limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N reports."),
    ) -> None:
        """Reports -> scene graphs (JSONL). Unusable reports go to OUT.rejected.jsonl with a reason."""
        from radvqa.model import Reject, SceneGraph, to_json

        _, ex = _extractor(extractor, llm_url, llm_model, llm_api_key, concurrency, cache_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        rejects: list[Reject] = []
        n = 0
        with out.open("wb") as fh:
            for rid, res in _run(input_path, ex, limit, "extract"):
                if isinstance(res, Reject):
                    rejects.append(res)
                    continue
                if res.error is not None:
                    rejects.append(Reject(source="report", ref=rid, reason=res.error, stage="extract"))
                    continue
                sg = SceneGraph(study_id=rid, patient_id=rid, source="report", report=res.report,
                                indication=res.indication, observations=res.observations, extractor=res.extractor)
                fh.write(to_json(sg) + b"\n")
                n += 1
        rej_path = out.with_name(out.name + ".rejected.jsonl")
        _write_rejects(rej_path, rejects)
        typer.echo(f"{n} scene graphs -> {out}; {len(rejects)} rejected -> {rej_path}")

    @app.command("label")
    def label_cmd(
        input_path: Path = typer.Argument(..., metavar="INPUT", help="CSV with id,text; folder of .txt; OpenI XML .tgz or folder."),
        scheme: str = typer.Option(..., "--scheme", help="Label scheme: nih14 or chexpert14 (any ontology scheme)."),
        out: Path = typer.Option(..., "--out", help="Output CSV: id, then one column per label (1, 0, -1, empty)."),
        extractor: str = typer.Option("rules", "--extractor", help="rules (offline, default) or llm."),
        llm_url: Optional[str] = typer.Option(None, "--llm-url"),
        llm_model: Optional[str] = typer.Option(None, "--llm-model"),
        llm_api_key: Optional[str] = typer.Option(None, "--llm-api-key", envvar="RADVQA_LLM_API_KEY"),
        concurrency: int = typer.Option(8, "--concurrency"),
        cache_dir: Optional[Path] = typer.Option(None, "--cache-dir"),
        limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N reports."),
        hedges: str = typer.Option("uncertain", "--hedges",
                                   help="uncertain (default): 'X or Y' and 'likely X' give -1; commit: they give 1, "
                                        "as MeSH-indexed label sets (OpenI NIH-14 gold) count them."),
    ) -> None:
        """Report labels: column id, then one column per label of the scheme: 1 positive, 0 negative,
        -1 uncertain, empty not mentioned. Unusable reports go to OUT.rejected.jsonl."""
        import csv

        from radvqa.extract.labels import Labeler
        from radvqa.model import Reject

        onto, ex = _extractor(extractor, llm_url, llm_model, llm_api_key, concurrency, cache_dir, hedges)
        try:
            labeler = Labeler(onto, scheme)
        except KeyError as e:
            raise typer.BadParameter(str(e.args[0]), param_hint="--scheme") from None
        out.parent.mkdir(parents=True, exist_ok=True)
        rejects: list[Reject] = []
        n = 0
        with out.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["id", *labeler.labels])
            for rid, res in _run(input_path, ex, limit, f"label {scheme}"):
                if isinstance(res, Reject):
                    rejects.append(res)
                    continue
                if res.error is not None:
                    rejects.append(Reject(source="report", ref=rid, reason=res.error, stage="extract"))
                    continue
                lab = labeler.label(res)
                w.writerow([rid, *("" if lab[k] is None else lab[k] for k in labeler.labels)])
                n += 1
        rej_path = out.with_name(out.name + ".rejected.jsonl")
        _write_rejects(rej_path, rejects)
        typer.echo(f"{n} reports labelled ({scheme}) -> {out}; {len(rejects)} rejected -> {rej_path}")
