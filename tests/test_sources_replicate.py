"""The replicated benchmark source (radvqa.sources.replicate): base-major positions, each read part
asking the base source for only the records its positions hold, parts concatenated = one reader."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from radvqa.model import Reject, Study
from radvqa.sources import sample_inputs
from radvqa.sources.replicate import ReplicatedOpenI, record_at, span


@pytest.mark.parametrize(("m", "n"), [(7, 20), (3955, 160000), (5, 5), (10, 3), (4, 17), (1, 9)])
def test_span_and_record_at_are_inverse(m: int, n: int) -> None:
    owner = [r for r in range(m) for _ in range(span(r, m, n)[1] - span(r, m, n)[0])]
    assert len(owner) == n  # every position belongs to one record
    assert [record_at(j, m, n) for j in range(n)] == owner
    sizes = [span(r, m, n)[1] - span(r, m, n)[0] for r in range(m)]
    assert max(sizes) - min(sizes) <= 1  # the copies are shared out evenly


def _inputs(tmp: Path) -> list[Path]:
    """The sample's OpenI XMLs plus a malformed one (a rejected record) in the middle."""
    src = next(p for p in sample_inputs() if p.name == "openi")
    d = tmp / "xml"
    shutil.copytree(src, d)
    names = sorted(d.glob("*.xml"))
    (d / (names[len(names) // 2].stem + "a.xml")).write_text("<eCitation><uId id='CXRbroken'>")
    return [d]


def _ids(records: list[Study | Reject]) -> list[str]:
    return [r.id if isinstance(r, Study) else f"reject:{r.ref}" for r in records]


def test_parts_concatenated_equal_one_reader_and_parse_only_their_records(tmp_path: Path, monkeypatch) -> None:
    inputs = _inputs(tmp_path)
    src = ReplicatedOpenI(studies=53)
    whole = list(src.iter_records(inputs))
    m = src._count(inputs)
    rejects = [r for r in whole if isinstance(r, Reject)]
    assert len(rejects) == 1  # the malformed report, once, though its record holds several positions
    studies = [r for r in whole if isinstance(r, Study)]
    # its other positions are empty: the studies miss one record's copies but the first
    assert 53 - len(studies) + 1 in {53 // m, 53 // m + 1}
    # base-major: a record's copies side by side, copy 0 with the original ids
    first = studies[0].id
    assert [s.id for s in studies[: span(0, m, 53)[1]]] == [first] + [f"{first}~r{k}" for k in range(1, span(0, m, 53)[1])]
    assert len({s.id for s in studies}) == len(studies)

    parsed: list[int] = []
    real_parse = type(src._base_source())._parse

    def counting_parse(self, *a, **kw):  # type: ignore[no-untyped-def]
        parsed.append(1)
        return real_parse(self, *a, **kw)

    monkeypatch.setattr(type(src._base_source()), "_parse", counting_parse)
    parts = src.plan_parts(inputs, 5)
    got: list[Study | Reject] = []
    for p in parts:
        before = len(parsed)
        got += list(src.iter_part(inputs, p))
        # a part parses the records its positions hold (and no other)
        want = record_at(p["hi"] - 1, m, 53) - record_at(p["lo"], m, 53) + 1
        assert len(parsed) - before == want
    assert _ids(got) == _ids(whole)
