"""Splits: official where given, else deterministic patient-level; leakage fails loudly."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import box_sg, cxr_report_sg, mini_ontology  # noqa: E402

from radvqa.generate import GenerateOptions, Generator  # noqa: E402
from radvqa.splits import LeakageError, assign_split, check_leakage, normalize_split  # noqa: E402


def test_assign_split_deterministic_and_proportional():
    got = [assign_split(f"p{i}", seed=0) for i in range(5000)]
    assert got == [assign_split(f"p{i}", seed=0) for i in range(5000)]
    c = Counter(got)
    assert abs(c["train"] / 5000 - 0.8) < 0.03 and abs(c["test"] / 5000 - 0.1) < 0.02
    assert got != [assign_split(f"p{i}", seed=1) for i in range(5000)]
    assert Counter(assign_split(f"p{i}", 0, (0.5, 0, 0.5)) for i in range(1000))["validation"] == 0
    with pytest.raises(ValueError):
        assign_split("p", 0, (1.0, -1.0, 0.0))


def test_normalize_split_names():
    assert normalize_split("validate") == "validation" and normalize_split("VAL") == "validation"
    assert normalize_split("Train") == "train" and normalize_split("holdout") == "holdout"


def test_check_leakage():
    check_leakage([("p1", ["a"], "train"), ("p1", ["b"], "train"), ("p2", ["c"], "test")])
    with pytest.raises(LeakageError, match="1 patient"):
        check_leakage([("p1", ["a"], "train"), ("p1", ["b"], "test")])
    with pytest.raises(LeakageError, match="image"):
        check_leakage([("p1", ["a"], "train"), ("p2", ["a"], "test")])


def test_generated_rows_have_no_patient_across_splits():
    g = Generator(mini_ontology(), GenerateOptions(strategies=("qba", "vindr", "diff")))
    rows = []
    for p in range(40):
        prev = None
        for k in range(3):
            sg = box_sg(study_id=f"nih-cxr14:{p}_{k}", patient=f"nih-cxr14:{p}", time=str(k))
            rows += g.generate(sg, prev)
            prev = sg
        rows += g.generate(cxr_report_sg(study_id=f"openi:{p}", patient=f"openi:{p}"))
    check_leakage((r.patient_id, r.image_ids, r.split) for r in rows)
    assert {r.split for r in rows} >= {"train", "test"}


def test_official_split_wins():
    g = Generator(mini_ontology(), GenerateOptions(strategies=("qba",)))
    sg = msgspec.structs.replace(cxr_report_sg(), split="validate")
    assert {r.split for r in g.generate(sg)} == {"validation"}
