"""NIH-14 report labels on the OpenI MeSH convention (#12, h12n): label-mapping fixes and
extractor fixes found in the R2Gen train+val disagreements, each on the real report sentence
(report id and split in the test name's comment), and the benchmark's "No Indexing" line."""

from __future__ import annotations

import csv
import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

from nih14_fixtures import commit, keep, labeler, onto  # noqa: F401 (pytest fixtures)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "extract"


def _obs(ex, text):
    return {(o.finding, o.certainty) for o in ex.extract(text, "t").observations}


def _labels(ex, labeler, text):
    return labeler.label(ex.extract(text, "t"))


# --- label mapping (labeling.yaml), the OpenI gold's MeSH headings ---------------------------

def test_pericardial_effusion_is_an_effusion(keep, commit, labeler):
    # CXR3214 (train), MeSH "Pericardial Effusion/large": gold Effusion 1
    text = "IMPRESSION: Large pericardial effusion."
    assert ("pericardial_effusion", "present") in _obs(keep, text)
    assert _labels(keep, labeler, text)["Effusion"] == 1
    # CXR1666 (val): "cardiomegaly versus pericardial effusion" is an alternative: uncertain by
    # default, present under hedges="commit" (the MeSH convention)
    text = "IMPRESSION: 2. Mildly enlarged cardiac silhouette; cardiomegaly versus pericardial effusion."
    assert _labels(keep, labeler, text)["Effusion"] == -1
    assert _labels(commit, labeler, text)["Effusion"] == 1


def test_mass_at_any_site_is_a_mass(keep, labeler):
    # CXR2968 (train), MeSH "Mass/right/paratracheal"
    lab = _labels(keep, labeler, "IMPRESSION: Right paratracheal mass, possibly lymphadenopathy.")
    assert lab["Mass"] == 1
    # CXR3324 (train), MeSH "Mass/breast/large", "Mass/thorax/right"
    lab = _labels(keep, labeler, "IMPRESSION: Redemonstration of right chest wall mass compatible with "
                                 "patient's known breast carcinoma.")
    assert lab["Mass"] == 1


def test_goiter_is_not_a_mass(keep, labeler):
    # CXR3685 (train), MeSH "Shift/trachea/right/mild", no "Mass": a goiter descends from
    # mediastinal mass in the ontology but is MeSH "Goiter"
    text = ("FINDINGS: Mild rightward deviation of the trachea, unchanged from comparison XXXX, XXXX secondary to a "
            "goiter.")
    assert ("goiter", "present") in _obs(keep, text)
    assert _labels(keep, labeler, text)["Mass"] is None


def test_also_counted_does_not_touch_the_scheme_map(onto):
    # sources map an NIH "Effusion" label to findings through the scheme: never a pericardial one
    assert set(onto.schemes["nih14"].labels["Effusion"]) == {"pleural_effusion"}
    assert set(onto.schemes["nih14"].labels["Mass"]) == {"mass"}


def test_pleural_plaque_is_not_pleural_thickening(keep, labeler):
    # CXR3337 (train), MeSH "Calcinosis/pleura/base/right" only: gold Pleural_Thickening 0
    text = ("FINDINGS: Chest. Lungs are clear and expanded. Heart size normal. A calcified pleural plaque in the "
            "right subpulmonic area has not XXXX since the abdomen CT.")
    assert ("pleural_plaque", "present") in _obs(keep, text)
    assert _labels(keep, labeler, text)["Pleural_Thickening"] is None


@pytest.mark.parametrize("text, finding", [
    # CXR2307 (train), MeSH "Cicatrix/pleura"
    ("FINDINGS: The lungs are hyperinflated with XXXX XXXX opacities compatible with pleural-parenchymal scarring.",
     "pleural_scarring"),
    # CXR2569 (train), MeSH "Cicatrix/pleura/apex/bilateral"
    ("FINDINGS: Bilateral apical pleural scarring is present.", "apical_pleural_scarring"),
    # CXR3697 (train), MeSH "Cicatrix/pleura/apex/left"
    ("FINDINGS: There is left apical pleural-parenchymal scarring.", "apical_pleural_scarring"),
])
def test_pleural_scarring_is_its_own_finding_and_not_pleural_thickening(keep, labeler, onto, text, finding):
    assert (finding, "present") in _obs(keep, text)
    # still a kind of pleural thickening in the ontology (CheXpert "Pleural Other" and the
    # observation gold match it to pleural thickening)
    assert "pleural_thickening" in onto.ancestors(finding)
    assert _labels(keep, labeler, text)["Pleural_Thickening"] is None


