"""Captioning metrics for open answers: BLEU-1..4, METEOR, ROUGE-L, CIDEr, through the maintained
``pycocoevalcap`` package (the scorers Medical-Diff-VQA's authors used in EKAID's
``model/evaluation.py``), not a re-implementation.

Tokenisation: pycocoevalcap's PTBTokenizer runs Stanford CoreNLP in Java; here answers are
lower-cased and split on the same punctuation it removes, in Python, so BLEU / ROUGE-L / CIDEr need
no Java. METEOR always runs its bundled Java jar: without a ``java`` on PATH it is reported as
``None`` with the reason. CIDEr's document frequencies come from the evaluated references, so
CIDEr depends on which rows are scored together (as in the original code); the report states n.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from typing import Any

# the punctuation PTBTokenizer drops (pycocoevalcap/tokenizer/ptbtokenizer.py PUNCTUATIONS)
_PUNCT = re.compile(r"""[\"'`()\[\]{}.,?!:;\-_/\\*&^%$#@~|<>+=]""")


def tokenize(text: str | None) -> str:
    return " ".join(_PUNCT.sub(" ", (text or "").lower()).split())


def available() -> str | None:
    """None when pycocoevalcap can be imported, else why not."""
    try:
        import pycocoevalcap  # noqa: F401
    except ImportError:
        return "pycocoevalcap is not installed (pip install 'radvqa[caption]')"
    return None


def caption_scores(refs: Sequence[str], hyps: Sequence[str | None], meteor: Any = None) -> dict[str, Any]:
    """Corpus-level scores of hypotheses against one reference each (a missing hypothesis is the
    empty answer). Values are in [0, 1] (CIDEr in [0, 10]), as pycocoevalcap returns them.
    ``meteor``: a running ``Meteor`` scorer to reuse (each one starts a Java process that loads
    its paraphrase tables: seconds, and 2 GB of heap), or None to start one when Java exists."""
    why = available()
    if why:
        return {"n": len(refs), "error": why}
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    if not refs:
        return {"n": 0}
    # every scorer asserts non-empty hypotheses: an empty answer becomes one dummy token that
    # matches nothing (the reference never contains it)
    gts = {str(i): [tokenize(r) or "<empty>"] for i, r in enumerate(refs)}
    res = {str(i): [tokenize(h) or "<none>"] for i, h in enumerate(hyps)}
    out: dict[str, Any] = {"n": len(refs)}
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    for k, v in enumerate(bleu, start=1):
        out[f"bleu_{k}"] = float(v)
    out["rouge_l"] = float(Rouge().compute_score(gts, res)[0])
    out["cider"] = float(Cider().compute_score(gts, res)[0])
    if meteor is None:
        meteor = start_meteor()
    if meteor is None:
        out["meteor"] = None
        out["meteor_note"] = "METEOR needs Java (pycocoevalcap runs its jar): not found on PATH"
    else:
        out["meteor"] = float(meteor.compute_score(gts, res)[0])
    return out


def start_meteor() -> Any:
    if shutil.which("java") is None or available():
        return None
    from pycocoevalcap.meteor.meteor import Meteor

    return Meteor()


def caption_block(rows: dict[str, list[Any]], texts: Sequence[str | None], kinds: Sequence[str]) -> dict[str, Any]:
    """Open rows (kind "open") overall and per question type."""
    open_idx = [i for i, k in enumerate(kinds) if k == "open"]
    meteor = start_meteor()  # one Java process for every group
    block: dict[str, Any] = {
        "metrics": "BLEU-1..4, METEOR, ROUGE-L, CIDEr (pycocoevalcap) on open questions; one reference each",
        "overall": caption_scores([rows["answer"][i] for i in open_idx], [texts[i] for i in open_idx], meteor),
        "by_question_type": {},
    }
    by: dict[str, list[int]] = {}
    for i in open_idx:
        by.setdefault(rows["question_type"][i], []).append(i)
    for t, idx in sorted(by.items()):
        block["by_question_type"][t] = caption_scores([rows["answer"][i] for i in idx], [texts[i] for i in idx], meteor)
    return block
