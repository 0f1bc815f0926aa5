"""CXReasonBench (Lee et al., NeurIPS 2025 D&B; PhysioNet ``chexstruct-cxreasonbench``): import its
staged direct-reasoning questions, and score them stage by stage as its authors count.

**Layout read** (shared FORMATS.md section 6; the release is credentialed, so the tests use
hand-made files in this layout): ``PATH`` is the ``CXReasonBench`` folder holding
``dx_by_dicoms.json`` (``{task: [dicom_id, ...]}``) and the questions, either unzipped
(``qa/<task>/<path>/<stage>/<qtype>/<dicom_id>.json``) or as ``qa.zip``; or the ``qa`` folder
itself. A question file holds ``question`` (a string, or a list for multi-part stages),
``answer`` (the same shape; options written "(a) Yes") and ``img_path`` (MIMIC-CXR-JPG relative
paths; in the body-part stage one list of option images per part, under ``segmask_bodypart``).

**What is imported.** Path 1 (direct reasoning), per case (task, dicom), in its protocol's order:
``init`` (the diagnosis; "I don't know" allowed), ``criteria`` (stage1, one row per part),
``custom_criteria`` (stage1.5, only some tasks), ``bodypart`` (stage2, one row per part, with its
option images), ``measurement`` (stage3), ``final`` (stage4). Path 2 (guidance) and the review
path are asked by the authors' protocol only after the model's own "I don't know" in path 1, on
cases chosen at run time from its own failures, so they cannot be fixed questions: each of their
cases is listed in ``rejected.jsonl`` with that reason, not dropped silently.

**Context.** The benchmark is a multi-turn chat: every question sees the earlier turns. A row's
``question`` therefore carries the earlier turns of its case (their questions with the
*reference* answers) before the current question. ``radvqa eval`` counts a stage only when every
earlier stage of the case was answered right, so wherever a stage is counted the model's own
earlier answers agreed with the references it was shown. Row images: the chest X-ray first, then
the current turn's option images (their numbering, "1st image", counts from the second image; the
question says so).

**Closed and open turns.** A turn whose reference names exactly one option of the options listed
in its question is closed: ``choices`` + the letter in ``answer_short``, scored by radvqa's
choice parser. A final diagnosis accepting any one of several options is scored by the same parser
(the parsed letter must be one of them). Other turns (several body parts to select, projection's
right/left pair) are open: ``radvqa eval --judge-url`` sends them to the judge (verdict
``correct`` passes); without a judge they count as not passed and the report says how many.
Option labels are written upper case ("(A) Yes") so the parser reads them as letters.

**Scoring** (``evaluation/metric.py`` of ``ttumyche/CXReasonBench@72357fe``, read for its formulas):
per task, init passes unless the answer is "I don't know"; a stage is passed when all its parts are
right and every earlier stage passed; custom criteria answered wrong count as "I don't know"
(the authors' judge returns only True or IDK there) and leave the case. Stage-conditional
accuracy = passed / reached: criteria over init passes; body part over criteria passes (minus
custom IDKs); measurement over body-part passes; final over measurement passes; ``binary``
(their "Completion") = final passes over every case that got past init (minus custom IDKs);
``consistency`` = final passes whose init diagnosis was right, over measurement passes (their
denominator). Each comes naive and Wilson-scored (z = 1.96): the interval, its centre, and the
adjusted score the authors print, centre x (1 - (upper - lower) / 2), 0 when nothing is right;
``adjusted_wilson_csv`` = centre - z (upper - lower) / 2 is the column their CSV holds. Stage
score (their "Depth"): the mean furthest stage reached, 0 (init passed, criteria failed) to 4
(final right), over the same cases as ``binary``. ``total`` / ``perception`` / ``measurement``
average the per-task figures (tasks with no scored case left out). Their measurement-matching
("Alignment") figure, which reads a number out of the final answer, is not computed.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.eval.importers import ImportError_
from radvqa.model import QA, Reject

SOURCE = "cxreasonbench"
# metric.py's task groups
PERCEPTION = ("inclusion", "inspiration", "trachea_deviation", "ascending_aorta_enlargement")
MEASUREMENT = ("projection", "rotation", "aortic_knob_enlargement", "carina_angle", "cardiomegaly",
               "mediastinal_widening", "descending_aorta_tortuous", "descending_aorta_enlargement")
TASKS = tuple(sorted(PERCEPTION + MEASUREMENT))
# path-1 stage folders -> stage names, in the order they are asked
PATH1 = (("init", "init"), ("stage1", "criteria"), ("stage1.5", "custom_criteria"), ("stage2", "bodypart"),
         ("stage3", "measurement"), ("stage4", "final"))
OPTIONAL_STAGES = frozenset({"custom_criteria"})
LEVEL = {"init": 0, "criteria": 1, "bodypart": 2, "measurement": 3, "final": 4}
Z = 1.96

_OPT = re.compile(r"(?<![\w(])\(([a-zA-Z])\)(?=\s|$)")
_IDK = re.compile(r"(?i)\bi\s+(?:don'?t|do\s+not)\s+know\b")


# --- reading the release -------------------------------------------------------------------------

class _Tree:
    """The question files, from a folder or from qa.zip: relative path (below ``qa/``) -> bytes."""

    def __init__(self, path: Path) -> None:
        self.zip: zipfile.ZipFile | None = None
        self.root: Path | None = None
        self.files: dict[tuple[str, ...], Any] = {}
        if path.is_file() and path.suffix == ".zip":
            self._from_zip(path)
        elif (path / "qa").is_dir():
            self._from_dir(path / "qa")
        elif (path / "qa.zip").is_file():
            self._from_zip(path / "qa.zip")
        elif path.is_dir() and any(d.is_dir() and d.name in TASKS for d in path.iterdir()):
            self._from_dir(path)
        else:
            raise ImportError_(f"{path}: no CXReasonBench questions (expected qa/, qa.zip or qa/<task>/ folders)")

    def _from_dir(self, qa: Path) -> None:
        self.root = qa
        for f in sorted(qa.rglob("*.json")):
            self.files[f.relative_to(qa).parts] = f

    def _from_zip(self, z: Path) -> None:
        try:
            self.zip = zipfile.ZipFile(z)
        except (OSError, zipfile.BadZipFile) as e:
            raise ImportError_(f"{z}: not a readable zip file ({e})") from e
        for name in sorted(self.zip.namelist()):
            if not name.endswith(".json"):
                continue
            parts = tuple(p for p in name.split("/") if p)
            if parts and parts[0] == "qa":
                parts = parts[1:]
            self.files[parts] = name

    def read(self, key: tuple[str, ...]) -> Any:
        ref = self.files[key]
        raw = self.zip.read(ref) if self.zip is not None else Path(ref).read_bytes()
        return json.loads(raw.decode("utf-8-sig"))

    def stage_file(self, task: str, path: str, stage: str, dicom: str) -> tuple[str, ...] | None:
        """The one question file of a case's stage, whatever its question-type folder."""
        hits = [k for k in self._by_stage.get((task, path, stage), ()) if k[-1] == dicom + ".json"]
        return hits[0] if hits else None

    def index(self) -> None:
        by: dict[tuple[str, str, str], list[tuple[str, ...]]] = {}
        for k in self.files:
            if len(k) == 5:  # task/path/stage/qtype/dicom.json
                by.setdefault((k[0], k[1], k[2]), []).append(k)
        self._by_stage = by


