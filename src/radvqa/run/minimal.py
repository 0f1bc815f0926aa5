"""A minimal, dependency-free stage chain for testing and benchmarking the runner itself.

It turns a Study's labels and boxes into a SceneGraph and a fixed set of templated QA rows without
the ontology, extractor or generator of the other areas, so the sharding, executors, resume and
writer can be tested (and timed) in isolation. Select it with
``BuildOptions(pipeline="radvqa.run.minimal:MinimalPipeline")``. It is not a dataset generator.

Options it reads: ``seed``; ``minimal_qa_per_finding`` (default 3) to scale rows per study;
``fail_on_study`` / ``kill_on_study`` (a study id; or env ``RADVQA_MINIMAL_FAIL_ON`` /
``RADVQA_MINIMAL_KILL_ON``) to inject a failure or a hard worker death (SIGKILL).
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from typing import Any

from radvqa.model import QA, AnswerPart, Observation, SceneGraph, Study
from radvqa.run.pipeline import StudyResult, set_prior

SPLITS = (("train", 80), ("val", 10), ("test", 10))


def _h(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=10).hexdigest()


def split_of(patient_id: str, seed: int) -> str:
    v = int.from_bytes(hashlib.blake2b(f"{seed}:{patient_id}".encode(), digest_size=4).digest(), "big") % 100
    acc = 0
    for name, pct in SPLITS:
        acc += pct
        if v < acc:
            return name
    return SPLITS[-1][0]


class MinimalPipeline:
    def __init__(self, options: dict[str, Any]) -> None:
        self.seed = int(options.get("seed", 0))
        self.per_finding = int(options.get("minimal_qa_per_finding", 3))
        # fault injection for tests: options, or env vars (so a resumed run, with the env var unset,
        # has the same options fingerprint as the interrupted one)
        # (read per shard: the pipeline object is cached per process)
        self._opt_fail = options.get("fail_on_study")
        self._opt_kill = options.get("kill_on_study")
        self.fail_on = self.kill_on = None
        self.timings: dict[str, float] = {"extract": 0.0, "localize": 0.0, "generate": 0.0}

    def process(self, study: Study, prior: SceneGraph | None) -> StudyResult:
        self.fail_on = self._opt_fail or os.environ.get("RADVQA_MINIMAL_FAIL_ON")
        self.kill_on = self._opt_kill or os.environ.get("RADVQA_MINIMAL_KILL_ON")
        delay = os.environ.get("RADVQA_MINIMAL_DELAY_S")  # seconds per study: a build slow enough to interrupt
        if delay:
            time.sleep(float(delay))
        if self.kill_on and study.id == self.kill_on:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fail_on and study.id == self.fail_on:
            raise RuntimeError(f"injected failure on {study.id}")
        if not study.images:
            from radvqa.model import Reject

            return StudyResult(None, [], [Reject(source=study.source, ref=study.id, reason="no images", stage="localize")])
        obs: list[Observation] = []
        findings = sorted({f for lab in study.labels if lab.value == 1 for f in lab.findings})
        for i, fid in enumerate(findings):
            obs.append(Observation(id=f"O{i + 1:02d}", finding=fid, source="label", from_report=False,
                                   boxes=[b for b in study.boxes if b.label == fid]))
        split = split_of(study.patient_id, self.seed)
        sg = SceneGraph(study_id=study.id, patient_id=study.patient_id, source=study.source, images=study.images,
                        observations=obs, region_boxes=study.region_boxes, split=split,
                        study_time=study.study_time, extractor=None)
        set_prior(sg, prior)
        img_ids = [im.id for im in study.images]
        paths = [im.path or "" for im in study.images]
        qas: list[QA] = []

        def add(strategy: str, qtype: str, tid: str, slot: str, q: str, a: str, short: str | None,
                fids: list[str], boxes: list[Any], ref: str | None = None) -> None:
            qas.append(QA(
                qa_id=_h(study.id, tid, slot), source=study.source, split=split, patient_id=study.patient_id,
                study_id=study.id, strategy=strategy, question_type=qtype, template_id=tid, template_version=1,
                question=q, answer=a, image_ids=img_ids, image_paths=paths, answer_short=short,
                polarity="positive" if short == "yes" else "negative" if short == "no" else None,
                findings=fids, regions=[], boxes=boxes,
                answer_parts=[AnswerPart(part_type="main", text=a, findings=fids, boxes=boxes)],
                grade="A" if boxes else "B", provenance=[f"label:{f}" for f in fids], modality="DX",
                reference_study_id=ref,
            ))

        add("qba", "B03_is_abnormal", "min.abnormal", "", "Is this study abnormal?",
            "Yes, the study is abnormal." if obs else "No, the study is normal.", "yes" if obs else "no",
            [o.finding for o in obs], [])
        for o in obs:
            for k in range(self.per_finding):
                add("qba", "D02_has_finding", f"min.has.{k}", o.finding, f"Is there {o.finding.replace('_', ' ')}?",
                    f"Yes, there is {o.finding.replace('_', ' ')}.", "yes", [o.finding], o.boxes)
        if prior is not None and sg.prior_study_id:
            before = {o.finding for o in prior.observations}
            now = {o.finding for o in obs}
            new = sorted(now - before)
            add("diff", "difference", "min.diff", prior.study_id, "What has changed compared to the prior study?",
                ("New: " + ", ".join(new) + ".") if new else "Nothing has changed.", None, new, [], prior.study_id)
        return StudyResult(sg, qas, [])
