"""Text normalisation: radvqa's strict one and a re-implementation of LLaVA-Med v1.0's.

LLaVA-Med v1.0 (``llava/eval/eval_metrics/glossary.py``, VQA-eval style) is reproduced by
behaviour, quirks included, because published numbers were computed with it:
- each punctuation mark of a fixed list is deleted when it touches a space anywhere in the
  input (or when the input has a digit,digit comma) and replaced by a space otherwise;
- periods not followed by a digit are deleted, but at most 32 of them (``re.sub`` received
  ``re.UNICODE`` == 32 as its *count* argument);
- number words zero..ten (and "none") become digits, articles are dropped, commas removed.
Its contraction table (e.g. "isnt" -> "isn't") is not reproduced: it only rewrites
apostrophe-less contractions, which never occur in VQA-RAD gold answers, so recall and the
closed "gold in prediction" test are unaffected.
"""

from __future__ import annotations

import re
from collections import Counter

from radvqa.eval.vocab import load_vocab

_LLAVA_PUNCT = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")
_LLAVA_NUM = {
    "none": "0",
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}
_LLAVA_ARTICLES = frozenset(("a", "an", "the"))
_DIGIT_COMMA = re.compile(r"(\d)(,)(\d)")
_PERIOD = re.compile(r"\.(?!\d)")


def llava_normalize(text: str) -> str:
    """LLaVA-Med v1.0's ``normalize_word`` behaviour (see module docstring)."""
    original = text
    out = text
    has_digit_comma = _DIGIT_COMMA.search(original) is not None
    for p in _LLAVA_PUNCT:
        if (p + " " in original) or (" " + p in original) or has_digit_comma:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    out = _PERIOD.sub("", out, count=32)
    words = []
    for w in out.lower().split():
        w = _LLAVA_NUM.get(w, w)
        if w not in _LLAVA_ARTICLES:
            words.append(w)
    return " ".join(words).replace(",", "")


def llava_token_prf(prediction: str, gold: str) -> tuple[float, float, float]:
    """LLaVA-Med v1.0's ``calculate_f1score`` on already-normalised strings, by behaviour:
    bags of whitespace tokens; tp counts the *prediction's* occurrences of words that also
    occur in the gold; fn counts gold occurrences of words absent from the prediction.
    Returns (precision, recall, f1); all zero when either side is empty or tp == 0."""
    cand = Counter(prediction.split())
    ref = Counter(gold.split())
    if not cand or not ref:
        return 0.0, 0.0, 0.0
    tp = sum(c for w, c in cand.items() if w in ref)
    fp = sum(c for w, c in cand.items() if w not in ref)
    fn = sum(c for w, c in ref.items() if w not in cand)
    if tp == 0:
        return 0.0, 0.0, 0.0
    p = tp / (tp + fp)
    r = tp / (tp + fn)
    return p, r, 2 * p * r / (p + r)


# --- radvqa strict normalisation -------------------------------------------------------

# distinct texts remembered; model outputs that repeat do so among the first few thousand,
# and a bigger cache only holds unique answers that are never asked for again
CACHE_MAX = 65_536
_NON_WORD = re.compile(r"(?<!\d)\.|\.(?!\d)|[^\w.]+")
_SPACES = re.compile(r"\s+")


class Normalizer:
    """radvqa's normalisation: lower case, declared replacements ("x-ray" -> "xray"),
    punctuation to spaces (decimal points kept), number words to digits, articles dropped."""

    def __init__(self) -> None:
        v = load_vocab()
        # one alternation for all replacements: a single pass over the text
        self._repl_map = {str(k).lower(): str(val) for k, val in v["replacements"].items()}
        alts = sorted((re.escape(k) for k in self._repl_map), key=len, reverse=True)
        self._repl = re.compile(r"\b(?:" + "|".join(alts) + r")\b") if alts else None
        self._num = {k: str(n) for k, n in v["number_words"].items()}
        self._articles = frozenset(v["articles"])
        self._cache: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        s = text.lower()
        if self._repl is not None:
            s = self._repl.sub(lambda m: self._repl_map[m.group()], s)
        s = _NON_WORD.sub(" ", s).replace("_", " ")
        toks = [self._num.get(t, t) for t in s.split() if t not in self._articles]
        out = " ".join(toks)
        if len(self._cache) < CACHE_MAX:
            self._cache[text] = out
        return out

    def tokens(self, text: str) -> list[str]:
        return self(text).split()


def token_prf(pred_tokens: list[str], gold_tokens: list[str]) -> tuple[float, float, float]:
    """SQuAD-style bag-of-tokens precision / recall / F1 (overlap = min counts).
    Both empty: 1,1,1 (nothing to say, nothing said); one empty: 0,0,0."""
    if not pred_tokens and not gold_tokens:
        return 1.0, 1.0, 1.0
    if not pred_tokens or not gold_tokens:
        return 0.0, 0.0, 0.0
    sp, sg = set(pred_tokens), set(gold_tokens)
    if len(sp) == len(pred_tokens) and len(sg) == len(gold_tokens):
        overlap = len(sp & sg)  # no repeated tokens: min counts are set overlap (fast path)
    else:
        overlap = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if overlap == 0:
        return 0.0, 0.0, 0.0
    p = overlap / len(pred_tokens)
    r = overlap / len(gold_tokens)
    return p, r, 2 * p * r / (p + r)