def upper_options(text: str) -> str:
    """"(a) Yes (b) No" -> "(A) Yes (B) No": radvqa's choice parser reads upper-case letters."""
    return _OPT.sub(lambda m: f"({m.group(1).upper()})", text)


def parse_options(question: str) -> list[str] | None:
    """The option texts of a question listing "(A) ... (B) ...", in letter order, or None when
    the letters are not A, B, C... in order."""
    ms = list(_OPT.finditer(question))
    if len(ms) < 2:
        return None
    letters = "".join(m.group(1).upper() for m in ms)
    if letters != "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(letters)]:
        return None
    out = []
    for i, m in enumerate(ms):
        end = ms[i + 1].start() if i + 1 < len(ms) else len(question)
        opt = question[m.end():end].split("\n")[0].strip().rstrip(",;").strip()
        if not opt:
            return None
        out.append(opt)
    return out


def gold_letters(answer: str) -> list[str]:
    return sorted({m.group(1).upper() for m in _OPT.finditer(answer)})


def _as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else [x]


def _turns(task: str, stage: str, rec: Any) -> list[tuple[str, str, list[str]]]:
    """(question, answer, option image paths) per part of one stage file; ValueError if malformed."""
    if not isinstance(rec, dict) or "question" not in rec or "answer" not in rec:
        raise ValueError("no question/answer keys")
    qs, ans = _as_list(rec["question"]), _as_list(rec["answer"])
    if len(qs) != len(ans):
        raise ValueError(f"{len(qs)} questions but {len(ans)} answers")
    if not qs or not all(isinstance(q, str) and q.strip() for q in qs) or not all(isinstance(a, str) and a.strip() for a in ans):
        raise ValueError("empty question or answer")
    imgs = rec.get("img_path") or []
    out = []
    for i, (q, a) in enumerate(zip(qs, ans)):
        part_imgs: list[str] = []
        if stage == "bodypart":
            if len(imgs) != len(qs) or not isinstance(imgs[i], list):
                raise ValueError("body-part stage without one list of option images per question")
            part_imgs = [str(p) for p in imgs[i]]
        out.append((q.strip(), a.strip(), part_imgs))
    return out


