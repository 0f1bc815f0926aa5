"""`radvqa predict`: run a model over a radvqa dataset and write predictions.jsonl."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("predict")
    def predict(
        dataset: Path = typer.Argument(..., help="Dataset directory (with qa/part-*.parquet) or one Parquet file."),
        model: str = typer.Option(..., "--model", "-m", help="openai:MODEL_NAME or hf:PATH_OR_HUB_ID."),
        out: Path = typer.Option(..., "--out", "-o", help="Predictions JSONL; metadata goes to OUT.meta.json."),
        limit: int | None = typer.Option(None, help="Only the first N rows (after --split)."),
        split: str | None = typer.Option(None, help="Only rows of this split (train/validate/test...)."),
        resume: bool = typer.Option(False, "--resume", help="Continue OUT: answered rows are kept and not asked again."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing OUT."),
        concurrency: int | None = typer.Option(None, help="Requests in flight (openai default 4, hf 1)."),
        batch_size: int | None = typer.Option(None, help="Rows per model call (hf default 8, openai 1)."),
        base_url: str | None = typer.Option(None, help="openai: server URL, e.g. http://localhost:8000/v1 (default $OPENAI_BASE_URL or api.openai.com)."),
        api_key_env: str | None = typer.Option(None, help="openai: environment variable holding the API key (default OPENAI_API_KEY). Keys are never read from the command line."),
        timeout: float | None = typer.Option(None, help="openai: seconds per HTTP request (default 120)."),
        max_retries: int | None = typer.Option(None, help="openai: retries on 429/5xx/connection errors (default 5)."),
        temperature: float | None = typer.Option(None, help="Sampling temperature (default 0: greedy)."),
        max_tokens: int | None = typer.Option(None, help="Maximum new tokens per answer (default 256)."),
        seed: int | None = typer.Option(None, help="openai: seed sent to servers that honour it."),
        device: str | None = typer.Option(None, help="hf: cpu, cuda, cuda:1, mps or auto (default: cuda if available)."),
        dtype: str | None = typer.Option(None, help="hf: auto, float32, bfloat16 or float16 (default auto)."),
        box_convention: str | None = typer.Option(None, help="How the model writes boxes: pixels, norm1000 or norm1 (default per adapter)."),
        prompts: str = typer.Option("default", help="Prompt set: a bundled name or a YAML file."),
        image_root: Path | None = typer.Option(None, help="Directory relative image paths are resolved against (default: manifest, then DATASET)."),
        max_side: int = typer.Option(1024, help="Resize images so the longest side is at most this (0: never). Boxes are mapped back to stored pixels."),
        cache_dir: Path | None = typer.Option(None, help="Prediction cache directory (default $RADVQA_CACHE_DIR or ~/.cache/radvqa/predict)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the prediction cache."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    ) -> None:
        """Run a model over a dataset's questions and write predictions.jsonl (+ .meta.json)."""
        import pyarrow as pa

        from radvqa.models.base import AdapterError
        from radvqa.models.cache import default_cache_dir
        from radvqa.models.images import ImagePrep
        from radvqa.models.predict import PredictError, PredictOptions, Predictor
        from radvqa.models.prompts import PromptError
        from radvqa.models.registry import get_adapter
        from radvqa.models.rows import DatasetError

        if resume and overwrite:
            raise typer.BadParameter("--resume and --overwrite exclude each other")
        if box_convention is not None and box_convention not in ("pixels", "norm1000", "norm1"):
            raise typer.BadParameter("--box-convention must be pixels, norm1000 or norm1")
        try:
            adapter = get_adapter(
                model,
                base_url=base_url,
                api_key_env=api_key_env,
                timeout_s=timeout,
                max_retries=max_retries,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                device=device,
                dtype=dtype,
                box_convention=box_convention,
                concurrency=concurrency if model.startswith("openai:") else None,
                batch_size=batch_size if model.startswith("hf:") else None,
            )
            opts = PredictOptions(
                limit=limit,
                split=split,
                resume=resume,
                overwrite=overwrite,
                concurrency=concurrency,
                batch_size=batch_size,
                prompts=prompts,
                image_root=str(image_root) if image_root else None,
                prep=ImagePrep(max_side=max_side or None),
                cache_dir=None if no_cache else str(cache_dir or default_cache_dir()),
                progress=progress,
            )
            summary = Predictor(adapter, opts).run(dataset, out)
        except (AdapterError, PredictError, PromptError, DatasetError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        except (pa.ArrowException, OSError) as exc:  # a damaged shard: one line naming it, not a traceback
            from radvqa.io.parquet import damaged_shard

            typer.echo(f"error: {damaged_shard(dataset, exc)}", err=True)
            raise typer.Exit(2) from None
        s = summary
        typer.echo(
            f"{s.written} predictions -> {out} ({s.errors} errors, {s.cache_hits} cache hits, "
            f"{s.requests} model requests, {s.skipped_done} already done) "
            f"in {s.elapsed_s:.1f}s, {s.rows_per_s:.2f} rows/s; metadata: {out}.meta.json"
        )
        if s.duplicates:
            typer.echo(f"warning: {s.duplicates} rows repeat an earlier qa_id and were not predicted again", err=True)
        if s.errors:
            typer.echo(f"warning: {s.errors} rows have an error field (see {out})", err=True)