def test_pleural_thickening_and_capping_count(keep, labeler):
    # CXR3632 (train), MeSH "Thickening/pleura/apex/bilateral": gold Pleural_Thickening 1
    text = "FINDINGS: No pneumothorax. Stable bilateral apical pleural capping."
    assert ("apical_pleural_thickening", "present") in _obs(keep, text)
    assert _labels(keep, labeler, text)["Pleural_Thickening"] == 1
    # CXR2722 (train), MeSH "Thickening/pleura/left"
    text = "IMPRESSION: 2. Pleural thickening along the inferior left lateral chest wall stable since the prior examination."
    assert _labels(keep, labeler, text)["Pleural_Thickening"] == 1


def test_openi_mesh_pleural_scar_code_maps_to_pleural_scarring(onto):
    assert set(onto.map_code("openi_mesh", "Cicatrix/pleura/apex/bilateral")) == {"pleural_scarring"}


# --- vocabulary: what the sentence names --------------------------------------------------------

@pytest.mark.parametrize("text", [
    # CXR3137 (train), MeSH "Calcinosis/lung/lingula", "Density/lung/lingula": gold Nodule 0
    "FINDINGS: There is a calcified density in the left mid lung, most XXXX a calcified granuloma.",
    # CXR323 (train), MeSH "Calcinosis/lung/right", "Density/lung/right": gold Nodule 0
    "FINDINGS: Right lung calcified densities are unchanged from prior and indicate old granulomatous disease.",
])
def test_calcified_density_is_a_calcification_not_a_nodule(keep, labeler, text):
    obs = _obs(keep, text)
    assert ("calcification", "present") in obs
    assert not any(f in ("calcified_nodule", "nodule") for f, _ in obs)
    assert _labels(keep, labeler, text)["Nodule"] is None


def test_calcified_nodule_is_still_a_nodule(keep, labeler):
    # CXR2978 (train), MeSH "Nodule/lung/lower lobe/right/multiple/small": gold Nodule 1
    text = ("FINDINGS: There are small calcified nodules in the superior segment of the right lower lobe, XXXX old "
            "granulomatous infection.")
    assert ("calcified_nodule", "present") in _obs(keep, text)
    assert _labels(keep, labeler, text)["Nodule"] == 1


def test_sclerotic_density_is_bone_not_lung_opacity(keep):
    # CXR793 (train): a density over the glenoid, no lung opacity
    obs = _obs(keep, "FINDINGS: Oval sclerotic density projecting over the inferior right glenoid may represent "
                     "synovial osteochondromatosis or cortical XXXX XXXX.")
    assert ("sclerotic_bone_lesion", "present") in obs
    assert not any(f == "lung_opacity" for f, _ in obs)


# --- certainty ------------------------------------------------------------------------------------

def test_but_not_entirely_excluded_hedges_what_it_follows(keep, labeler):
    # CXR1991 (val): the XXXX mask ate "likely"; "but" no longer cuts the hedge off
    text = "IMPRESSION: 1. Infiltrate is XXXX less XXXX but not entirely excluded."
    assert _obs(keep, text) == {("infiltration", "uncertain")}
    # a "but" that opens another statement still ends the scope
    obs = _obs(keep, "IMPRESSION: Small right pleural effusion but no pneumothorax.")
    assert ("pleural_effusion", "present") in obs and ("pneumothorax", "absent") in obs