def _context(done: list[tuple[str, str]], n_imgs: int) -> str:
    lines = []
    if done:
        lines.append("Earlier turns of this case, with their reference answers:")
        for q, a in done:
            lines += [f"Q: {q}", f"A: {a}"]
    if n_imgs:
        lines.append(f"(Image 1 is the chest X-ray; the option images are images 2 to {n_imgs + 1}, "
                     "in the order the options count them.)")
    if lines:
        lines.append("Current question:")
    return "\n".join(lines)


def iter_cxreasonbench(path: str | Path, images: str | Path | None = None) -> Iterator[QA | Reject]:
    p = Path(path)
    if not p.exists():
        raise ImportError_(f"{p}: not found")
    tree = _Tree(p)
    tree.index()
    base = p if p.is_dir() else p.parent
    if base.name == "qa" and not (base / "dx_by_dicoms.json").exists():
        base = base.parent
    cases: list[tuple[str, str]] = []
    dx = base / "dx_by_dicoms.json"
    if dx.is_file():
        try:
            by_task = json.loads(dx.read_text("utf-8-sig"))
        except (OSError, ValueError) as e:
            raise ImportError_(f"{dx}: not readable JSON ({e})") from e
        if not isinstance(by_task, dict):
            raise ImportError_(f"{dx}: expected {{task: [dicom_id, ...]}}")
        for task in sorted(by_task):
            for d in by_task[task]:
                cases.append((str(task), str(d)))
    else:  # no case list: the cases with an init question
        cases = sorted({(k[0], k[-1][:-5]) for k in tree.files if len(k) == 5 and k[1] == "path1" and k[2] == "init"})
    if not cases:
        raise ImportError_(f"{p}: no cases found")
    mimic = Path(images) if images else None
    seg = base / "segmask_bodypart"
    listed = set(cases)
    for task, dicom in cases:
        ref = f"{task}/{dicom}"
        if task not in TASKS:
            yield Reject(source=SOURCE, ref=ref, reason=f"unknown task {task!r} (the 12 tasks: {', '.join(TASKS)})")
            continue
        stages: list[tuple[str, list[tuple[str, str, list[str]]], list[str]]] = []
        problem = None
        cxr: list[str] = []
        for folder, stage in PATH1:
            key = tree.stage_file(task, "path1", folder, dicom)
            if key is None:
                if stage in OPTIONAL_STAGES and not tree._by_stage.get((task, "path1", folder)):
                    continue  # this task has no custom-criteria stage
                problem = f"no path1/{folder} question file"
                break
            try:
                rec = tree.read(key)
                turns = _turns(task, stage, rec)
            except (ValueError, UnicodeDecodeError) as e:
                problem = f"path1/{folder}: {e}"
                break
            if stage == "init":
                cxr = [str(x) for x in _as_list(rec.get("img_path") or []) if isinstance(x, str)]
                if not cxr:
                    problem = "init question has no img_path"
                    break
            stages.append((stage, turns, []))
        if problem:
            yield Reject(source=SOURCE, ref=ref, reason=problem)
            continue
        cxr_paths = [str(mimic / c) if mimic and (mimic / c).is_file() else c for c in cxr]
        cxr_ids = [Path(c).stem for c in cxr]
        done: list[tuple[str, str]] = []
        for stage, turns, _ in stages:
            for k, (q, a, opt_imgs) in enumerate(turns):
                q, a = upper_options(q), upper_options(a)
                opts = parse_options(q)
                gold = gold_letters(a)
                letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(opts or [])]
                valid = bool(opts) and bool(gold) and all(g in letters for g in gold)
                closed = valid and len(gold) == 1
                any_of = valid and len(gold) > 1 and stage == "final"
                idk = [letters[i] for i, o in enumerate(opts or []) if _IDK.search(o)]
                img_paths = list(cxr_paths)
                img_ids = list(cxr_ids)
                for ip in opt_imgs:
                    local = seg / ip.lstrip("/")
                    img_paths.append(str(local) if local.is_file() else "segmask_bodypart" + ("" if ip.startswith("/") else "/") + ip)
                    img_ids.append(Path(ip).stem)
                ctx = _context(done, len(opt_imgs))
                prov = [f"task={task}", f"stage={stage}", f"part={k}/{len(turns)}",
                        f"level={LEVEL.get(stage, -1)}", "scoring=" + ("choice" if closed else "any_of" if any_of else "judge")]
                if valid:
                    prov.append("gold=" + ",".join(gold))
                if idk:
                    prov.append("idk=" + ",".join(idk))
                if opts and (any_of or idk):
                    prov += [f"option:{L}={o}" for L, o in zip(letters, opts)]
                yield QA(
                    qa_id=f"{SOURCE}:{task}:{dicom}:{stage}" + (f":{k}" if len(turns) > 1 else ""),
                    source=SOURCE,
                    split="test",
                    patient_id=f"{SOURCE}:{dicom}",  # the release names images, not patients
                    study_id=f"{SOURCE}:{task}:{dicom}",
                    strategy=SOURCE,
                    question_type=stage,
                    template_id=f"{SOURCE}.path1.{stage}",
                    template_version=1,
                    question=(ctx + "\n" + q) if ctx else q,
                    answer=a,
                    answer_short=gold[0] if closed else None,
                    choices=opts if closed else None,
                    image_ids=img_ids,
                    image_paths=img_paths,
                    findings=[],
                    provenance=prov,
                    modality="CR",
                )
                done.append((q, a))
    # path-1 cases with questions but not in the case list: listed rather than lost
    for task, dicom in sorted({(k[0], k[-1][:-5]) for k in tree.files if len(k) == 5 and k[1] == "path1"} - listed):
        yield Reject(source=SOURCE, ref=f"{task}/{dicom}", reason="path-1 questions of a case not in dx_by_dicoms.json")
    # guidance and review paths: model-adaptive, listed rather than lost
    for pth, why in (("path2", "guidance path (asked only after the model's own 'I don't know' in path 1)"),
                     ("re-path1", "review path (a case chosen at run time from the model's own failures)")):
        seen = sorted({(k[0], k[-1][:-5]) for k in tree.files if len(k) == 5 and k[1] == pth})
        for task, dicom in seen:
            yield Reject(source=SOURCE, ref=f"{task}/{dicom}/{pth}",
                         reason=f"{why}: model-adaptive, not importable as fixed questions"
                                + ("" if (task, dicom) in listed else "; case not in dx_by_dicoms.json"))


