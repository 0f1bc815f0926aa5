"""The `radvqa predict` runner: stream rows -> prompts -> cache / adapter -> predictions.jsonl.

Output lines come in dataset order whatever the concurrency (an ordered write-behind queue), one
per row: {"qa_id", "prediction", "boxes"?, "error"?, "latency_s"?, ...}. `--resume` keeps every
answered line, drops error lines and a torn last line, and asks only for the rest; run metadata
goes to `<out>.meta.json`.
"""

from __future__ import annotations

import collections
import datetime as _dt
import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from radvqa.models.base import Adapter, Request, Response
from radvqa.models.boxes import find_boxes, to_stored_pixels
from radvqa.models.cache import PredictionCache, cache_key
from radvqa.models.images import ImageLoadError, ImagePrep, LoadedImage, load_image
from radvqa.models.prompts import PromptError, PromptSet, load_prompts
from radvqa.models.rows import ImageResolver, QADataset

BOX_OUTPUT = "x1,y1,x2,y2 in pixels of the stored file of the row's first image (image_paths[0])"
# metadata keys that must match for --resume to append to an existing file
_RESUME_KEYS = ("model", "params", "prompt_set", "image_prep", "box_convention")


class PredictError(RuntimeError):
    pass


@dataclass
class PredictOptions:
    limit: int | None = None
    split: str | None = None
    resume: bool = False
    overwrite: bool = False
    concurrency: int | None = None  # None: the adapter's default
    batch_size: int | None = None
    prompts: str = "default"
    image_root: str | None = None
    prep: ImagePrep = field(default_factory=ImagePrep)
    cache_dir: str | None = None  # None: no cache
    progress: bool = True
    keep_imageless: bool = False  # send rows without any image file too (they fail: no image to show)


@dataclass
class PredictSummary:
    rows: int = 0  # rows in scope (after --split and --limit)
    skipped_done: int = 0  # already answered in the existing file (--resume)
    written: int = 0
    errors: int = 0
    cache_hits: int = 0
    requests: int = 0  # rows sent to the model
    duplicates: int = 0  # rows whose qa_id occurred earlier in the dataset (not predicted twice)
    no_image: int = 0  # rows without any image file, kept out (not sent, not counted by --limit)
    elapsed_s: float = 0.0

    @property
    def rows_per_s(self) -> float:
        return self.written / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["rows_per_s"] = round(self.rows_per_s, 3)
        d["elapsed_s"] = round(self.elapsed_s, 3)
        return d


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta_path(out: Path) -> Path:
    return out.with_name(out.name + ".meta.json")


def read_done(out: Path) -> tuple[list[bytes], set[str], int]:
    """Lines to keep from an existing predictions file, their qa_ids, and how many were dropped.

    Kept: well-formed lines with a qa_id and no error, first occurrence only. Dropped: error lines
    (asked again), a torn last line from a killed run, duplicates."""
    keep: list[bytes] = []
    done: set[str] = set()
    dropped = 0
    with out.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                dropped += 1  # torn write: the process died mid-line
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                dropped += 1
                continue
            qid = obj.get("qa_id") if isinstance(obj, dict) else None
            if not isinstance(qid, str) or obj.get("error") or qid in done:
                dropped += 1
                continue
            done.add(qid)
            keep.append(raw)
    return keep, done, dropped


@dataclass
class _Item:
    """One row on its way out: `line` when known now, else filled from a chunk future."""

    row: dict[str, Any]
    line: dict[str, Any] | None = None
    request: Request | None = None
    key: str | None = None


class _Progress:
    def __init__(self, total: int | None, enabled: bool, label: str) -> None:
        self.enabled = enabled
        self._p = None
        self._t0 = time.perf_counter()
        self.n = 0
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._p = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.2f} rows/s"),
                TextColumn("err {task.fields[errors]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
            )
            self._p.start()
            self._task = self._p.add_task(label, total=total, rate=0.0, errors=0)

    def advance(self, k: int, errors: int) -> None:
        self.n += k
        if self._p is not None:
            dt = time.perf_counter() - self._t0
            self._p.update(self._task, advance=k, rate=self.n / dt if dt > 0 else 0.0, errors=errors)

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()