@pytest.mark.parametrize("text, finding, label", [
    # CXR2532 (train), MeSH "Pulmonary Edema": gold Edema 1
    ("IMPRESSION: 2. Abnormal pulmonary opacities most suggestive of pulmonary edema, differential diagnosis "
     "includes infectious and inflammatory processes.", "pulmonary_edema", "Edema"),
    # CXR677 (train), MeSH "Pneumonia": gold Pneumonia 1
    ("IMPRESSION: In view of the history findings are strongly suggestive of XXXX acute pneumonia with "
     "right-sided pleural effusion.",
     "pneumonia", "Pneumonia"),
])
def test_most_suggestive_of_commits_only_under_hedges_commit(keep, commit, labeler, text, finding, label):
    # the default keeps the hedge (a scene graph states no diagnosis the report ranks)
    assert (finding, "uncertain") in _obs(keep, text)
    assert _labels(keep, labeler, text)[label] == -1
    # hedges="commit" counts it as the MeSH indexers did, like "most likely"
    assert (finding, "present") in _obs(commit, text)
    assert _labels(commit, labeler, text)[label] == 1


# --- benchmark: the "No Indexing" reports ---------------------------------------------------------

def _bench():
    spec = importlib.util.spec_from_file_location("bench_extraction", ROOT / "benchmarks" / "extraction.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_benchmark_prints_indexed_figures_beside_the_full_ones(tmp_path):
    # the 200 unmodified train XMLs of tests/data/extract hold 5 "No Indexing" reports, whose gold
    # rows are all zero (not even normal)
    data = tmp_path / "iu"
    data.mkdir()
    with tarfile.open(data / "NLMCXR_reports.tgz", "w:gz") as tf:
        for p in sorted((DATA / "openi").glob("*.xml")):
            tf.add(p, arcname=f"ecgen-radiology/{p.name}")
    with (DATA / "openi_gold_nih14_subset.csv").open(newline="") as fh:
        gold = {r["filename"]: r for r in csv.DictReader(fh)}
    (data / "openi_gold_nih14.csv").write_text((DATA / "openi_gold_nih14_subset.csv").read_text())
    # these 200 are R2Gen train reports (tests/data/extract/README.md)
    (data / "r2gen_split.csv").write_text("report_id,study_image_prefix,split\n"
                                          + "".join(f"{rid},,train\n" for rid in gold))
    bench = _bench()
    mesh = bench.mesh_major(data / "NLMCXR_reports.tgz")
    no_index = sorted(rid for rid, codes in mesh.items() if "No Indexing" in codes)
    assert no_index == ["CXR125", "CXR151", "CXR179", "CXR280", "CXR312"]
    assert all(v == "0" for rid in no_index for k, v in gold[rid].items() if k != "filename")

    import contextlib
    import io
    out = io.StringIO()
    errors = tmp_path / "err.jsonl"
    with contextlib.redirect_stdout(out):
        rc = bench.main(["--data", str(data), "--gold", "none", "--speed-rounds", "1", "--errors", str(errors),
                         "--json", str(tmp_path / "r.json")])
    assert rc == 0
    text = out.getvalue()
    lines = text.splitlines()
    # every full line stays, and an indexed line follows with the count it left out
    full = [ln for ln in lines if ln.startswith("train+val ")]
    indexed = [ln for ln in lines if ln.strip().startswith("train+val, indexed")]
    assert len(full) == 4 and len(indexed) == 4
    assert all("195" in ln.split()[2] and "without the 5 'No Indexing' reports" in ln for ln in indexed)
    res = json.loads((tmp_path / "r.json").read_text())
    full_s = res["NIH 13 + normal"]["train+val"]
    idx_s = res["NIH 13 + normal"]["train+val, indexed"]
    assert full_s["n"] == 200 and idx_s["n"] == 195
    # the left-out reports only ever add false positives ("normal" where the gold has nothing)
    assert idx_s["tp"] == full_s["tp"] and idx_s["fn"] == full_s["fn"] and idx_s["fp"] <= full_s["fp"]
    rows = [json.loads(ln) for ln in errors.read_text().splitlines()]
    assert rows and all("mesh" in r for r in rows)
    assert all(len(v) == 3 for r in rows for v in r["diff"].values())  # gold, default, commit