def import_cxreasonbench(path: str | Path, out: str | Path, *, images: str | Path | None = None) -> dict[str, Any]:
    from radvqa.eval.importers import write_dataset

    summary: dict[str, Any] = {"cases": 0, "turns_by_scoring": {}, "cases_by_task": {}}
    cases: set[str] = set()

    def counted() -> Iterator[QA | Reject]:
        for r in iter_cxreasonbench(path, images):
            if isinstance(r, QA):
                mode = next((p[8:] for p in r.provenance if p.startswith("scoring=")), "?")
                summary["turns_by_scoring"][mode] = summary["turns_by_scoring"].get(mode, 0) + 1
                if r.study_id not in cases:
                    cases.add(r.study_id)
                    task = r.study_id.split(":")[1]
                    summary["cases_by_task"][task] = summary["cases_by_task"].get(task, 0) + 1
            yield r

    m = write_dataset(out, counted(), SOURCE, [str(path)], {"images": str(images) if images else None})
    summary["cases"] = len(cases)
    m["cxreasonbench"] = summary
    (Path(out) / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True) + "\n", "utf-8")
    return m


# --- scoring ----------------------------------------------------------------------------------

def wilson(correct: int, trials: int, z: float = Z) -> dict[str, Any] | None:
    """Naive and Wilson-scored proportion as metric.py computes them; None when nothing was tried."""
    if trials <= 0:
        return None
    p = correct / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    lower, upper = centre - half, centre + half
    return {
        "correct": correct,
        "trials": trials,
        "naive": p,
        "wilson_centre": centre,
        "lower": lower,
        "upper": upper,
        # what the authors' print_scores reports (x 100): centre x (1 - interval width / 2)
        "adjusted_wilson": 0.0 if correct == 0 else centre * (1 - (upper - lower) / 2),
        # the 'adjusted_wilson' column of their per-task CSV
        "adjusted_wilson_csv": centre - z * (upper - lower) / 2,
    }