class Predictor:
    def __init__(self, adapter: Adapter, options: PredictOptions | None = None) -> None:
        self.adapter = adapter
        self.opts = options or PredictOptions()
        self.prompts: PromptSet = load_prompts(self.opts.prompts)
        self.cache = PredictionCache(self.opts.cache_dir) if self.opts.cache_dir else None
        self._image_memo: dict[str, LoadedImage] = {}

    # -- metadata -------------------------------------------------------------------------------
    def metadata(self, dataset: QADataset) -> dict[str, Any]:
        from radvqa import __version__

        run_params = getattr(self.adapter, "run_params", lambda: {})()
        return {
            "format": "radvqa-predictions/1",
            "radvqa_version": __version__,
            "model": self.adapter.spec,
            "params": self.adapter.params(),
            "run_params": run_params,
            "prompt_set": self.prompts.tag,
            "system_prompt": self.prompts.system,
            "image_prep": self.opts.prep.as_dict(),
            "box_convention": self.adapter.box_convention,
            "box_output": BOX_OUTPUT,
            "dataset": str(dataset.path.resolve()),
            "dataset_version": dataset.manifest.get("version"),
            "split": self.opts.split,
            "limit": self.opts.limit,
            "concurrency": self._concurrency(),
            "batch_size": self._batch_size(),
            "cache": str(Path(self.opts.cache_dir).resolve()) if self.opts.cache_dir else None,
        }

    def _concurrency(self) -> int:
        return max(1, self.opts.concurrency or self.adapter.default_concurrency)

    def _batch_size(self) -> int:
        return max(1, self.opts.batch_size or self.adapter.default_batch_size)

    # -- row preparation -----------------------------------------------------------------------
    def _load(self, path: Path) -> LoadedImage:
        key = str(path)
        img = self._image_memo.get(key)
        if img is None:
            img = load_image(path, self.opts.prep)
            if len(self._image_memo) > 256:  # rows of one study are adjacent: a small memo suffices
                self._image_memo.clear()
            self._image_memo[key] = img
        return img

    def _prepare(self, row: dict[str, Any], resolver: ImageResolver) -> _Item:
        qa_id = row["qa_id"]
        item = _Item(row=row)
        paths = row.get("image_paths") or []
        if not paths:
            item.line = {"qa_id": qa_id, "prediction": None, "error": "row has no image_paths"}
            return item
        images: list[LoadedImage] = []
        for i, p in enumerate(paths):
            if not p:
                ids = row.get("image_ids") or []
                ref = f" for image {ids[i]}" if i < len(ids) else ""
                item.line = {
                    "qa_id": qa_id,
                    "prediction": None,
                    "error": f"empty image path{ref}: the dataset has no image file for this row",
                }
                return item
            resolved = resolver.resolve(p)
            if resolved is None:
                item.line = {
                    "qa_id": qa_id,
                    "prediction": None,
                    "error": f"image not found: {p} (looked in {resolver.describe()})",
                }
                return item
            try:
                images.append(self._load(resolved))
            except ImageLoadError as exc:
                item.line = {"qa_id": qa_id, "prediction": None, "error": str(exc)}
                return item
        try:
            family, prompt = self.prompts.render(
                row,
                box_convention=self.adapter.box_convention,
                image_size=images[0].sent_size,
                n_images=len(images),
            )
        except PromptError as exc:
            item.line = {"qa_id": qa_id, "prediction": None, "error": str(exc)}
            return item
        item.request = Request(
            qa_id=qa_id, prompt=prompt, images=tuple(images), system=self.prompts.system, family=family
        )
        if self.cache is not None:
            item.key = cache_key(
                model=self.adapter.spec,
                params=self.adapter.params(),
                prep=self.opts.prep.as_dict(),
                prompt_tag=self.prompts.tag,
                system=self.prompts.system,
                prompt=prompt,
                image_hashes=[im.sha256 for im in images],
            )
            hit = self.cache.get(item.key)
            if hit is not None:
                seen = [tuple(s) for s in hit.get("seen_sizes") or []] or None
                item.line = self._line(item.request, Response(text=hit["text"], seen_sizes=seen))
                item.line["cached"] = True
        return item

    def _line(self, req: Request, resp: Response) -> dict[str, Any]:
        line: dict[str, Any] = {"qa_id": req.qa_id, "prediction": resp.text}
        if resp.error:
            line["prediction"] = None
            line["error"] = resp.error
        else:
            raw = find_boxes(resp.text)
            if raw:
                first = req.images[0]
                seen = resp.seen_sizes[0] if resp.seen_sizes else first.sent_size
                line["boxes"] = to_stored_pixels(
                    raw, self.adapter.box_convention, seen, first.stored_size
                )
                line["boxes_raw"] = raw
                line["image_size"] = list(first.stored_size)
        line["family"] = req.family
        if resp.latency_s is not None:
            line["latency_s"] = round(resp.latency_s, 4)
        return line

    def _run_chunk(self, chunk: list[_Item]) -> list[dict[str, Any]]:
        todo = [it for it in chunk if it.line is None and it.request is not None]
        reqs = [it.request for it in todo]
        try:
            resps = self.adapter.generate(reqs) if reqs else []  # type: ignore[arg-type]
            if len(resps) != len(reqs):
                raise RuntimeError(f"adapter returned {len(resps)} responses for {len(reqs)}")
        except Exception as exc:  # one failing batch must not kill a long run: record it per row
            resps = [Response(text=None, error=f"{type(exc).__name__}: {exc}") for _ in reqs]
        for it, resp in zip(todo, resps):
            assert it.request is not None
            if self.cache is not None and it.key and resp.error is None and resp.text is not None:
                self.cache.put(
                    it.key,
                    {"text": resp.text, "seen_sizes": [list(s) for s in resp.seen_sizes or []]},
                )
            it.line = self._line(it.request, resp)
        return [it.line for it in chunk if it.line is not None]

    # -- the run --------------------------------------------------------------------------------
    def run(self, dataset_dir: str | Path, out: str | Path) -> PredictSummary:
        dataset = QADataset.open(dataset_dir)
        out = Path(out)
        mpath = meta_path(out)
        meta = self.metadata(dataset)
        done: set[str] = set()
        summary = PredictSummary()
        if out.exists() and out.stat().st_size > 0:
            if self.opts.resume:
                if mpath.exists():
                    old = json.loads(mpath.read_text(encoding="utf-8"))
                    diff = [k for k in _RESUME_KEYS if old.get(k) != meta.get(k)]
                    if diff:
                        raise PredictError(
                            f"--resume: {out} was made with different {', '.join(diff)}; "
                            "use another --out or --overwrite"
                        )
                keep, done, _dropped = read_done(out)
                tmp = out.with_name(out.name + ".tmp")
                with tmp.open("wb") as fh:
                    fh.writelines(keep)
                os.replace(tmp, out)
            elif not self.opts.overwrite:
                raise PredictError(f"{out} exists: pass --resume to continue it or --overwrite")
            else:
                out.unlink()
        out.parent.mkdir(parents=True, exist_ok=True)
        meta.update(status="running", started_at=_now())
        mpath.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

        total = dataset.count(self.opts.split)
        if self.opts.limit is not None:
            total = min(total, self.opts.limit)
        summary.rows = total
        resolver = ImageResolver(dataset.image_roots(self.opts.image_root))
        t0 = time.perf_counter()
        progress = _Progress(None, self.opts.progress, "predict")
        status = "failed"
        try:
            self._loop(dataset, resolver, out, done, summary, progress, total)
            status = "complete"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            progress.close()
            summary.elapsed_s = time.perf_counter() - t0
            if self.cache is not None:
                summary.cache_hits = self.cache.hits
            meta.update(status=status, finished_at=_now(), counts=summary.as_dict())
            mpath.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return summary

    def _rows(self, dataset: QADataset, done: set[str], summary: PredictSummary) -> Iterator[dict[str, Any]]:
        n = 0
        seen: set[str] = set()
        for row in dataset.iter_rows(self.opts.split):
            paths = row.get("image_paths") or ()
            if not self.opts.keep_imageless and not (paths and all(paths)):
                # label-only studies (an image without its file): nothing to show a vision model (#17)
                summary.no_image += 1
                continue
            if self.opts.limit is not None and n >= self.opts.limit:
                return
            n += 1
            qid = row.get("qa_id")
            if qid is None or qid == "":
                raise PredictError(f"{dataset.path}: row {n} (after --split) has no qa_id")
            qid = row["qa_id"] = str(qid)
            if qid in done:
                summary.skipped_done += 1
                continue
            if qid in seen:
                # the contract says qa_id is unique; a second line would make the file ambiguous
                summary.duplicates += 1
                continue
            seen.add(qid)
            yield row

    def _loop(
        self,
        dataset: QADataset,
        resolver: ImageResolver,
        out: Path,
        done: set[str],
        summary: PredictSummary,
        progress: _Progress,
        total: int,
    ) -> None:
        if progress._p is not None:
            progress._p.update(progress._task, total=max(0, total - len(done)))
        conc, bsize = self._concurrency(), self._batch_size()
        max_inflight = conc * 2
        # queue entries: ("line", dict) or ("chunk", Future, n_items)
        queue: collections.deque[tuple[str, Any]] = collections.deque()
        inflight = 0

        pool = ThreadPoolExecutor(max_workers=conc, thread_name_prefix="radvqa-predict")
        clean = False
        with out.open("a", encoding="utf-8") as fh:

            def emit(lines: list[dict[str, Any]]) -> None:
                for line in lines:
                    fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                    summary.written += 1
                    if line.get("error"):
                        summary.errors += 1
                fh.flush()  # a killed run loses at most the line being written
                progress.advance(len(lines), summary.errors)

            def drain(block: bool) -> None:
                nonlocal inflight
                while queue:
                    kind, val = queue[0]
                    if kind == "line":
                        queue.popleft()
                        emit([val])
                        continue
                    fut: Future = val
                    if not block and not fut.done():
                        return
                    queue.popleft()
                    inflight -= 1
                    emit(fut.result())
                    block = block and inflight >= max_inflight  # block only to free a slot

            def submit(chunk: list[_Item]) -> None:
                nonlocal inflight
                queue.append(("chunk", pool.submit(self._run_chunk, chunk)))
                inflight += 1
                drain(block=inflight >= max_inflight)

            try:
                self._feed(dataset, resolver, done, summary, queue, drain, submit, bsize)
                clean = True
            finally:
                # on Ctrl-C / errors do not wait for requests in flight (they may take minutes);
                # what was written is whole lines, and --resume asks for the rest
                pool.shutdown(wait=clean, cancel_futures=not clean)

    def _feed(self, dataset, resolver, done, summary, queue, drain, submit, bsize) -> None:  # type: ignore[no-untyped-def]
        """Prepare rows in order; rows needing the model go out in chunks of `bsize` requests."""
        # rows answered without the model (cache hit, missing image) ride along in the next
        # chunk, so batches stay full and the output keeps dataset order
        pending: list[_Item] = []
        n_req = 0
        for row in self._rows(dataset, done, summary):
            item = self._prepare(row, resolver)
            if item.line is not None and not pending:
                queue.append(("line", item.line))
                drain(block=False)
                continue
            pending.append(item)
            if item.line is None:
                n_req += 1
                summary.requests += 1
            if n_req >= bsize:
                submit(pending)
                pending, n_req = [], 0
        if pending:
            submit(pending)
        while queue:
            drain(block=True)
