"""Medical-Diff-VQA (MIMIC-Diff-VQA; Hu et al., KDD 2023) into radvqa's QA layout, with the
main/reference order check.

Input (PhysioNet ``medical-diff-vqa``, see shared FORMATS.md section 3):

- the QA table (``mimic_pair_questions.csv``; columns ``study_id, subject_id, ref_id,
  question_type, question, answer, split``), recognised by its columns whatever the file is called,
  plain or gzipped;
- optionally the study table (``mimic_all.csv``; ``subject_id, study_id, dicom_id, view,
  study_date, study_order`` and the 14 CheXpert labels), for the order check and image ids;
- optionally a MIMIC-CXR-JPG root (``files/pNN/pSUBJECT/sSTUDY/DICOM.jpg``) for image paths.

The order check. In release v1.0 about 48% of main/reference pairs had the main study dated
*earlier* than its reference (generator issue #4: 79,767 of 164,324 pairs); v1.0.1 (Feb 2025)
swapped ``study_id``/``ref_id`` on the affected ``difference`` rows and regenerated their answers.
With the study table, every pair is classified ``ok`` (reference strictly earlier), ``reversed``,
``tie`` (same ``study_order``: same date) or ``unknown`` (a study missing from the table). Only
``difference`` rows are checked: they are the pairs (one per pair), and the other six types ask about
the main image alone, so their ``ref_id`` does not change their answer (after the v1.0.1 fix, the
non-difference rows of a once-reversed pair still name the later study as ``ref_id``). Counts go to
the manifest and each difference row of a non-ok pair carries ``order:<class>`` in ``grade_reasons``.
By default nothing is changed. ``fix_order=True`` does what the v1.0.1 fix did, for ``difference``
rows of reversed pairs only (the other six types ask about the main image alone): swap the two
ids and rewrite the answer from the reference's point of view. The authors regenerated the answer
from their intermediate extraction; here it is derived from the answer itself (additions and
removals exchanged, "from A to B" becomes "from B to A"), which gives the same finding sets; an
answer that does not parse is left as it is and flagged ``order:reversed-unfixed``.

Mapping: ``strategy`` = "medical-diff-vqa", ``question_type`` = the dataset's seven types,
``template_id`` = "mdvqa.<type>"; a question is closed when its answer is yes or no (the authors'
``evaluate_score.py`` splits closed/open the same way); ``qa_id`` = "medical-diff-vqa:<row index>"
(the row index is the dataset's question id, as EKAID's ground truth uses it);
``reference_study_id`` on every row (the generator sets ``ref_id`` for all types).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from radvqa.eval.importers import ImportError_
from radvqa.model import QA, Reject
from radvqa.sources.base import open_text

SOURCE = "medical-diff-vqa"
QA_COLUMNS = ("study_id", "subject_id", "ref_id", "question_type", "question", "answer", "split")
STUDY_COLUMNS = ("subject_id", "study_id", "study_date", "study_order")
QUESTION_TYPES = ("abnormality", "presence", "view", "location", "level", "type", "difference")
ORDER_CLASSES = ("ok", "reversed", "tie", "unknown")


def _header(path: Path) -> list[str]:
    try:
        with open_text(path) as f:
            row = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, EOFError, csv.Error) as e:
        raise ImportError_(f"{path}: cannot read ({e})") from e
    return [c.strip().lstrip("\ufeff").lower() for c in row]


def _kind(path: Path) -> str | None:
    cols = set(_header(path))
    if set(QA_COLUMNS) <= cols:
        return "qa"
    if set(STUDY_COLUMNS) <= cols:
        return "studies"
    return None


def find_tables(paths: Iterable[Path]) -> tuple[Path, Path | None]:
    """The QA table and (optionally) the study table among files and folders, by their columns."""
    qa: list[Path] = []
    studies: list[Path] = []
    for p in paths:
        cands = sorted(x for x in p.iterdir() if x.is_file() and x.name.lower().endswith((".csv", ".csv.gz", ".gz", ".txt"))) if p.is_dir() else [p]
        if not p.exists():
            raise ImportError_(f"{p}: no such file or folder")
        for c in cands:
            k = _kind(c)
            if k == "qa":
                qa.append(c)
            elif k == "studies":
                studies.append(c)
            elif not p.is_dir():
                raise ImportError_(f"{c}: neither the QA table (columns {', '.join(QA_COLUMNS)}) nor mimic_all.csv "
                                   f"(columns {', '.join(STUDY_COLUMNS)}); found {', '.join(_header(c)[:10])}")
    if len(qa) != 1:
        raise ImportError_(f"expected one QA table (columns {', '.join(QA_COLUMNS)}) among the inputs, found {len(qa)}: "
                           f"{[str(x) for x in qa]}")
    if len(studies) > 1:
        raise ImportError_(f"more than one study table (mimic_all.csv layout): {[str(x) for x in studies]}")
    return qa[0], (studies[0] if studies else None)


class StudyTable:
    """``mimic_all.csv``: study order (a float in the CSV: ``rank(method='min')``) and the image."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.order: dict[str, float] = {}
        self.date: dict[str, str] = {}
        self.dicom: dict[str, str] = {}
        self.subject: dict[str, str] = {}
        self.problems: list[str] = []
        with open_text(path) as f:
            r = csv.reader(f)
            head = [c.strip().lstrip("\ufeff").lower() for c in next(r, [])]
            ix = {c: i for i, c in enumerate(head)}
            for n, row in enumerate(r, start=2):
                if not row or len(row) < len(head):
                    self.problems.append(f"{path.name}:{n}: {len(row)} cells, expected {len(head)}")
                    continue
                sid = _id(row[ix["study_id"]])
                if not sid:
                    self.problems.append(f"{path.name}:{n}: empty study_id")
                    continue
                try:
                    self.order[sid] = float(row[ix["study_order"]])
                except ValueError:
                    self.problems.append(f"{path.name}:{n}: study_order {row[ix['study_order']]!r} is not a number")
                self.date[sid] = row[ix["study_date"]].strip()
                self.subject[sid] = _id(row[ix["subject_id"]])
                if "dicom_id" in ix and row[ix["dicom_id"]].strip():
                    self.dicom[sid] = row[ix["dicom_id"]].strip()

    def classify(self, main: str, ref: str) -> str:
        a, b = self.order.get(main), self.order.get(ref)
        if a is None or b is None:
            return "unknown"
        if b < a:
            return "ok"
        return "tie" if a == b else "reversed"


