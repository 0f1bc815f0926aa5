"""CXR-Align (Ko 2025; PhysioNet ``cxr-align``) as multiple-choice questions: for each MIMIC-CXR
image, which of its report, the same report with one positive finding negated, and the report
with that finding omitted describes the image.

Layout (shared FORMATS.md section 7, from third-party loaders; UNVERIFIED beyond the keys used
here): one JSON file ``{"mimic": {<dicom_id>: {"report", "chosen", "negation", "omitted",
"location"}}}``. Other top-level keys are read the same way (their name becomes part of the
question id); a case without ``report`` and ``negation`` is rejected with the reason.

This is radvqa's multiple-choice framing of the benchmark, not the paper's scoring: the BC2C
paper ranks the texts by image-text similarity, and its exact metric could not be read. Options
are placed by a hash of (dicom_id, seed), so the correct letter is uniform over the positions and
the same for every run; ``answer_short`` is the letter, ``answer`` the original report.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.eval.importers import ImportError_
from radvqa.model import QA, Reject

SOURCE = "cxr-align"
LETTERS = "ABC"
QUESTION = "Which of these reports describes this chest X-ray?"


def _order(key: str, seed: int, n: int) -> list[int]:
    """A permutation of range(n) from a stable hash (no global random state)."""
    h = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    x = int.from_bytes(h, "big")
    idx = list(range(n))
    out = []
    while idx:
        x, r = divmod(x, len(idx))
        out.append(idx.pop(r))
    return out


def iter_cxr_align(path: str | Path, images: str | Path | None = None, seed: int = 0, ontology: Any = None) -> Iterator[QA | Reject]:
    p = Path(path)
    if p.is_dir():
        cands = sorted(p.glob("*.json"))
        if len(cands) != 1:
            raise ImportError_(f"{p}: expected one JSON file (cxr-align.json), found {[c.name for c in cands]}")
        p = cands[0]
    try:
        data = json.loads(p.read_text("utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ImportError_(f"{p}: not a readable JSON file ({e})") from e
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ImportError_(f"{p}: expected {{\"mimic\": {{dicom_id: case}}}}")
    index: dict[str, Path] = {}
    if images:
        from radvqa.sources.base import index_images, walk_files

        index = index_images(walk_files([Path(images)]))
    if ontology is None:
        from radvqa.ontology import load_ontology

        ontology = load_ontology()
    from radvqa.sources.base import finding_for_term

    for group, cases in data.items():
        for did, case in cases.items():
            ref = f"{p.name}:{group}/{did}"
            if not isinstance(case, dict):
                yield Reject(source=SOURCE, ref=ref, reason="case is not an object")
                continue
            texts = {k: case.get(k) for k in ("report", "negation", "omitted")}
            if not isinstance(texts["report"], str) or not texts["report"].strip():
                yield Reject(source=SOURCE, ref=ref, reason="no report text")
                continue
            if not isinstance(texts["negation"], str) or not texts["negation"].strip():
                yield Reject(source=SOURCE, ref=ref, reason="no negated report")
                continue
            opts = [("original", texts["report"].strip()), ("negation", texts["negation"].strip())]
            if isinstance(texts["omitted"], str) and texts["omitted"].strip():
                opts.append(("omitted", texts["omitted"].strip()))
            if len({t for _, t in opts}) != len(opts):
                yield Reject(source=SOURCE, ref=ref, reason="two of the report versions are identical")
                continue
            order = _order(str(did), seed, len(opts))
            shuffled = [opts[i] for i in order]
            letter = LETTERS[[k for k, _ in shuffled].index("original")]
            chosen = str(case.get("chosen") or "").strip()
            loc = case.get("location")
            img = index.get(str(did))
            yield QA(
                qa_id=f"{SOURCE}:{group}:{did}",
                source=SOURCE,
                split="test",
                patient_id=f"{SOURCE}:{did}",  # the file names no patient: one image, one group
                study_id=f"{SOURCE}:{did}",
                strategy=SOURCE,
                question_type="report_alignment",
                template_id="cxr-align.mc",
                template_version=1,
                question=QUESTION + " " + " ".join(f"{L}: {t}" for L, (_, t) in zip(LETTERS, shuffled)),
                answer=texts["report"].strip(),
                answer_short=letter,
                choices=[t for _, t in shuffled],
                image_ids=[str(did)],
                image_paths=[str(img.resolve())] if img else [""],
                findings=finding_for_term(ontology, chosen) if chosen else [],
                provenance=[f"chosen={chosen}", f"location={loc}", "options=" + ",".join(k for k, _ in shuffled)],
                modality="CR",
            )


def import_cxr_align(path: str | Path, out: str | Path, *, images: str | Path | None = None, seed: int = 0) -> dict[str, Any]:
    from radvqa.eval.importers import write_dataset

    return write_dataset(out, iter_cxr_align(path, images, seed), SOURCE, [str(path)], {"images": str(images) if images else None, "seed": seed})
