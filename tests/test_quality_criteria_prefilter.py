"""The literal pre-filters in front of the sentence-flag regexes (``quality.criteria._sentence_flags``)
change no flag: each flag equals the plain regex scan on real report sentences (the bundled OpenI
sample) and on sentences made of every word of every pattern."""

from __future__ import annotations

import re
from pathlib import Path

import radvqa
from radvqa.generate import Generator
from radvqa.ontology import load_ontology
from radvqa.quality import criteria as c

SAMPLE = Path(radvqa.__file__).parent / "data" / "sample" / "openi"


def _plain(text: str, hedge_re: re.Pattern[str] | None) -> tuple[bool, ...]:
    # the scans as they were before the pre-filters: every regex over the whole sentence
    low = text.lower()
    alt = False
    for clause in c._CLAUSE.split(low):
        if c._ALT_CUE.search(clause) and not c._NEG_CUE.search(clause):
            alt = True
            break
    return (hedge_re is not None and hedge_re.search(low) is not None, alt,
            c._QUALIFIED_NEG.search(low) is not None, c._RESOLUTION.search(low) is not None,
            c._PARTIAL.search(low) is not None, c._NORMAL_WORD.search(low) is not None,
            c._OTHER_EXAM.search(low) is not None)


def _pattern_words() -> list[str]:
    # every word or phrase of each pattern's alternation, with the suffixes its ``\w*`` / groups allow
    words: set[str] = set()
    for pat in (c._RELATIVE_PLACE, c._ALT_CUE, c._QUALIFIED_NEG, c._RESOLUTION, c._PARTIAL, c._NORMAL_WORD, c._OTHER_EXAM):
        src = re.sub(r"\\b|\(\?:|\)|\\w\*", " ", pat.pattern)
        for part in src.split("|"):
            part = part.strip()
            if part:
                words.update({part, part + "ed", part + "ing", part + "ly", part + "s"})
    return sorted(words)


def test_prefiltered_flags_equal_the_plain_scans() -> None:
    hedge_re = Generator(load_ontology()).vocab.hedge_re  # the generator's own hedge pattern
    assert hedge_re is not None
    sentences: list[str] = []
    for xml in sorted(SAMPLE.glob("*.xml")):
        text = re.sub(r"<[^>]+>", " ", xml.read_text(encoding="utf-8", errors="replace"))
        sentences += [s.strip() for s in re.split(r"(?<=\.)\s+", text) if s.strip()]
    words = _pattern_words()
    assert len(words) > 100 and len(sentences) > 50
    for w in words:
        sentences += [f"{w}.", f"There is {w} of the effusion, but No {w} or atelectasis.",
                      f"Lungs {w} versus scarring; {w.upper()} vs edema", f"x{w}y"]
    sentences += ["Lines cleared.", "Clearing of the opacities.", "Pneumothorax has been removed or resolving.",
                  "Prior CT scan.", "PET-CT shows.", "no definite effusion", "Heart is not significantly enlarged.",
                  "Small effusion or atelectasis, but no pneumothorax or edema.", "Nearly resolved."]
    flagged = [0] * 7
    for s in sentences:
        c._SENTENCE_FLAGS.clear()
        got = c._sentence_flags(s, hedge_re)
        assert got == _plain(s, hedge_re), s
        flagged = [n + f for n, f in zip(flagged, got)]
    # every flag is seen both set and unset, so no comparison above is vacuous
    assert all(0 < n < len(sentences) for n in flagged), flagged


def _plain_negated_only(words: tuple[str, ...], sentences: list[str]) -> bool:
    # ``negated_only`` without its pre-filter
    seen = False
    for s in sentences:
        low = c._PSEUDO_NEG.sub(lambda m: " " * len(m.group(0)), s.lower())
        for w in words:
            for m in re.finditer(r"\b" + re.escape(w) + r"\b", low):
                seen = True
                start = 0
                for cl in c._NEG_CLAUSE.finditer(low, 0, m.start()):
                    start = cl.end()
                if not c._NEG_ONLY_CUE.search(low, start, m.start()):
                    return False
    return seen


def test_prefiltered_relative_place_and_negated_only_equal_the_plain_scans() -> None:
    sentences = [f"Density {w} the ribs." for w in _pattern_words()] + [
        "No large effusion. Left basilar opacity.", "No change in the large hernia.", "no left or right effusion",
        "Tip 5 cm ABOVE the carina.", "Leads overlying the heart.", "Lungs are clear."]
    hits = {"relative": 0, "negated": 0, "stated": 0}
    for s in sentences:
        c._RELATIVE_CACHE.clear()
        got = c.relative_place([s])
        assert got == (c._RELATIVE_PLACE.search(s.lower()) is not None), s
        hits["relative"] += got
    for words in (("large",), ("left", "right"), ("acute",), ("effusion",), ("hernia",)):
        for pair in zip(sentences, sentences[1:]):
            got = c.negated_only(words, list(pair))
            assert got == _plain_negated_only(words, list(pair)), (words, pair)
            hits["negated"] += got
            hits["stated"] += not got
    assert all(hits.values()), hits
