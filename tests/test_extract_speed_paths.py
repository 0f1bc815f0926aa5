"""Speed paths of the rules extractor change no output: the start-of-match lookahead in front of the
gap patterns (radvqa.extract._prefix) and the section / sentence caches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from radvqa.extract._data import load_data
from radvqa.extract._prefix import lookahead, prefixes

HERE = Path(__file__).parent


def test_prefixes_of_simple_patterns():
    assert prefixes(r"(?:heart|cardiac)\s+size") == {"hea", "car"}
    spaced = prefixes(r"no\s+acute", 3)
    assert {"no ", "no\t", "no\n", "no\xa0"} <= spaced and all(p[:2] == "no" and p[2].isspace() for p in spaced)
    assert prefixes(r"ab?c") == {"abc", "ac"}
    assert prefixes(r"x{0,2}yz") == {"xxy", "xyz", "yz"}
    # may match nothing, or start with any character: no prefix can be told
    assert prefixes(r"a?") is None
    assert prefixes(r"\w+ly") is None
    assert prefixes(r".a") is None
    assert prefixes(r"(?i)heart") is None
    assert lookahead([r"abc", r"\w+"]) == ""


def test_lookahead_changes_no_match_of_the_rule_patterns():
    pats = [p["regex"] for p in load_data("patterns")["patterns"]]
    alt = "(?:" + "|".join(f"(?P<p{i}>{p})" for i, p in enumerate(pats)) + r")(?!\w)"
    plain = re.compile(r"(?<!\w)" + alt)
    fast = re.compile(r"(?<!\w)" + lookahead(pats) + alt)
    data = yaml.safe_load((HERE / "data" / "extract" / "conventions.yaml").read_text())
    texts = [r[1] for r in data["rows"]] + [r[1] for r in data["regressions"]] + [
        "The heart size and pulmonary vascularity appear within normal limits. No\tacute cardiopulmonary disease.",
        "Costophrenic angles are blunted. Lungs are hyperinflated but otherwise clear. Normal heart size.",
    ]
    hits = 0
    for t in texts:
        low = t.lower()
        want = [(m.span(), m.lastgroup) for m in plain.finditer(low)]
        assert [(m.span(), m.lastgroup) for m in fast.finditer(low)] == want, t
        hits += len(want)
    assert hits >= 10  # the sample does exercise the patterns


def test_section_and_sentence_caches_change_no_output():
    # the same section text in different neighbourhoods: what follows it (an abbreviation reads
    # the next characters), a report start, a letter whose lower case has two characters, a
    # capital sigma, redacted runs at a section end, case differences
    from radvqa.extract import get_extractor
    from radvqa.model import to_json

    reports = [
        "FINDINGS: Small left effusion seen in pt.\nIMPRESSION: Effusion.",
        "FINDINGS: Small left effusion seen in pt.\nimpression: no effusion.",
        "Small left effusion seen in pt.\nIMPRESSION: Effusion.",
        "INDICATION: \u0130stanbul.\nFINDINGS: Small left effusion seen in pt.\nIMPRESSION: Effusion.",
        "INDICATION: \u03a3 fever.\nFINDINGS: Small left effusion seen in pt.\nIMPRESSION: Effusion.",
        "FINDINGS: Opacity in the left base XXXX\nIMPRESSION: XXXXX atelectasis.",
        "FINDINGS: Opacity in the left base XXXXXX\nIMPRESSION: XXXXX atelectasis.",
        "FINDINGS: SMALL LEFT EFFUSION SEEN IN PT.\nIMPRESSION: Effusion.",
        "1. Small left effusion.\n2. No pneumothorax.",
        "FINDINGS: 1. Small left effusion.\n2. No pneumothorax.",
    ]
    cached = get_extractor("rules")
    plain = get_extractor("rules", cache_size=0)
    for _ in range(2):  # the second round reads every section and sentence from the caches
        for i, text in enumerate(reports):
            assert to_json(cached.extract(text, str(i))) == to_json(plain.extract(text, str(i))), text


def test_cached_attributes_are_frozen_and_untracked():
    # the sentence cache keeps each mention's attributes as a FrozenAttrs (read-only, out of the
    # cyclic garbage collector): a report whose sentence borrows the previous sentence's location
    # ("This may represent scarring") gets a copy, and the cached sentence stays unlocated
    import gc

    import msgspec
    import pytest as _pytest

    from radvqa.extract import get_extractor
    from radvqa.extract.attributes import FrozenAttrs
    from radvqa.model import to_json

    ex = get_extractor("rules")
    plain = get_extractor("rules", cache_size=0)
    texts = ["FINDINGS: Opacity in the left upper lobe. This may represent scarring.",
             "FINDINGS: This may represent scarring. Small right effusion.",
             "FINDINGS: Opacity in the left upper lobe. This may represent scarring."]
    for i, text in enumerate(texts):
        assert to_json(ex.extract(text, str(i))) == to_json(plain.extract(text, str(i)))
    located = [o for o in ex.extract(texts[0]).observations if o.finding == "scarring"]
    assert located and located[0].laterality == "left"  # the anaphora path did run
    bare = [o for o in ex.extract(texts[1]).observations if o.finding == "scarring"]
    assert bare and bare[0].laterality is None and not bare[0].regions
    frozen = [it[5] for entry in ex._cache.values() for it in entry[1] if it[5] is not None]
    assert frozen and all(type(v) is FrozenAttrs and not gc.is_tracked(v) for v in frozen)
    with _pytest.raises(AttributeError):
        frozen[0].laterality = "right"  # type: ignore[misc]
    assert msgspec.structs.replace(frozen[0], laterality="right") is not frozen[0]


def test_body_part_headings_through_the_word_filter():
    # a sentence with a word outside every heading's vocabulary is rejected before it is taken
    # apart; these values are what the full reading gave before that filter (bdc0941)
    from radvqa.extract.sections import body_part_heading

    want = {"left knee.": "other", "2. the knee.": "other", "chest:": "chest", "tibia and fibula": "other",
            "left hand, wrist.": "other", "both knees": "other", "pa and lateral chest": "chest",
            "lumbar spine.": "other", "1) chest": "chest", "abdomen and pelvis:": "other", "cxr.": "chest",
            "  - chest -": "chest", "knee, ankle and foot.": "other", "views of the chest:": "chest",
            "bilateral hips": "other", "the knee is normal.": None, "no pneumothorax.": None,
            "right and left knees.": None, "chest and left knee": None, "heart normal.": None,
            "\u00b3. knee": None, "": None}
    assert {s: body_part_heading(s) for s in want} == want


def test_body_part_first_word_filter_edge_cases():
    # the first word is read before the sentence is normalised (#12 speed round): stripped
    # punctuation at either end, a comma right after the word, a list number, a tail of
    # stripped characters after the only word; the values are the full reading's (main f31aae3)
    from radvqa.extract.sections import body_part_heading

    want = {"chest. .": "chest", "chest.": "chest", "chest-": "chest", "knee:": "other", ", chest": None,
            "knee,ankle": "other", "-left knee": "other", ". ; chest": "chest", "chest. left knee": None,
            "chest.. knee": None, "chest,, knee": None, "knee and ankle": "other", "2.chest": "chest", "1) left knee,": "other",
            "left\tknee": "other", "knee\n\nankle": None, "chest:-": "chest", "ches": None}
    assert {s: body_part_heading(s) for s in want} == want


def test_control_characters_counted_alike_in_ascii_and_other_text():
    # ASCII text counts its control characters with bytes.translate, other text with the regex:
    # the same count gives the same message
    from radvqa.extract.text import check_text

    for body in ("ab\x01cd\x02ef\x7fgh\x1fij" * 3, "\x0e\x08 x", "a\x00b c", "no control\tat all\r\n"):
        ascii_err = check_text(body)[1]
        other_err = check_text(body + "\u00e9")[1]
        if ascii_err is None:
            assert other_err is None
        else:
            assert other_err is not None and ascii_err.split(" in ")[0] == other_err.split(" in ")[0], (ascii_err, other_err)
    assert check_text("ab\x01cd\x02ef\x7f" * 5)[1] == "binary content (15 control characters in 45), not report text"


def test_section_headers_memo_changes_no_split():
    # the header found before a colon is memoised by the text before it on its line; the same
    # words in another position (line start or after a sentence end) still decide alone
    from radvqa.extract.sections import split_sections

    texts = ["FINDINGS: a. IMPRESSION: b.", "x FINDINGS: a.\nFINDINGS: b.", "Normal. FINDINGS: a.", "the report: FINDINGS",
             "IMPRESSION:\n  FINDINGS  : c.", "Normal. FINDINGS: a.\nNormal. FINDINGS: a."]
    got = [[(s.name, s.start, s.end) for s in split_sections(t)] for t in texts * 2]
    assert got[:len(texts)] == got[len(texts):]
    # the splits main's code (f31aae3) gives
    assert got[:len(texts)] == [
        [("FINDINGS", 9, 13), ("IMPRESSION", 24, 27)], [("BODY", 0, 15), ("FINDINGS", 24, 27)],
        [("BODY", 0, 8), ("FINDINGS", 17, 20)], [("BODY", 0, 20)], [("IMPRESSION", 11, 14), ("FINDINGS", 25, 28)],
        [("BODY", 0, 8), ("FINDINGS", 17, 29), ("FINDINGS", 38, 41)]]


@pytest.mark.timeout(60)
def test_explained_away_pattern_fails_fast_on_a_clause_without_its_cue():
    """The explained-away pattern once let a word be cut into pieces in 2^(length-1) ways: CXR1016's
    impression took 6 s (the whole OpenI archive 108 s instead of 2 s). 40 fresh extractions of it
    took about 250 s then and take well under a second now; the timeout catches the regression
    without timing anything finer."""
    from radvqa.extract import get_extractor

    text = ("IMPRESSION: Comparison XXXX, XXXX. XXXX right pleural opacity along the lower chest wall "
            "compatible with thickening and/or some loculated effusion, accompanied with some adjacent "
            "atelectasis / airspace disease within the right lung base. Round opacity seen projecting "
            "adjacent to right hilum on PA view is XXXX on lateral view to represent some discoid "
            "atelectasis or fluid associated with the upper aspect of the XXXX fissure. Some XXXX "
            "opacities compatible with scarring/chronic inflammatory change are seen within the left "
            "lower lung which are more conspicuous versus previous examination.")
    ex = get_extractor("rules", cache_size=0)
    for i in range(40):
        e = ex.extract(text, f"r{i}")
    assert e.error is None and any(o.finding == "atelectasis" for o in e.observations)


# Texts where a word-start scanner could go wrong: a phrase at 0, phrases right after one another,
# after punctuation, inside words, across line breaks and runs of spaces, at the end, a non-ASCII
# letter before a phrase (the scanner is then not used), digits and underscores next to a phrase
_EDGE_TEXTS = [
    "effusion", "left effusion", "effusion.", "(effusion)", "no effusion; no pneumothorax?",
    "left lower lobe atelectasis, right upper lobe opacity", "lefteffusion", "effusionleft",
    "left\nlower  lobe", "xleft left_ 3left left3 _left", "left-sided effusion", "mild/moderate",
    "éleft effusion", "left éffusion", "heart size is normal. lungs are clear.", "no acute disease",
    "?", ";", "(", "no", "no  acute\tcardiopulmonary abnormality", "not enlarged and not clear",
    "old rib fracture, healed", "fracture,healed", "fracture, chronic appearing; no effusion", ", healed",
]


def _random_texts(words: list[str], n: int, seed: int) -> list[str]:
    import random

    rnd = random.Random(seed)
    seps = [" ", "  ", ", ", ". ", "\n", "-", "/", "(", ")", ";", "?", "", "x", "_", "3"]
    return ["".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(1, 12))) for _ in range(n)]


def test_word_start_scanners_find_what_the_tries_find():
    # the term, attribute and cue tries and the gap patterns of an ASCII sentence are scanned by
    # patterns led by one non-word character (radvqa.extract._trie.word_spans): same matches
    from radvqa.extract import get_extractor

    ex = get_extractor("rules", cache_size=0)
    mm, am, cx = ex.mentions, ex.attributes, ex.context
    assert mm._term_fast is not None and mm._pattern_fast is not None and am._fast is not None
    assert cx._edged_fast is not None  # else the test below checks nothing new
    words = ["left", "right", "lower", "lobe", "effusion", "no", "not", "heart", "size", "is", "normal", "lungs",
             "are", "clear", "mild", "small", "pleural", "pneumothorax", "acute", "cardiopulmonary", "disease",
             "without", "opacity", "possible", "cm", "3", "bilateral", "stable", "the", "and", "or", "?", "healed",
             "chronic", "appearing", "fracture", ", healed"]
    # punctuation cues, scanned only when one search finds any (context.ContextRules.cues)
    texts = _EDGE_TEXTS + _random_texts(words, 1500, 7) + _random_texts(words + ["(", ";", ":", ")"], 300, 8)
    for t in texts:
        for s in (t, t.upper().lower()):
            got = ([(m.start, m.end, m.findings, m.certainty, m.rule) for m in mm.find(s, 0, len(s))],
                   [(a.kind, a.value, a.start, a.end) for a in am.find(s, 0, len(s))],
                   [(c.start, c.end, c.roles) for c in cx.cues(s, 0, len(s))])
            # the same with the scanners off (the plain tries and patterns on the whole string)
            saved = mm._term_fast, mm._pattern_fast, am._fast, cx._edged_fast
            mm._term_fast = mm._pattern_fast = am._fast = cx._edged_fast = None
            try:
                want = ([(m.start, m.end, m.findings, m.certainty, m.rule) for m in mm.find(s, 0, len(s))],
                        [(a.kind, a.value, a.start, a.end) for a in am.find(s, 0, len(s))],
                        [(c.start, c.end, c.roles) for c in cx.cues(s, 0, len(s))])
            finally:
                mm._term_fast, mm._pattern_fast, am._fast, cx._edged_fast = saved
            assert got == want, s
    # the raw scanner against finditer, for a trie of a few phrases
    from radvqa.extract._trie import trie_regexes, word_spans

    pat, fast = trie_regexes(["left", "left lower lobe", "lobe", "no", "no acute"])
    assert fast is not None
    for s in _EDGE_TEXTS + _random_texts(["left", "lower", "lobe", "no", "acute", "leftx"], 500, 11):
        assert word_spans(pat, fast, s, 0, len(s)) == [m.span() for m in pat.finditer(s)], s
    assert trie_regexes(["left", "(see"])[1] is None  # a phrase led by punctuation: no scanner


def test_compiled_engine_modules_define_no_class_with_keywords(tmp_path):
    # benchmarks/extraction_compiled.py compiles these modules with mypyc, which builds a class
    # without its keyword arguments (a msgspec Struct's gc=False / frozen=True were lost): such
    # classes live in radvqa/extract/_structs.py. A copy without a compiled engine is refused.
    import ast
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("extraction_compiled", root / "benchmarks" / "extraction_compiled.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    for name in mod.MODULES:
        tree = ast.parse((root / "src" / "radvqa" / "extract" / f"{name}.py").read_text())
        with_kw = [c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.keywords]
        assert not with_kw, (name, with_kw)
        # a decorated class compiles as a plain Python class (mypyc makes dataclasses native ones)
        decorated = [c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                     and any(ast.unparse(d).split("(")[0] != "dataclass" for d in c.decorator_list)]
        assert not decorated, (name, decorated)
    (tmp_path / "src" / "radvqa").mkdir(parents=True)
    import pytest as _pytest

    with _pytest.raises(SystemExit, match="no compiled engine"):
        mod.main(["--build", str(tmp_path), "--reuse"])


def test_punctuation_cue_search_finds_what_the_tries_find():
    # ContextRules.cues asks one search led by the punctuation cues' first characters whether a
    # sentence holds any of them, and scans their tries only then: that search must say yes
    # exactly when one of the tries finds a match (punctuation next to words, runs of spaces)
    from radvqa.extract import get_extractor
    from radvqa.extract.context import _first_char_led

    cx = get_extractor("rules", cache_size=0).context
    assert cx._marks and cx._mark_firsts  # else the test below checks nothing
    words = ["no", "healed", "chronic", "appearing", "fracture", ",", ", ", ",  healed", "(", ")", ";", ":", "?",
             "x", "healedx", "rib", "  "]
    for t in _EDGE_TEXTS + _random_texts(words, 3000, 21) + [", healed", ",healed", ", healedx", ", chronic  appearing"]:
        want = any(rx.search(t) is not None for rx in cx._marks)
        assert (cx._marks_any.search(t) is not None) == want, t
        assert (any(ch in t for ch in cx._mark_firsts) or not want), t
    # a made-up set of phrases: several rests per first character, a phrase that is one character
    pats = [", healed", ", old", "(", "? see", "?"]
    rx = _first_char_led(pats)
    for t, want in ((", old", True), (",old", False), (", oldx", False), ("; see", False), ("a?", True),
                    ("? seen", True), ("x (y", True), (",  healed.", True), ("no", False)):
        assert (rx.search(t) is not None) == want, t


def test_alternative_connector_test_agrees_with_its_pattern():
    # RulesExtractor._has_alt answers alt_hint.search(seg) with substring tests for the marks and a
    # scan led by one non-word character for the words (ASCII sentences)
    from radvqa.extract import get_extractor

    ex = get_extractor("rules", cache_size=0)
    assert ex.alt_words_fast is not None and ex.alt_marks  # else the test below checks nothing new
    words = ["or", "versus", "vs", "vs.", "and/or", "/", "for", "orx", "xor", "normal", "vs.x", "and", "effusion",
             "  ", "-", "é", "or\n"]
    for t in _EDGE_TEXTS + _random_texts(words, 3000, 31) + ["or", "vs.", "a/b", "xvs", "vs", "é or", "éor"]:
        assert ex._has_alt(t) == (ex.alt_hint.search(t) is not None), t


def test_qualifier_and_not_a_hedge_scans_agree_with_their_patterns():
    # _qualifier and _not_a_hedge_at scan an ASCII range with the pattern led by one non-word
    # character from one position before it: the same first match as the \b-led pattern
    from radvqa.extract import get_extractor

    ex = get_extractor("rules", cache_size=0)
    assert ex.qualifier_fast is not None and ex.not_a_hedge_fast is not None
    quals = sorted(ex.qualifiers)[:12] + ["no", "large", "xlarge", "larger", "related to", "secondary to", "of",
                                          "the", "left", "-", "  ", "é", "grossly"]
    for t in _EDGE_TEXTS + _random_texts(quals, 1500, 41):
        for a in range(0, len(t), 3):
            for b in (len(t), (a + len(t)) // 2 + 1):
                m = ex.qualifier_re.search(t, a, b) if a < b else None
                want = None if m is None else (ex.qualifiers.get(m.group()) or ex.qualifiers.get(" ".join(m.group().split())))
                assert ex._qualifier(t, a, b) == want, (t, a, b)
                m = ex.not_a_hedge.search(t, a, b)
                assert ex._not_a_hedge_at(t, a, b) == (-1 if m is None else m.start()), (t, a, b)


def _boundaries_by_regex(text: str, start: int, end: int) -> list[tuple[int, int]]:
    from radvqa.extract.sentences import _BOUNDARY

    return [m.span() for m in _BOUNDARY.finditer(text, start, end)]


def test_sentence_boundaries_found_without_the_regex_are_its_matches(monkeypatch):
    # compiled, sentence_spans finds the matches of _BOUNDARY with str.find and a few character
    # reads (sentences.scan_boundaries; pure Python keeps the regex): the same matches on edge
    # texts (Unicode digits and spaces, bullets, list numbers, runs of punctuation, a range that
    # ends mid-text) and on random ones, and the same sentences as the splitter on the regex's
    # matches (the splitter's own rules, fed each boundary source in turn: no copy of them here)
    import random

    from radvqa.extract import sentences
    from radvqa.extract.sentences import scan_boundaries, sentence_spans

    pieces = list("ab .!?\n\t\u2022-*)19 :,\u00a0\u0660\u2003") + [
        "Dr. ", "a.m. ", "\n\n", "\n 1. ", "\n12) ", "\n123. ", "\n- ", "3.5 ", "etc. No", "!? ", "...", "e.g. x"]
    rng = random.Random(53)
    texts = _EDGE_TEXTS + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    cases = [(t, a, b) for t in texts for a, b in ((0, len(t)), (len(t) // 3, len(t)), (0, len(t) * 2 // 3))]
    for t, a, b in cases:
        assert scan_boundaries(t, a, b) == _boundaries_by_regex(t, a, b), (t, a, b)
    monkeypatch.setattr(sentences, "_boundaries", _boundaries_by_regex)
    by_regex = [sentence_spans(t, a, b) for t, a, b in cases]
    monkeypatch.setattr(sentences, "_boundaries", scan_boundaries)
    for (t, a, b), want in zip(cases, by_regex):
        assert sentence_spans(t, a, b) == want, (t, a, b)


def test_space_led_scanners_only_where_every_word_start_follows_a_space():
    # word_spans and the gap-pattern scan use a scanner led by a literal space when every word
    # character after a non-word character follows a space (_trie.spaced_word_starts): the same
    # matches as the one led by ASCII_NOT_WORD there, and the test is exactly that condition
    from radvqa.extract import get_extractor
    from radvqa.extract._trie import ASCII_NOT_WORD, space_led, spaced_word_starts

    ex = get_extractor("rules", cache_size=0)
    mm = ex.mentions
    assert mm._pattern_space is not None
    scanners = [mm._term_fast, mm._pattern_fast, ex.attributes._fast, ex.context._edged_fast]
    words = ["left", "effusion", "no", "heart", "size", "is", "normal", "lungs", "are", "clear", "acute",
             "cardiopulmonary", "disease", "x-ray", "well-expanded", "s/p", "(left)", "3", "mild", "pleural"]
    texts = _EDGE_TEXTS + _random_texts(words, 1500, 61) + [" ".join(words), ". ".join(words), "", " ", "a"]
    qualified = 0
    for t in texts:
        if not t.isascii():
            continue
        ok = spaced_word_starts(t)
        assert ok == (re.search(r"[^ 0-9A-Za-z_][0-9A-Za-z_]", t) is None), t
        assert spaced_word_starts(t) == ok  # (the memo of the last text)
        if not ok:
            continue
        qualified += 1
        spaced = " " + t
        for fast in scanners:
            assert fast.pattern.startswith(ASCII_NOT_WORD)
            sp = space_led(fast)
            assert [m.span() for m in sp.finditer(spaced)] == [m.span() for m in fast.finditer(spaced)], t
    assert 150 < qualified < len(texts) - 150  # both kinds of text were seen
