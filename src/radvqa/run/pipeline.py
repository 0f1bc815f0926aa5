"""The per-study chain: extract -> localize -> generate, as one object a worker builds once.

Each stage is the other areas' public function (docs/ARCHITECTURE.md); this module only calls them,
times them, and turns every failure into a ``Reject`` line with the stage that failed. A study is
*out* when it has a scene graph (even with zero QA rows); it is *rejected* when extract or localize
could not give one. A generator failure is a reject line, but the study (and its scene graph) stays
out, so ``studies_in = studies_out + studies_rejected`` holds exactly.

``make_pipeline(options)`` builds the real chain; tests and benchmarks may name another factory
(``options["pipeline"] = "module:function"``) taking the same options dict.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from radvqa.model import QA, Reject, SceneGraph, Study
from radvqa.splits import normalize_split


@dataclass
class StudyResult:
    scene_graph: SceneGraph | None
    qa: list[QA] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)


class Pipeline(Protocol):
    timings: dict[str, float]

    def process(self, study: Study, prior: SceneGraph | None) -> StudyResult: ...


def _reason(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


class StagePipeline:
    """The real chain over the other areas' stage functions."""

    def __init__(self, options: dict[str, Any]) -> None:
        from radvqa.extract import get_extractor  # type: ignore[attr-defined]
        from radvqa.generate import GenerateOptions, Generator  # type: ignore[attr-defined]
        from radvqa.localize import build_scene_graph  # type: ignore[attr-defined]
        from radvqa.ontology import load_ontology

        self.options = options
        self.ontology = load_ontology()
        ex_kwargs = dict(options.get("extractor_options") or {})
        self.extractor = get_extractor(options.get("extractor", "rules"), ontology=self.ontology, **ex_kwargs)
        self.build_scene_graph = build_scene_graph
        gen_opts = msgspec.convert(options["generate"], GenerateOptions)  # BuildOptions.generate
        self.generator = Generator(self.ontology, gen_opts)
        # CPU seconds of this process per stage (wall time per stage means little when several
        # workers share a machine, and CPU seconds add up across workers)
        self.timings: dict[str, float] = {"extract": 0.0, "localize": 0.0, "generate": 0.0}

    def process(self, study: Study, prior: SceneGraph | None) -> StudyResult:
        rejects: list[Reject] = []
        src = study.source
        extraction = None
        t0 = time.process_time()
        if study.report_text is not None:
            try:
                if study.annotations is not None:
                    # people annotated this report (RadGraph, Lunguage): state their observations
                    from radvqa.extract.annotated import extract_annotated

                    extraction = extract_annotated(study, self.ontology)
                else:
                    extraction = self.extractor.extract(study.report_text, study.id)
            except Exception as exc:  # noqa: BLE001 - any stage failure becomes a reject line
                rejects.append(Reject(source=src, ref=study.id, reason=f"extractor failed: {_reason(exc)}", stage="extract"))
            else:
                if getattr(extraction, "error", None):
                    rejects.append(Reject(source=src, ref=study.id, reason=f"report not usable: {extraction.error}", stage="extract"))
                    extraction = None
            if study.annotations is None and any(k.startswith("transcription:") for k in study.meta):
                # other readers' dictations (REFLACX): their findings are those readers' labels
                from radvqa.extract.dictations import with_reader_dictations

                study = with_reader_dictations(study, self.extractor)
        t1 = time.process_time()
        self.timings["extract"] += t1 - t0
        if extraction is None and not study.labels and not study.boxes:
            self.timings["localize"] += 0.0
            reason = "no usable report text and no labels or boxes" if study.report_text is not None else "no report text, labels or boxes"
            if study.report_text is None and study.images:
                # e.g. a DICOM-only folder: documented in docs/generation.md ("Image-only studies")
                reason = ("images only (no report text, labels or boxes): every question template needs a finding "
                          "source, so none is asked; add reports or labels (docs/generation.md, image-only studies)")
            return StudyResult(None, [], rejects + [Reject(source=src, ref=study.id, reason=reason, stage="extract")])
        try:
            sg, loc_rejects = self.build_scene_graph(study, extraction, ontology=self.ontology)
        except Exception as exc:  # noqa: BLE001
            self.timings["localize"] += time.process_time() - t1
            return StudyResult(None, [], rejects + [Reject(source=src, ref=study.id, reason=f"scene graph failed: {_reason(exc)}", stage="localize")])
        t2 = time.process_time()
        self.timings["localize"] += t2 - t1
        rejects.extend(loc_rejects or [])
        if sg is None:
            if not any(r.ref == study.id for r in rejects):
                rejects.append(Reject(source=src, ref=study.id, reason="no scene graph", stage="localize"))
            return StudyResult(None, [], rejects)
        set_prior(sg, prior)
        qas: list[QA] = []
        try:
            qas = self.generator.generate(sg, prior=prior if sg.prior_study_id else None)
        except Exception as exc:  # noqa: BLE001
            rejects.append(Reject(source=src, ref=study.id, reason=f"QA generation failed: {_reason(exc)}", stage="generate"))
            qas = []
        self.timings["generate"] += time.process_time() - t2
        if sg.split is not None:
            # the rows write the split normalised (MIMIC's "validate" -> "validation"); the scene
            # graph names the same one, else `radvqa validate` finds the patient in two splits
            sg.split = normalize_split(sg.split)
        elif qas:
            sg.split = qas[0].split
        return StudyResult(sg, qas, rejects)


def set_prior(sg: SceneGraph, prior: SceneGraph | None) -> None:
    """Link the patient's previous study, only when it is strictly earlier in time."""
    if prior is None or prior.patient_id != sg.patient_id:
        return
    if prior.study_time is not None and sg.study_time is not None and prior.study_time < sg.study_time:
        sg.prior_study_id = prior.study_id


_CACHE: dict[str, Pipeline] = {}


def make_pipeline(options: dict[str, Any]) -> Pipeline:
    """The pipeline for ``options`` (built once per process and reused across shards)."""
    import json

    key = json.dumps(options, sort_keys=True, default=str)
    pipe = _CACHE.get(key)
    if pipe is None:
        factory: Callable[[dict[str, Any]], Pipeline] = StagePipeline
        spec = options.get("pipeline")
        if spec:
            mod, _, fn = str(spec).partition(":")
            factory = getattr(importlib.import_module(mod), fn)
        pipe = factory(options)
        _CACHE[key] = pipe
    pipe.timings = {k: 0.0 for k in pipe.timings}
    return pipe
