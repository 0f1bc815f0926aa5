"""Shared by the issue-13 truth tests (test_truth_*.py): the real OpenI report XMLs they keep in
tests/data/openi_issue13*, read as the openi source joins them, and the rows a build of those
XMLs writes (with `radvqa audit` required to pass on it)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.extract.inputs import openi_text
from radvqa.model import Image, Indication, Observation, Report, SceneGraph, Sentence


# the question types about one region / one subcategory (what the truth tests select rows by)
REGION = ("C01_describe_region", "C02_describe_abnormal_region", "C03_is_abnormal_region", "C04_is_normal_region")
SUBCAT = ("B08_describe_subcat", "B09_describe_abnormal_subcat", "B10_is_abnormal_subcat", "B11_is_normal_subcat")


def report_text(path: Path) -> str:
    """The report text as the openi source joins it ("FINDINGS: ...\\nIMPRESSION: ...")."""
    return openi_text(path.read_bytes())[1]


def observations_of(ex, path: Path, finding: str) -> list:
    """The observations of one finding that extractor `ex` reads in the report at `path`."""
    e = ex.extract(report_text(path))
    assert e.error is None
    return [o for o in e.observations if o.finding == finding]


def findings_in(ex, text: str) -> list:
    """The observations extractor `ex` reads in `text`, given as a FINDINGS section (the truth
    tests' hand-written sentences)."""
    e = ex.extract("FINDINGS: " + text)
    assert e.error is None
    return e.observations


def build_rows(data: Path, out: Path, unvouched: str = "keep", extra: tuple[str, ...] = (),
               incomplete_lists: str = "grade") -> list[dict]:
    """Every QA row of `radvqa build openi --input DATA`; every must-be-zero audit count stays 0.
    The earlier rounds' tests check how a construction is read and said, so they build with
    ``--unvouched keep`` (the rows as before round 10, only grades differ); round 10's default
    (omit) is tested in test_truth_unvouched.py. Likewise ``--incomplete-lists grade``: those tests
    read what lists say and how they are graded, and since session 15 a list graded incomplete is
    withheld by default (tested in test_truth_session15.py). ``extra``: more build options
    ("--cap-scale", "40")."""
    res = CliRunner().invoke(app, ["build", "openi", "--input", str(data), "--out", str(out), "-q",
                                   "--unvouched", unvouched, "--incomplete-lists", incomplete_lists, *extra])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["audit", str(out)])
    assert res.exit_code == 0, res.output
    return [r for f in sorted((out / "qa").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def write_reports(folder: Path, reports: dict[int, tuple[str, ...]],
                  labels: tuple[str, ...] = ("FINDINGS", "IMPRESSION"), copies: Path | None = None) -> Path:
    """Hand-written OpenI XMLs ``CXR<n>.xml`` in ``folder``: each report's texts under ``labels``
    (the truth tests' own sentences, not copies of real reports), beside every XML of ``copies``
    (a test data folder of real reports)."""
    from xml.sax.saxutils import escape

    folder.mkdir(parents=True, exist_ok=True)
    for n, texts in reports.items():
        assert len(texts) == len(labels), (n, labels)
        body = "".join(f'<AbstractText Label="{lab}">{escape(txt)}</AbstractText>\n' for lab, txt in zip(labels, texts))
        (folder / f"{n}.xml").write_text(
            f'<?xml version="1.0" encoding="utf-8"?>\n<eCitation><uId id="CXR{n}"/><MedlineCitation><Article>'
            f"<Abstract>\n{body}</Abstract></Article></MedlineCitation></eCitation>\n", encoding="utf-8")
    if copies is not None:
        for f in sorted(copies.glob("*.xml")):
            (folder / f.name).write_bytes(f.read_bytes())
    return folder


WITH_INDICATION = ("INDICATION", "FINDINGS", "IMPRESSION")


def rows_of(rows: list[dict], n: int) -> list[dict]:
    """The rows of report CXR<n> (there must be some)."""
    got = [r for r in rows if r["study_id"] == f"openi:CXR{n}"]
    assert got, n
    return got


def scene_graph(obs: list[Observation], sentences: list[str], indication: Indication | None = None,
                study_id: str = "openi:T1", patient_id: str = "openi:p1") -> SceneGraph:
    """A one-image OpenI scene graph whose FINDINGS are ``sentences`` (ids S01, S02, ...)."""
    sents, pos = [], 0
    for i, t in enumerate(sentences):
        sents.append(Sentence(id=f"S{i + 1:02d}", section="FINDINGS", start=pos, end=pos + len(t), text=t))
        pos += len(t) + 1
    return SceneGraph(study_id=study_id, patient_id=patient_id, source="openi",
                      images=[Image(id="i1", path="i1.png", width=100, height=100, view="PA")],
                      report=Report(text=" ".join(sentences), sentences=sents), observations=obs,
                      indication=indication)