def _prov_table(dataset: str | Path) -> dict[str, list[str]]:
    """qa_id -> provenance of this source's rows (a filtered read: eval does not load provenance)."""
    import pyarrow.dataset as ds

    from radvqa.eval.dataset import qa_files

    d = ds.dataset([str(f) for f in qa_files(dataset)], format="parquet")
    t = d.to_table(columns=["qa_id", "provenance"], filter=ds.field("source") == SOURCE)
    return dict(zip(t.column("qa_id").to_pylist(), t.column("provenance").to_pylist()))


def _meta(prov: list[str]) -> dict[str, Any]:
    m: dict[str, Any] = {"options": {}}
    for item in prov or ():
        k, _, v = item.partition("=")
        if k.startswith("option:"):
            m["options"][k[7:]] = v
        else:
            m[k] = v
    return m


def turn_outcome(meta: dict[str, Any], correct: float | None, value: str | None, text: str | None,
                 parser: Any, verdict: Any = None) -> int:
    """1 right, 0 wrong, -1 "I don't know" (init, custom criteria), as the authors' scorer codes a
    turn. ``correct``/``value``: radvqa's choice scoring of the row; ``verdict``: the judge's."""
    stage = meta.get("stage")
    idk_letters = set(filter(None, (meta.get("idk") or "").split(",")))
    mode = meta.get("scoring")
    if mode == "choice":
        ok = correct == 1.0
    elif mode == "any_of":
        opts = [meta["options"][k] for k in sorted(meta["options"])]
        res = parser.parse("choice", text, opts) if text is not None else None
        value = res.value if res is not None and res.parsed else None
        ok = value is not None and value in set((meta.get("gold") or "").split(","))
    else:
        ok = verdict is not None and getattr(verdict, "verdict", None) == "correct"
    if stage == "init" and not ok and ((value is not None and value in idk_letters) or (text and _IDK.search(text))):
        return -1
    if stage == "custom_criteria" and not ok:
        return -1  # the authors' judge returns only True or IDK for this stage
    return 1 if ok else 0


