"""base.read_csv_rows_split (REFLACX's metadata reader: plain lines split on commas, the rest parsed
by csv) yields exactly read_csv_rows's rows and reject lines, on random tables mixing plain rows,
quoted fields (with commas, doubled quotes and line ends inside), stray CR and NUL characters,
blank lines, CRLF/LF/CR line ends, a byte-order mark, bytes that are not UTF-8 and gzip."""

from __future__ import annotations

import gzip

from hypothesis import given, settings
from hypothesis import strategies as st

from radvqa.sources.base import read_csv_rows, read_csv_rows_split

CELL = st.one_of(
    st.sampled_from(["", "0", "3", "True", "False", "a b", " x ", "é", "1.5", "P300R000001"]),
    st.sampled_from(['"quoted, comma"', '"two\r\nlines"', '"a ""b"" c"', '"open', 'mid"quote', '"', '""']),
    st.sampled_from(["a\rb", "nul\x00", "tab\tx", "\u2028sep"]),
    st.text(max_size=6),
)
ROW = st.lists(CELL, min_size=0, max_size=5).map(",".join)
END = st.sampled_from(["\r\n", "\n", "\r\n", "\r", ""])


@settings(max_examples=150, derandomize=True, deadline=None, database=None)
@given(rows=st.lists(st.tuples(ROW, END), max_size=8), bom=st.booleans(), bad=st.sampled_from([b"", b"\xff\xfe,1\r\n"]),
       gz=st.booleans())
def test_split_reader_matches_csv_reader(tmp_path_factory, rows, bom, bad, gz):
    data = ("\ufeff" if bom else "") + "id,x,y\r\n" + "".join(r + e for r, e in rows)
    raw = data.encode("utf-8", "surrogatepass") + bad
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_bytes(gzip.compress(raw) if gz else raw)
    assert list(read_csv_rows_split(path)) == list(read_csv_rows(path))


def test_split_reader_reads_quoted_records_over_lines(tmp_path):
    p = tmp_path / "m.csv"
    p.write_bytes(b'id,Other,x\r\nP1,"a, b\r\nc",1\r\nP2,,2\r\nP3,"never closed,3\r\n')
    got = list(read_csv_rows_split(p))
    assert got[:3] == [(1, ["id", "Other", "x"], None), (3, ["P1", "a, b\r\nc", "1"], None), (4, ["P2", "", "2"], None)]
    assert got[3][1] is None and "malformed CSV" in got[3][2]
    assert got == list(read_csv_rows(p))
