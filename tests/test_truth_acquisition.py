"""An OpenI report whose XML lists no images gets no acquisition lead counting them.

"How was this study acquired?" was answered "This radiograph study has 0 images; the views are not
recorded. Lordotic positioning is seen." for an outside-pool report whose XML lists no image
(readers of sessions 11-12, seeds 83, 98 and 113, marked it: the study has images, the record just
does not list them). No train + val report has the case; these reports are hand-written."""

from __future__ import annotations

from pathlib import Path

from openi_truth import build_rows, rows_of, write_reports


def test_no_image_records_no_count(tmp_path: Path) -> None:
    data = write_reports(tmp_path / "in", {
        1: ("Apical lordotic positioning. The heart is normal in size. The lungs are clear.", "No acute disease."),
        2: ("The heart is normal in size. The lungs are clear.", "Normal chest."),
    })
    rows = build_rows(data, tmp_path / "out")
    acq = [r for r in rows_of(rows, 1) if r["question_type"] == "B14_describe_acquisition"]
    assert acq, "the technique is still asked about"
    for r in acq:
        assert "image" not in r["answer"] and "not recorded" not in r["answer"], r["answer"]
        assert "lordotic positioning" in r["answer"].lower(), r["answer"]
    # nothing known about the acquisition: no question at all
    assert not [r for r in rows_of(rows, 2) if r["question_type"] == "B14_describe_acquisition"]