def _id(s: str) -> str:
    """Ids may be written as floats by pandas ("50000001.0")."""
    if s.isdigit():
        return s
    s = s.strip()
    return s[:-2] if s.endswith(".0") and s[:-2].isdigit() else s


# --- the difference answer, seen from the other study ----------------------------------

_LEVEL = re.compile(r"the level of (.+?) has changed from (.+?) to (.+?)\. ?")
_ADD = re.compile(r"the main image has (?:an additional finding|additional findings) of (.+?) than the reference image\. ?")
_MISS = re.compile(r"the main image is missing the findings? of (.+?) than the reference image\. ?")


def _names(s: str) -> list[str]:
    """The generator's list: "a", "a and b", "a, b, and c" (items joined by ', ' and ' and ')."""
    parts = re.split(r",\s*and\s+|,\s*|\s+and\s+", s.strip())
    return [p.strip() for p in parts if p.strip()]


def _caption(adding: list[str], missing: list[str]) -> str:
    """The generator's ``get_caption`` wording (code/question_gen.py)."""
    out = ""
    for items, one, many in ((adding, "the main image has an additional finding of", "the main image has additional findings of"),
                             (missing, "the main image is missing the finding of", "the main image is missing the findings of")):
        if not items:
            continue
        if len(items) == 1:
            out += f"{one} {items[0]} than the reference image. "
        else:
            out += f"{many} " + " ".join(f"{x}," for x in items[:-1]) + f" and {items[-1]} than the reference image. "
    return out


def swap_difference_answer(answer: str) -> str | None:
    """The answer of a difference question with main and reference exchanged, or None when the
    answer is not in the generator's grammar."""
    text = answer.strip()
    if text == "nothing has changed.":
        return text
    levels = [(m.group(1), m.group(2), m.group(3)) for m in _LEVEL.finditer(text)]
    rest = _LEVEL.sub("", text)
    add = _ADD.search(rest)
    miss = _MISS.search(rest)
    leftover = _MISS.sub("", _ADD.sub("", rest)).strip()
    if leftover or not (levels or add or miss):
        return None
    out = "".join(f"the level of {n} has changed from {b} to {a}. " for n, a, b in levels)
    out += _caption(_names(miss.group(1)) if miss else [], _names(add.group(1)) if add else [])
    return out


# --- rows --------------------------------------------------------------------------------


def _image_path(root: Path | None, subject: str, study: str, dicom: str | None) -> str:
    if root is None or not dicom or not subject:
        return ""
    p = root / "files" / f"p{subject[:2]}" / f"p{subject}" / f"s{study}" / f"{dicom}.jpg"
    return str(p.resolve()) if p.is_file() else ""