def case_stages(turns: list[tuple[str, int]]) -> dict[str, int]:
    """Stage -> outcome for one case (parts: all must be 1), with the gating of the protocol:
    a stage after a failed one is not reached (0 for counting, as the authors fill it)."""
    by: dict[str, list[int]] = {}
    for stage, o in turns:
        by.setdefault(stage, []).append(o)
    out: dict[str, int] = {}
    init = by.get("init", [0])[0]
    out["init"] = init
    go = init != -1
    for stage in ("criteria", "custom_criteria", "bodypart", "measurement", "final"):
        if stage not in by:
            continue
        parts = by[stage]
        if not go:
            out[stage] = 0
            continue
        if stage == "custom_criteria":
            out[stage] = 1 if all(x == 1 for x in parts) else -1
        else:
            out[stage] = 1 if all(x == 1 for x in parts) else 0
        go = out[stage] == 1
    return out


def task_metrics(cases: list[dict[str, int]]) -> dict[str, Any]:
    """metric.py's per-task figures from each case's stage outcomes (``case_stages``)."""
    n = len(cases)
    has_custom = any("custom_criteria" in c for c in cases)
    idk_init = sum(1 for c in cases if c["init"] == -1)
    pass_init = n - idk_init
    cnt = {s: sum(1 for c in cases if c.get(s) == 1) for s in ("criteria", "bodypart", "measurement", "final")}
    consistency = sum(1 for c in cases if c.get("final") == 1 and c["init"] == 1)
    out: dict[str, Any] = {"cases": n, "idk_init": idk_init, "pass_init": pass_init, "has_custom_criteria": has_custom}
    if pass_init == 0:
        out["note"] = "every case answered 'I don't know' at init: no stage scored (the authors leave the task out)"
        return out
    if has_custom:
        idk_custom = sum(1 for c in cases if c.get("criteria") == 1 and c.get("custom_criteria") == -1)
        pass_custom = cnt["criteria"] - idk_custom
        wrong_criteria = pass_init - cnt["criteria"]
        body_trials, scored = pass_custom, pass_custom + wrong_criteria
        out["idk_custom"] = idk_custom
        levels = ([4] * cnt["final"] + [3] * (cnt["measurement"] - cnt["final"])
                  + [2] * (cnt["bodypart"] - cnt["measurement"]) + [1] * (pass_custom - cnt["bodypart"])
                  + [0] * wrong_criteria)
    else:
        body_trials, scored = cnt["criteria"], pass_init
        levels = ([4] * cnt["final"] + [3] * (cnt["measurement"] - cnt["final"])
                  + [2] * (cnt["bodypart"] - cnt["measurement"]) + [1] * (cnt["criteria"] - cnt["bodypart"])
                  + [0] * (pass_init - cnt["criteria"]))
    out["stages"] = {
        "criteria": wilson(cnt["criteria"], pass_init),
        "bodypart": wilson(cnt["bodypart"], body_trials),
        "measurement": wilson(cnt["measurement"], cnt["bodypart"]),
        "final": wilson(cnt["final"], cnt["measurement"]),
        "binary": wilson(cnt["final"], scored),
        "consistency": wilson(consistency, cnt["measurement"]),
    }
    out["scored_cases"] = scored
    out["stage_score"] = sum(levels) / len(levels) if levels else None
    out["stage_score_std"] = (math.sqrt(sum((x - out["stage_score"]) ** 2 for x in levels) / len(levels))
                              if levels else None)
    out["furthest_stage_counts"] = {str(k): levels.count(k) for k in range(5)}
    return out


