"""Per-question scoring under a protocol: ``radvqa`` (strict, default) or ``llava-med``.

Output is columnar (one list per field, one entry per question) so aggregation over a
million rows stays cheap. Every question of the evaluated rows is scored; a missing
prediction is scored as wrong (closed: 0, open: 0 recall / F1) with status "missing".
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterator

from radvqa.eval.boxes import BoxError, boxes_from_text, coerce_boxes, matched_iou, to_pixels
from radvqa.eval.dataset import ImageSizes
from radvqa.eval.parsers import MISSING, Parser
from radvqa.eval.predictions import Prediction
from radvqa.eval.text import Normalizer, llava_normalize, llava_token_prf, token_prf
from radvqa.eval.vocab import load_vocab

PROTOCOLS = ("radvqa", "llava-med")
_ROW_COLUMNS = ("answer_short", "choices", "question_type", "question", "answer", "boxes", "image_ids", "image_paths", "polarity")
PROTOCOL_VERSIONS = {"radvqa": 1, "llava-med": 1}
CLOSED_KINDS = ("yes_no", "choice", "count", "short")
# distinct (kind, text, options) parses remembered: ~200 bytes each; repeated outputs
# ("Yes.", "B") are met early, unique ones never hit, so a larger cache only costs memory
PARSE_CACHE_MAX = 65_536


_NAN = float("nan")
_list_append = list.append


class FloatColumn:
    """``float | None`` per question in 8 bytes: an ``array('d')`` with None stored as NaN
    (no score is ever NaN). A list of Python floats costs 32 bytes a row; a run of a million
    questions holds seven such columns. Reads give back None where None was appended."""

    __slots__ = ("a",)

    def __init__(self, values: Any = ()) -> None:
        self.a = array("d")
        for v in values:
            self.append(v)

    def append(self, x: float | None) -> None:
        self.a.append(_NAN if x is None else x)

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, i: int) -> float | None:
        v = self.a[i]
        return None if v != v else v

    def __iter__(self) -> Iterator[float | None]:
        for v in self.a:
            yield None if v != v else v

    def numpy(self) -> Any:
        """A float64 copy (NaN where None)."""
        import numpy as np

        return np.frombuffer(self.a, dtype=np.float64).copy() if len(self.a) else np.zeros(0)


class InternedList(list):  # type: ignore[type-arg]
    """A list whose appended strings are shared: parse-failure reasons and box errors repeat
    ("no prediction for this question") but are built per row by f-strings. The pool is
    bounded so a run where every reason is distinct does not keep a second copy of each."""

    __slots__ = ("_pool",)
    POOL_MAX = 100_000

    def __init__(self) -> None:
        super().__init__()
        self._pool: dict[Any, Any] = {}

    def append(self, v: Any) -> None:
        if v is not None:
            hit = self._pool.get(v)
            if hit is None and len(self._pool) < self.POOL_MAX:
                self._pool[v] = v
            elif hit is not None:
                v = hit
        super().append(v)


@dataclass
class Scores:
    """Columnar per-question results: one column per field, one entry per question; float
    columns in 8 bytes a row (FloatColumn), repeated strings shared."""

    protocol: str
    kind: list[str] = field(default_factory=list)
    status: list[str] = field(default_factory=list)  # parsed / unparsed / missing
    reason: list[str | None] = field(default_factory=InternedList)
    value: list[str | None] = field(default_factory=list)
    correct: FloatColumn = field(default_factory=FloatColumn)  # closed kinds
    exact: FloatColumn = field(default_factory=FloatColumn)  # open / short: normalised exact match
    tok_p: FloatColumn = field(default_factory=FloatColumn)
    tok_r: FloatColumn = field(default_factory=FloatColumn)
    tok_f1: FloatColumn = field(default_factory=FloatColumn)
    # grounding
    grounding: list[bool] = field(default_factory=list)
    gold_boxes: list[int] = field(default_factory=list)
    pred_boxes: list[int | None] = field(default_factory=list)  # None: no box could be read
    box_error: list[str | None] = field(default_factory=InternedList)
    iou: FloatColumn = field(default_factory=FloatColumn)
    # llava-med only: what the v1.0 script scored (None: the script dropped the question
    # from its denominator, or not a llava-med closed question); see Scorer._row_llava
    script_score: FloatColumn = field(default_factory=FloatColumn)


_LIST_SPLIT = re.compile(r",|;|\band\b")
_NONE_GOLD = frozenset(("none", "no finding", "nothing", "no findings"))
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _num(s: str | None) -> str | None:
    if s is None:
        return None
    m = _NUMBER.search(s)
    if m:
        v = float(m.group())
        return str(int(v)) if v.is_integer() else str(v)
    return None


class Scorer:
    def __init__(self, protocol: str = "radvqa", box_format: str = "auto", sizes: ImageSizes | None = None) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
        self.protocol = protocol
        self.parser = Parser()
        self.norm = Normalizer()
        self.box_format = box_format
        self.sizes = sizes
        v = load_vocab()
        self._count_types = tuple(v["count_question_types"])
        self._ground_types = tuple(v["grounding_question_types"])
        self._parse_cache: dict[tuple[Any, ...], Any] = {}
        self._qt_cache: dict[str, tuple[bool, bool]] = {}

    # -- what kind of answer a row expects -------------------------------------------------
    def _qt(self, qt: str | None) -> tuple[bool, bool]:
        """(is a count type, is a grounding type) of a question type, cached."""
        hit = self._qt_cache.get(qt or "")
        if hit is None:
            low = (qt or "").lower()
            hit = (any(t in low for t in self._count_types), any(t in low for t in self._ground_types))
            self._qt_cache[qt or ""] = hit
        return hit

    def kind_of(self, row: dict[str, Any]) -> str:
        short = row.get("answer_short")
        if row.get("choices"):
            return "choice"
        is_count = self._qt(row.get("question_type"))[0]
        if short is not None:
            s = short.strip().lower()
            if s in ("yes", "no"):
                return "yes_no"
            if is_count and _num(self.norm(s)) is not None:
                return "count"
            return "short"
        # one definition of closed for both protocols: a question is closed when it has a short
        # gold answer (the benchmark's CLOSED); an open "how many" question stays open (#17:
        # VQA-RAD test was 274 closed here, 272 under llava-med and officially)
        return "open"

    def is_grounding(self, row: dict[str, Any]) -> bool:
        if row.get("boxes"):
            return True
        return self._qt(row.get("question_type"))[1]

    # -- scoring ---------------------------------------------------------------------------
    def score(self, rows: dict[str, list[Any]], preds: list[Prediction | None], progress: Any = None) -> Scores:
        n = len(rows["qa_id"])
        if len(preds) != n:
            raise ValueError(f"{len(preds)} predictions for {n} rows: align them first (predictions.join)")
        # only the columns scoring reads: a dict per row is the hot path's main cost
        cols = [c for c in _ROW_COLUMNS if c in rows]
        out = Scores(protocol=self.protocol)
        fn = self._row_radvqa if self.protocol == "radvqa" else self._row_llava
        col_lists = [rows[c] for c in cols]
        # iterate the predictions (not preds[i]): Aligned builds them fastest in order
        for i, (vals, p) in enumerate(zip(zip(*col_lists), preds)):
            row = dict(zip(cols, vals))
            fn(row, p, out)
            self._row_boxes(row, p, out)
            if progress is not None and i % 10000 == 0:
                progress(i, n)
        if progress is not None:
            progress(n, n)
        return out

    def _parse(self, kind: str, text: str, choices: list[str] | None) -> Any:
        # Model outputs repeat ("Yes.", "B", "No evidence of it."): parse each distinct
        # (kind, text, options) once. Bounded (PARSE_CACHE_MAX) so memory stays flat on huge runs.
        key = (kind, text, tuple(choices)) if choices else (kind, text)
        hit = self._parse_cache.get(key)
        if hit is None:
            hit = self.parser.parse(kind, text, choices)
            if len(self._parse_cache) < PARSE_CACHE_MAX:
                self._parse_cache[key] = hit
        return hit

    def _append(self, out: Scores, kind: str, res: Any, correct: float | None, exact: float | None, prf: tuple[float, float, float] | None, script: float | None = None) -> None:
        out.kind.append(kind)
        out.status.append(res.status)
        why = res.reason
        if why is None:
            _list_append(out.reason, None)  # the common case, without InternedList's Python-level append
        else:
            out.reason.append(why)
        out.value.append(res.value)
        # straight into the arrays (None -> NaN): FloatColumn.append per value costs ~2 s a million rows
        out.correct.a.append(_NAN if correct is None else correct)
        out.exact.a.append(_NAN if exact is None else exact)
        if prf is None:
            out.tok_p.a.append(_NAN)
            out.tok_r.a.append(_NAN)
            out.tok_f1.a.append(_NAN)
        else:
            out.tok_p.a.append(prf[0])
            out.tok_r.a.append(prf[1])
            out.tok_f1.a.append(prf[2])
        out.script_score.a.append(_NAN if script is None else script)

    def _row_radvqa(self, row: dict[str, Any], pred: Prediction | None, out: Scores) -> None:
        kind = self.kind_of(row)
        text = None if pred is None else pred.text
        choices = row.get("choices")
        res = self._parse(kind, text, choices) if text is not None else MISSING
        if pred is not None and text is None:
            why = f"prediction is null ({pred.error})" if pred.error else "prediction is null"
            res = type(res)(None, "missing", why, None)
        gold_short = row.get("answer_short")
        if kind == "yes_no":
            correct = 1.0 if res.parsed and res.value == gold_short.strip().lower() else 0.0
            self._append(out, kind, res, correct, None, None)
        elif kind == "choice":
            gold = _gold_letter(gold_short, choices, self.norm)
            correct = 1.0 if res.parsed and res.value == gold else 0.0
            self._append(out, kind, res, correct, None, None)
        elif kind == "count":
            gold = _num(self.norm(gold_short if gold_short is not None else (row.get("answer") or "")))
            correct = 1.0 if res.parsed and gold is not None and res.value == gold else 0.0
            self._append(out, kind, res, correct, None, None)
        elif kind == "short":
            g = self.norm(gold_short)
            if res.parsed:
                res, ok = self._short(res, gold_short, row.get("question") or "")
            else:
                ok = 0.0
            prf = token_prf(res.value.split(), g.split()) if res.parsed else (0.0, 0.0, 0.0)
            self._append(out, kind, res, ok, 1.0 if res.parsed and res.value == g else 0.0, prf)
        else:
            gold = self.norm(row.get("answer") or "")
            if res.parsed:
                prf = token_prf(res.value.split(), gold.split())
                ex = 1.0 if res.value == gold else 0.0
            else:
                prf, ex = (0.0, 0.0, 0.0), 0.0
            self._append(out, kind, res, None, ex, prf)

    def _short(self, res: Any, gold_raw: str, question: str) -> tuple[Any, float]:
        """A closed label answer ("left", "mri", "nodule, pleural effusion"): right when every
        gold item occurs as whole words in the answer ("The lesion is on the left side"), in
        any order. An answer that also names the question's alternative ("left or right?" ->
        "left and right") is ambiguous: unparsed, not right. A "none" / "no finding" gold
        also accepts an answer the yes/no parser reads as "no" ("There is no nodule")."""
        pred = " " + res.value + " "
        gold = self.norm(gold_raw)
        items = [self.norm(x) for x in _LIST_SPLIT.split(gold_raw) if self.norm(x)] or [gold]
        if " ".join(gold_raw.lower().split()) in _NONE_GOLD:  # raw: the normaliser maps "none" to "0"
            if (" " + gold + " ") in pred or self._parse("yes_no", res.value, None).value == "no":
                return res, 1.0
            return res, 0.0
        if not all((" " + it + " ") in pred for it in items):
            return res, 0.0
        q = self.norm(question).split()
        alts = {q[k - 1] for k in range(1, len(q)) if q[k] == "or"} | {q[k + 1] for k in range(len(q) - 1) if q[k] == "or"}
        others = [a for a in alts if a not in gold.split() and (" " + a + " ") in pred]
        if others:
            return type(res)(None, "unparsed", f"ambiguous: names {gold!r} and {others[0]!r}", "short"), 0.0
        return res, 1.0

    def _row_llava(self, row: dict[str, Any], pred: Prediction | None, out: Scores) -> None:
        """LLaVA-Med v1.0 VQA-RAD scoring (llava/eval/run_eval.py), by behaviour:
        both sides lower-cased and normalised (text.llava_normalize);
        closed (answer_short set): correct when the gold string occurs in the prediction
        string (substring, so "no" matches inside "normal"); open: token recall.
        ``correct`` is that rule over every closed question. The v1.0 script itself
        differs in two ways, kept in ``script_score``: a prediction containing neither
        "yes" nor "no" (substrings) scored 0 even when it contained the gold ("left" in
        "left side"), and one containing "yes"/"no" but not the gold was not appended at
        all — it left the denominator (None here)."""
        text = None if pred is None else pred.text
        # closed gold: the short answer (on VQA-RAD identical to the answer after
        # normalisation; on generated data "yes" rather than the full sentence)
        short = row.get("answer_short")
        gold = llava_normalize(str(short if short is not None else (row.get("answer") or "")).lower())
        p = llava_normalize(text.lower()) if text is not None else ""
        res_status = "parsed" if text is not None else "missing"
        res = _Res(p if text is not None else None, res_status, None if text is not None else "no prediction for this question")
        if row.get("answer_short") is not None:
            hit = bool(gold) and gold in p
            has_yn = ("yes" in p) or ("no" in p)
            script = (1.0 if hit else None) if has_yn else 0.0
            self._append(out, "closed", res, 1.0 if hit else 0.0, None, None, script)
        else:
            prf = llava_token_prf(p, gold)
            self._append(out, "open", res, None, 1.0 if p == gold and p else 0.0, prf)

    # -- boxes -----------------------------------------------------------------------------
    def _row_boxes(self, row: dict[str, Any], pred: Prediction | None, out: Scores) -> None:
        if not self.is_grounding(row):
            out.grounding.append(False)
            out.gold_boxes.append(0)
            out.pred_boxes.append(None)
            _list_append(out.box_error, None)
            out.iou.a.append(_NAN)
            return
        image_ids = row.get("image_ids") or []
        first = image_ids[0] if image_ids else None
        gold_all = row.get("boxes") or []
        # boxes: (image_id, x1, y1, x2, y2) tuples (dataset.load_qa); predicted boxes refer
        # to the first image
        gold_rows = [b for b in gold_all if first is None or b[0] in (first, None)] or gold_all
        gold = [[b[1], b[2], b[3], b[4]] for b in gold_rows]
        out.grounding.append(True)
        out.gold_boxes.append(len(gold))
        pboxes, err = self._pred_boxes(row, pred, first)
        out.box_error.append(err)
        out.pred_boxes.append(None if pboxes is None else len(pboxes))
        if gold:
            out.iou.a.append(matched_iou(gold, pboxes or [])[0])
        elif self._is_negative(row):
            # negative grounding question: right when the model draws nothing
            out.iou.a.append(1.0 if not pboxes else 0.0)
        else:
            # a positive "where" question whose finding has no box (no image / no region box
            # in the source): nothing to compare, so no IoU; counted as "ungroundable"
            out.iou.a.append(_NAN)

    def _is_negative(self, row: dict[str, Any]) -> bool:
        if row.get("polarity") == "negative":
            return True
        short = (row.get("answer_short") or "").strip().lower()
        return short in _NONE_GOLD or short == "no"

    def _pred_boxes(self, row: dict[str, Any], pred: Prediction | None, image_id: str | None) -> tuple[list[list[float]] | None, str | None]:
        if pred is None:
            return None, "no prediction"
        try:
            if pred.boxes is not None:
                raw = coerce_boxes(pred.boxes)
                fmt = pred.box_format or "pixels"  # contract: the boxes field is stored pixels
            else:
                raw, implied = boxes_from_text(pred.text or "")
                fmt = pred.box_format or implied or self.box_format
        except BoxError as e:
            return None, str(e)
        if not raw:
            return [], None
        size = pred.image_size
        if size is None and self.sizes is not None and (fmt != "pixels"):
            paths = row.get("image_paths") or []
            size = self.sizes.get(image_id, paths[0] if paths else None)
        try:
            px, err = to_pixels(raw, fmt, size)
        except BoxError as e:
            return None, str(e)
        if err:
            return None, err
        return px, None


@dataclass(frozen=True, slots=True)
class _Res:
    value: str | None
    status: str
    reason: str | None


def _gold_letter(gold: str | None, choices: list[str] | None, norm: Normalizer) -> str | None:
    if gold is None:
        return None
    g = gold.strip()
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(choices or [])]
    m = re.fullmatch(r"\(?([A-Za-z])[\).:]?", g)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper()
    ng = norm(g)
    for letter, opt in zip(letters, choices or []):
        if norm(opt) == ng:
            return letter
    return None