def iter_medical_diff_vqa(path: str | Path, studies: str | Path | None = None, images: str | Path | None = None,
                          fix_order: bool = False, release: str = "unknown",
                          stats: dict[str, Any] | None = None) -> Iterator[QA | Reject]:
    """Rows of the QA table as QA records (streamed), rejects for rows that cannot be used.
    ``stats`` (if given) receives the order-check counts for the manifest."""
    inputs = [Path(path)] + ([Path(studies)] if studies else [])
    qa_path, st_path = find_tables(inputs)
    table = StudyTable(st_path) if st_path else None
    root = Path(images) if images else None
    pair_class: dict[tuple[str, str], str] = {}
    rows_by_class: Counter[str] = Counter()
    fixed = unfixed = 0
    if table:
        for p in table.problems:
            yield Reject(source=SOURCE, ref=p.split(": ")[0], reason=p.split(": ", 1)[1], stage="source")
    with open_text(qa_path) as f:
        r = csv.reader(f)
        head = [c.strip().lstrip("\ufeff").lower() for c in next(r, [])]
        width = len(head)
        i_main, i_ref, i_sub, i_type, i_q, i_a, i_split = (head.index(c) for c in (
            "study_id", "ref_id", "subject_id", "question_type", "question", "answer", "split"))
        types = frozenset(QUESTION_TYPES)
        for n, row in enumerate(r):
            if len(row) != width:
                yield Reject(source=SOURCE, ref=f"{qa_path.name}:{n + 2}", reason=f"{len(row)} cells, expected {width}")
                continue
            main, refid, subject = _id(row[i_main]), _id(row[i_ref]), _id(row[i_sub])
            qtype = row[i_type].strip().lower()
            q, a = row[i_q].strip(), row[i_a].strip()
            problem = (
                "empty study_id or subject_id" if not main or not subject
                else f"unknown question_type {qtype!r} (known: {', '.join(QUESTION_TYPES)})" if qtype not in types
                else "empty question or answer" if not q or not a
                else None
            )
            if problem:
                yield Reject(source=SOURCE, ref=f"{qa_path.name}:{n + 2}", reason=problem)
                continue
            reasons: list[str] = []
            prov = [f"row={n}", f"release={release}"]
            is_diff = qtype == "difference"
            if is_diff and refid and table is not None:
                key = (main, refid)
                cls = pair_class.get(key)
                if cls is None:
                    cls = pair_class[key] = table.classify(main, refid)
                rows_by_class[cls] += 1
                if cls != "ok":
                    reasons.append(f"order:{cls}")
                if cls == "reversed" and fix_order:
                    swapped = swap_difference_answer(a)
                    if swapped is None:
                        unfixed += 1
                        reasons = ["order:reversed-unfixed"]
                    else:
                        fixed += 1
                        prov.append(f"order fixed: study_id {main} <-> ref_id {refid}; answer was {a!r}")
                        main, refid, a = refid, main, swapped.strip()
                        reasons = ["order:fixed"]
            low = a.lower()
            ids = [main, refid] if is_diff and refid else [main]
            if table is not None:
                image_ids = [table.dicom.get(x) or x for x in ids]
                paths = [_image_path(root, subject, x, table.dicom.get(x)) for x in ids] if root else [""] * len(ids)
            else:
                image_ids, paths = ids, [""] * len(ids)
            yield QA(
                qa_id=f"{SOURCE}:{n}",
                source=SOURCE,
                split=row[i_split].strip().lower() or "unknown",
                patient_id=f"mimic:{subject}",
                study_id=f"mimic-cxr:{main}",
                strategy=SOURCE,
                question_type=qtype,
                template_id=f"mdvqa.{qtype}",
                template_version=1,
                question=q,
                answer=a,
                image_ids=image_ids,
                image_paths=paths,
                answer_short=low if low == "yes" or low == "no" else None,
                grade_reasons=reasons,
                provenance=prov,
                modality="CR",
                reference_study_id=f"mimic-cxr:{refid}" if refid else None,
            )
    if stats is not None:
        pairs = Counter(pair_class.values())
        stats.update({
            "release": release,
            "qa_table": str(qa_path),
            "study_table": str(st_path) if st_path else None,
            "order_check": ({
                "pairs": len(pair_class),
                "pairs_by_order": {k: pairs.get(k, 0) for k in ORDER_CLASSES},
                "rows_by_order": {k: rows_by_class.get(k, 0) for k in ORDER_CLASSES},
                "difference_rows_fixed": fixed,
                "difference_rows_unfixable": unfixed,
                "fix_order": fix_order,
                "note": ("reference strictly earlier = ok; reversed pairs were a v1.0 defect fixed in v1.0.1"
                         + ("" if fix_order else "; nothing was changed (use --fix-order to swap difference rows)")),
            } if table else {"note": "no study table (mimic_all.csv) given: order not checked"}),
        })
        if table and release == "unknown":
            stats["release_guess"] = ("v1.0 (main/reference order reversed in some difference rows)"
                                      if pairs.get("reversed", 0) else "consistent with v1.0.1 (no reversed pair)")


def import_medical_diff_vqa(path: str | Path, out: str | Path, *, studies: str | Path | None = None,
                            images: str | Path | None = None, fix_order: bool = False,
                            release: str = "unknown") -> dict[str, Any]:
    """Write the QA layout (``radvqa.eval.importers.write_dataset``) and add the order check and
    the release to the manifest. Returns the manifest."""
    import json

    from radvqa.eval.importers import write_dataset

    stats: dict[str, Any] = {}
    opts = {"studies": str(studies) if studies else None, "images": str(images) if images else None,
            "fix_order": fix_order, "release": release}
    records = iter_medical_diff_vqa(path, studies, images, fix_order, release, stats)
    inputs = [str(path)] + ([str(studies)] if studies else [])
    manifest = write_dataset(out, records, SOURCE, inputs, opts)
    manifest["medical_diff_vqa"] = stats
    mpath = Path(out) / "manifest.json"
    mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
    return manifest