def _mean_over(tasks: dict[str, dict[str, Any]], names: tuple[str, ...]) -> dict[str, Any] | None:
    rows = [tasks[t] for t in names if t in tasks and "stages" in tasks[t]]
    if not rows:
        return None
    out: dict[str, Any] = {"tasks": len(rows)}
    for st in ("criteria", "bodypart", "measurement", "final", "binary", "consistency"):
        for key in ("naive", "adjusted_wilson"):
            vals = [r["stages"][st][key] for r in rows if r["stages"].get(st)]
            out[f"{st}_{key}"] = sum(vals) / len(vals) if vals else None
    vals = [r["stage_score"] for r in rows if r.get("stage_score") is not None]
    out["stage_score"] = sum(vals) / len(vals) if vals else None
    return out


def cxreasonbench_block(dataset: str | Path, rows: dict[str, Any], texts: list[str | None], scores: Any,
                        judge: Any = None) -> dict[str, Any] | None:
    """The stage-conditional report block over the evaluated CXReasonBench rows (None if none)."""
    from radvqa.eval.parsers import Parser

    from radvqa.eval.pairs import has_value

    if not has_value(rows["source"], SOURCE):
        return None
    idx = [i for i, s in enumerate(rows["source"]) if s == SOURCE]
    if not idx:
        return None
    prov = _prov_table(dataset)
    metas = {i: _meta(prov.get(rows["qa_id"][i]) or []) for i in idx}
    open_idx = [i for i in idx if metas[i].get("scoring") == "judge"]
    verdicts: dict[int, Any] = {}
    if judge is not None and open_idx:
        got = judge.judge_many([(rows["question"][i], rows["answer"][i], texts[i]) for i in open_idx])
        verdicts = dict(zip(open_idx, got))
    parser = Parser()
    by_case: dict[str, list[tuple[str, int]]] = {}
    task_of: dict[str, str] = {}
    for i in idx:
        m = metas[i]
        o = turn_outcome(m, scores.correct[i], scores.value[i], texts[i], parser, verdicts.get(i))
        sid = rows["study_id"][i]
        by_case.setdefault(sid, []).append((m.get("stage", "?"), o))
        task_of[sid] = m.get("task", "?")
    per_task: dict[str, list[dict[str, int]]] = {}
    for sid in sorted(by_case):
        per_task.setdefault(task_of[sid], []).append(case_stages(by_case[sid]))
    tasks = {t: task_metrics(cs) for t, cs in sorted(per_task.items())}
    unjudged = len(open_idx) - sum(1 for v in verdicts.values() if getattr(v, "score", None) is not None)
    return {
        "definition": "stage-conditional accuracy (passed / reached; a stage counts only after every earlier "
                      "stage of the case passed), naive and Wilson-adjusted as CXReasonBench's metric.py "
                      "computes them; stage_score = mean furthest stage (0 criteria failed .. 4 final right)",
        "z": Z,
        "turns": len(idx),
        "cases": len(by_case),
        "open_turns": len(open_idx),
        "open_turns_unjudged": unjudged,
        "open_note": None if not open_idx else (
            "open turns without a judge verdict count as not passed" + ("" if judge is not None else
                                                                           " (no --judge-url given)")),
        "tasks": tasks,
        "total": _mean_over(tasks, TASKS),
        "perception": _mean_over(tasks, PERCEPTION),
        "measurement": _mean_over(tasks, MEASUREMENT),
    }
