"""Ontology: load + integrity, scheme maps, hierarchy queries, broken copies, CLI."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.ontology import DATA_DIR, Ontology, OntologyError, check_ontology, load_ontology

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

NIH14 = ["Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia", "Pneumothorax",
         "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia"]
CHEXPERT14 = ["No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
              "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other",
              "Fracture", "Support Devices"]
VINDR_LOCAL = ["Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly", "Clavicle fracture",
               "Consolidation", "Edema", "Emphysema", "Enlarged PA", "ILD", "Infiltration", "Lung cavity",
               "Lung cyst", "Lung Opacity", "Mediastinal shift", "Nodule/Mass", "Other lesion", "Pleural effusion",
               "Pleural thickening", "Pneumothorax", "Pulmonary fibrosis", "Rib fracture"]
VINDR_GLOBAL = ["Lung tumor", "Pneumonia", "Tuberculosis", "Other diseases", "COPD", "No finding"]
IMAGENOME_29 = ["right lung", "right upper lung zone", "right mid lung zone", "right lower lung zone",
                "right hilar structures", "right apical zone", "right costophrenic angle", "right hemidiaphragm",
                "left lung", "left upper lung zone", "left mid lung zone", "left lower lung zone",
                "left hilar structures", "left apical zone", "left costophrenic angle", "left hemidiaphragm",
                "trachea", "spine", "right clavicle", "left clavicle", "aortic arch", "mediastinum",
                "upper mediastinum", "svc", "cardiac silhouette", "cavoatrial junction", "right atrium", "carina",
                "abdomen"]


@pytest.fixture(scope="module")
def onto() -> Ontology:
    return load_ontology()


# ---- load + integrity -------------------------------------------------------------------------

def test_package_data_loads_and_passes_every_check(onto: Ontology) -> None:
    _, checks = check_ontology()
    assert checks and all(c.passed for c in checks), [e for c in checks for e in c.errors]
    assert onto.version == "1.0.0"
    assert load_ontology() is onto  # cached


def test_every_yaml_file_has_a_version() -> None:
    for p in sorted(DATA_DIR.glob("*.yaml")):
        doc = yaml.load(p.read_text(), Loader=_Loader)
        assert isinstance(doc.get("version"), str), p.name


def test_ids_are_snake_case_and_fields_typed(onto: Ontology) -> None:
    for fid, f in onto.findings.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", fid) and f.id == fid
        assert f.name and f.category in onto.categories
        assert all(r in onto.regions for r in f.default_regions)
        assert all(s in onto.modifiers.severity_order for s in f.severities)
    for rid, r in onto.regions.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", rid) and r.id == rid


def test_imagenome_29_regions_present_and_boxable(onto: Ontology) -> None:
    names = {r.imagenome_name: r for r in onto.regions.values() if r.imagenome_name}
    assert sorted(names) == sorted(IMAGENOME_29)
    assert all(r.boxable for r in names.values())
    assert onto.region_by_imagenome_name("Right Hilar Structures").id == "right_hilum"
    assert onto.region_by_imagenome_name("abdomen").id == "upper_abdomen"
    assert onto.region_by_imagenome_name("left cardiac silhouette") is None


def test_required_regions_exist(onto: Ontology) -> None:
    for rid in ["lungs", "right_lung", "left_lung", "right_upper_lobe", "right_middle_lobe", "right_lower_lobe",
                "left_upper_lobe", "lingula", "left_lower_lobe", "lung_bases", "lung_apices", "hila", "pleura",
                "costophrenic_angles", "diaphragm", "mediastinum", "cardiac_silhouette", "aorta", "trachea", "ribs",
                "clavicles", "spine", "shoulders", "upper_abdomen"]:
        assert rid in onto.regions, rid


def test_finding_coverage(onto: Ontology) -> None:
    assert len(onto.findings) >= 120
    cats = {f.category for f in onto.findings.values()}
    assert {"ANATOMICAL_FINDING", "DISEASE", "DEVICE", "TECHNICAL"} <= cats
    for fid in ["calcified_granuloma", "scoliosis", "hiatal_hernia", "degenerative_spine", "aortic_atherosclerosis",
                "surgical_clips", "sternotomy", "catheter", "line", "tube", "pacemaker"]:
        assert fid in onto.findings, fid


# ---- schemes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme,labels", [("nih14", NIH14 + ["No Finding"]), ("chexpert14", CHEXPERT14),
                                           ("vindr", VINDR_LOCAL + VINDR_GLOBAL)])
def test_scheme_has_every_documented_label(onto: Ontology, scheme: str, labels: list[str]) -> None:
    for label in labels:
        ids = onto.map_label(scheme, label)
        assert all(i in onto.findings for i in ids)
        assert ids or label.lower() in ("no finding", "normal"), (scheme, label)


def test_every_label_of_every_scheme_maps(onto: Ontology) -> None:
    assert {"nih14", "chexpert14", "vindr", "padchest", "radimagenet", "openi_mesh", "imagenome"} <= set(onto.schemes)
    for name, scheme in onto.schemes.items():
        for label, ids in scheme.labels.items():
            assert isinstance(ids, tuple)
            assert all(i in onto.findings for i in ids), (name, label)
            assert onto.map_label(name, label) == list(ids)


def test_vindr_groups_are_22_plus_6(onto: Ontology) -> None:
    groups = onto.schemes["vindr"].groups
    assert len(groups["local"]) == 22 and len(groups["global"]) == 6
    assert sorted(groups["local"]) == sorted(VINDR_LOCAL)


def test_map_label_examples_and_errors(onto: Ontology) -> None:
    assert onto.map_label("nih14", "Effusion") == ["pleural_effusion"]
    assert onto.map_label("nih14", "Infiltrate") == ["infiltration"]  # BBox_List spelling
    assert onto.map_label("nih14", "No Finding") == []
    assert onto.map_label("vindr", "Nodule/Mass") == ["nodule_or_mass"]
    with pytest.raises(KeyError, match="label 'Effusionz' is not in scheme 'nih14'"):
        onto.map_label("nih14", "Effusionz")
    with pytest.raises(KeyError, match="unknown label scheme 'nope'"):
        onto.map_label("nope", "Effusion")


PADCHEST_FREQUENT = ["normal", "pleural effusion", "pneumonia", "chronic changes", "cardiomegaly", "aortic elongation",
                     "scoliosis", "COPD signs", "apical pleural thickening", "NSG tube", "vertebral degenerative changes",
                     "interstitial pattern", "laminar atelectasis", "kyphosis", "infiltrates", "costophrenic angle blunting",
                     "alveolar pattern", "aortic atheromatosis", "hilar enlargement", "callus rib fracture", "nodule",
                     "pleural thickening", "air trapping", "hiatal hernia", "endotracheal tube", "sternotomy",
                     "suture material", "pacemaker", "central venous catheter via jugular vein", "bronchiectasis",
                     "goiter", "heart insufficiency", "emphysema", "fibrotic band", "calcified granuloma",
                     "hemidiaphragm elevation", "consolidation", "atelectasis", "pseudonodule", "vascular hilar enlargement"]


def test_padchest_scheme(onto: Ontology) -> None:
    s = onto.schemes["padchest"]
    assert len(s.labels) >= 30
    for label in PADCHEST_FREQUENT:
        assert label in s.labels, label
    assert onto.map_label("padchest", "COPD signs") == ["copd"]
    assert onto.map_label("padchest", "copd signs") == ["copd"]  # case-insensitive scheme
    assert onto.map_label("padchest", "NSG tube") == ["enteric_tube"]
    assert onto.map_label("padchest", "normal") == [] and onto.is_normal_label("padchest", "normal")
    assert onto.map_label("padchest", "unchanged") == [] and not onto.is_normal_label("padchest", "unchanged")
    assert "unchanged" in s.ignored_labels


def test_radimagenet_scheme_and_anatomies(onto: Ontology) -> None:
    s = onto.schemes["radimagenet"]
    assert {"knee", "brain", "spine", "shoulder", "hip", "ankle_foot", "abdomen_pelvis", "lung"} <= set(onto.anatomies)
    assert len(s.labels) >= 100
    for label, anat in s.label_anatomies.items():
        assert label.startswith(anat + "/")
        for fid in s.labels[label]:
            assert anat in onto.findings[fid].anatomies, (label, fid)  # distractors come from the same anatomy
    assert set(s.label_anatomies) == set(s.labels)
    knee = {f.id for f in onto.pathologies_of_anatomy("knee")}
    assert {"acl_pathology", "meniscal_abnormality", "fracture"} <= knee and "acute_infarct" not in knee
    assert onto.findings["acl_pathology"].category == "RADIMAGENET_PATHOLOGY"
    # the same folder name means different things in different anatomies
    assert onto.map_code("radimagenet", "MR/knee/intra") == ["intra_articular_pathology"]
    assert onto.map_code("radimagenet", "MR/brain/intra") == ["intra_axial_lesion"]
    # release quirks: anatomy folder spellings, case, trailing underscores, VQA location strings
    assert onto.map_code("radimagenet", "MR/af/achilles_pathology_") == ["achilles_pathology"]
    assert onto.map_code("radimagenet", ("ankle foot", "Plantar_plate_tear")) == ["plantar_plate_tear"]
    assert onto.map_code("radimagenet", "CT/abd/normal") == []
    assert onto.map_code("radimagenet", "CT/lung/airspace_opacity") == ["lung_opacity"]
    assert onto.map_label("radimagenet", "af/achilles_pathology_") == ["achilles_pathology"]  # codes accepted too
    assert onto.map_label("openi_mesh", "Lung/hypoinflation/mild") == ["low_lung_volumes"]
    with pytest.raises(KeyError, match="does not map in scheme 'radimagenet'"):
        onto.map_code("radimagenet", "MR/knee/acute_infarct")


IMAGENOME_DISEASE = ["pneumonia", "fluid overload/heart failure", "copd/emphysema", "granulomatous disease",
                     "interstitial lung disease", "goiter", "lung cancer", "aspiration", "alveolar hemorrhage",
                     "pericardial effusion"]
IMAGENOME_TUBES = ["chest tube", "mediastinal drain", "pigtail catheter", "endotracheal tube", "tracheostomy tube",
                   "picc", "ij line", "chest port", "subclavian line", "swan-ganz catheter", "intra-aortic balloon pump",
                   "enteric tube"]


def test_imagenome_attributes_map_and_agree_with_imagenome_names(onto: Ontology) -> None:
    s = onto.schemes["imagenome"]
    assert len(s.groups["anatomicalfinding"]) == 43 and len(s.groups["technicalassessment"]) == 5
    assert s.groups["disease"] == tuple(IMAGENOME_DISEASE) and s.groups["tubesandlines"] == tuple(IMAGENOME_TUBES)
    for label in IMAGENOME_DISEASE + IMAGENOME_TUBES:
        assert onto.map_label("imagenome", label)
    assert onto.map_label("imagenome", "cardiac pacer and wires") == ["pacemaker"]
    named = {f.imagenome_name: f.id for f in onto.findings.values() if f.imagenome_name}
    assert len(named) >= 60
    for name, fid in named.items():
        assert fid in onto.map_label("imagenome", name), name
    # the main chest categories are all there, beyond the >= 120 total
    chest = [f for f in onto.findings.values() if f.category != "RADIMAGENET_PATHOLOGY"]
    assert len(chest) >= 120


OPENI_EXPECTED = {
    "normal": [],
    "Technical Quality of Image Unsatisfactory ": ["technical_limitation"],
    "Diaphragm/left/elevated": ["elevated_hemidiaphragm"],
    "Lung/hypoinflation": ["low_lung_volumes"],
    "Opacity/lung/base": ["lung_opacity"],
    "Calcinosis/aorta": ["aortic_atherosclerosis"],
    "Calcinosis/lung/hilum/lymph nodes/right": ["calcified_lymph_nodes"],  # most specific qualifier wins
    "Lung/hilum/lymph nodes/bilateral/enlarged": ["lymphadenopathy"],
    "Implanted Medical Device/aortic valve": ["prosthetic_valve"],
    "Subcutaneous  Emphysema/right": ["subcutaneous_emphysema"],
    "Hemopneumothorax/right/moderate": ["hydropneumothorax"],
    "Deformity/clavicle/left": ["clavicle_fracture"],
}


def test_openi_mesh_codes_of_real_reports_map(onto: Ontology) -> None:
    sample = Path(__file__).parent / "data" / "ontology" / "openi"
    codes = [c for p in sorted(sample.glob("*.xml")) for c in re.findall(r"<major>(.*?)</major>", p.read_text())]
    assert len(codes) >= 25
    for code in codes:
        if code.strip() == "No Indexing":
            with pytest.raises(KeyError):
                onto.map_code("openi_mesh", code)
            continue
        ids = onto.map_code("openi_mesh", code)
        assert all(i in onto.findings for i in ids)
        if code in OPENI_EXPECTED:
            assert ids == OPENI_EXPECTED[code], code
    assert set(OPENI_EXPECTED) <= set(codes)


def test_openi_coverage_counts(onto: Ontology) -> None:
    from radvqa.ontology.coverage import openi_mesh_coverage

    cov = openi_mesh_coverage(onto, Path(__file__).parent / "data" / "ontology" / "openi")
    assert cov.reports == 7
    assert cov.codes == 30 and cov.codes_mapped == 30  # "No Indexing" is not counted as a code
    assert cov.reports_fully_mapped == 7


# ---- hierarchy and lookup ---------------------------------------------------------------------

def test_finding_hierarchy(onto: Ontology) -> None:
    anc = onto.ancestors("consolidation")
    assert anc[0] == "lung_opacity"
    for child in ["consolidation", "atelectasis", "infiltration", "pulmonary_edema", "lung_lesion"]:
        assert "lung_opacity" in onto.ancestors(child), child
        assert child in onto.descendants("lung_opacity")
    assert onto.ancestors("calcified_granuloma")[:2] == ["granuloma", "calcified_nodule"]
    assert "lung_lesion" in onto.ancestors("calcified_granuloma")
    assert "support_device" in onto.ancestors("picc")
    assert onto.is_a("tension_pneumothorax", "pleural_abnormality")
    assert not onto.is_a("pleural_effusion", "lung_opacity")
    assert onto.ancestors("lung_opacity") == []
    with pytest.raises(KeyError, match="unknown finding id 'nope'"):
        onto.ancestors("nope")


def test_region_hierarchy_and_counterparts(onto: Ontology) -> None:
    anc = onto.region_ancestors("right_costophrenic_angle")
    assert {"costophrenic_angles", "right_lung", "lungs", "chest", "pleura"} <= set(anc)
    assert onto.region_ancestors("lingula")[:2] == ["left_upper_lobe", "left_lung"]
    assert "right_lower_lung_zone" in onto.region_descendants("lungs")
    assert onto.counterpart("right_lower_lobe") == "left_lower_lobe"
    assert onto.lateral_region("lungs", "left") == "left_lung"
    assert onto.lateral_region("right_hilum", "left") == "left_hilum"
    for r in onto.regions.values():
        if r.counterpart:
            other = onto.regions[r.counterpart]
            assert other.counterpart == r.id and {r.side, other.side} == {"left", "right"}


def test_synonym_lookup(onto: Ontology) -> None:
    for term in ["cardiomegaly", "enlarged heart", "heart enlargement", "Cardiac enlargement"]:
        assert onto.finding_by_synonym(term).id == "cardiomegaly", term
    assert onto.finding_by_synonym("effusions").id == "pleural_effusion"
    assert onto.finding_by_synonym("pleural effusions").id == "pleural_effusion"
    assert onto.finding_by_synonym("oedema").id == "pulmonary_edema"  # UK spelling variant
    assert onto.finding_by_synonym("pulmonary oedema").id == "pulmonary_edema"
    assert onto.finding_by_synonym("opacities").id == "lung_opacity"  # generated plural
    assert onto.finding_by_synonym("NG tube").id == "enteric_tube"
    assert onto.finding_by_synonym("no such thing") is None
    assert onto.region_by_synonym("RLL").id == "right_lower_lobe"
    assert onto.region_by_synonym("left base").id == "left_lower_lung_zone"
    assert onto.region_by_synonym("aortic knob").id == "aortic_arch"


def test_modifiers(onto: Ontology) -> None:
    m = onto.modifiers
    assert m.to_mm(1.5, "cm") == 15.0 and m.to_mm(3, "mm") == 3.0
    with pytest.raises(ValueError, match="unknown size unit 'furlong'"):
        m.to_mm(1, "furlong")
    assert m.severity_rank("trace") < m.severity_rank("small") < m.severity_rank("moderate") < m.severity_rank("large")
    assert m.severity_of("Tiny") == "trace" and m.severity_of("moderate-sized") == "moderate"
    for key in ["new", "increased", "decreased", "unchanged", "resolved", "improved", "worsened"]:
        assert key in m.change and m.change_of(key) == key
    assert m.change_of("redemonstrated") == "unchanged"
    assert "no" in m.certainty["negation_pre"]  # not the YAML boolean False
    assert m.lookup("certainty", "cannot be excluded") in ("uncertainty_pre", "uncertainty_post")
    assert m.lookup("laterality", "bilaterally") == "bilateral"


# ---- broken copies ----------------------------------------------------------------------------

def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "onto"
    shutil.copytree(DATA_DIR, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _edit(path: Path, fn) -> None:  # type: ignore[no-untyped-def]
    doc = yaml.load(path.read_text(), Loader=_Loader)
    fn(doc)
    path.write_text(yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True))


def _errors(path: Path) -> str:
    with pytest.raises(OntologyError) as exc:
        load_ontology(path)
    return str(exc.value)


def test_copy_of_package_data_loads(tmp_path: Path) -> None:
    o = load_ontology(_copy(tmp_path))
    assert len(o.findings) == len(load_ontology().findings)


def test_unknown_key_fails_naming_file_and_key(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "findings_pleura.yaml", lambda doc: doc["findings"][1].update(colour="blue"))
    msg = _errors(d)
    assert "findings_pleura.yaml" in msg and "(pleural_effusion).colour: unknown key" in msg


def test_missing_required_key_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "findings_lung.yaml", lambda doc: doc["findings"][0].pop("category"))
    msg = _errors(d)
    assert "findings_lung.yaml: findings[0] (lung_opacity).category: missing required key" in msg


def test_missing_version_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "regions.yaml", lambda doc: doc.pop("version"))
    assert "regions.yaml: version: missing required key" in _errors(d)


def test_dangling_references_fail(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "findings_lung.yaml", lambda doc: doc["findings"][1].update(parents=["lung_opacityy"]))
    _edit(d / "findings_pleura.yaml", lambda doc: doc["findings"][1].update(default_regions=["pleura", "moon"]))
    _edit(d / "regions.yaml", lambda doc: doc["regions"][2].update(counterpart="left_lungg"))
    _edit(d / "scheme_nih14.yaml", lambda doc: doc["scheme"]["labels"].update(Mass=["tumour_mass"]))
    msg = _errors(d)
    assert "findings_lung.yaml: findings[1] (consolidation).parents: unknown finding 'lung_opacityy'" in msg
    assert "findings_pleura.yaml: findings[1] (pleural_effusion).default_regions: unknown region 'moon'" in msg
    assert "regions.yaml: regions[2] (right_lung).counterpart: unknown region 'left_lungg'" in msg
    assert "scheme_nih14.yaml: scheme.labels.Mass: unknown finding 'tumour_mass'" in msg


def test_undeclared_empty_mapping_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "scheme_nih14.yaml", lambda doc: doc["scheme"]["labels"].update(Hernia=[]))
    assert "scheme_nih14.yaml: scheme.labels.Hernia: maps to [] but is not in groups.normal" in _errors(d)


def test_unknown_anatomy_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "findings_radimagenet.yaml", lambda doc: doc["findings"][0].update(anatomies=["elbow"]))
    assert "findings_radimagenet.yaml: findings[0] (achilles_pathology).anatomies: unknown anatomy 'elbow'" in _errors(d)


def test_unmapped_scheme_label_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "scheme_vindr.yaml", lambda doc: doc["scheme"]["labels"].update({"No finding": None}))
    assert "scheme_vindr.yaml: scheme.labels.No finding: label does not map" in _errors(d)


def test_duplicate_id_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "findings_zz_dup.yaml").write_text(
        'version: "1.0.0"\nfindings:\n  - {id: pneumothorax, name: another pneumothorax, category: DISEASE}\n')
    msg = _errors(d)
    assert "findings_zz_dup.yaml: findings[0] (pneumothorax).id: duplicate finding id 'pneumothorax'" in msg
    assert "first in findings_pleura.yaml" in msg


def test_synonym_clash_fails_unless_declared_ambiguous(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "findings_lung.yaml", lambda doc: doc["findings"][1]["synonyms"].append("effusion"))
    msg = _errors(d)
    assert "'effusion' is claimed by findings" in msg and "consolidation" in msg and "pleural_effusion" in msg
    assert "findings_" in msg and ".synonyms" in msg

    def declare(doc: dict, idx: int) -> None:
        f = doc["findings"][idx]
        f["synonyms"] = [s for s in f["synonyms"] if s != "effusion"]
        f.setdefault("ambiguous_synonyms", []).append("effusion")

    _edit(d / "findings_lung.yaml", lambda doc: declare(doc, 1))
    _edit(d / "findings_pleura.yaml", lambda doc: declare(doc, 1))
    o = load_ontology(d)
    assert {f.id for f in o.findings_for_term("effusion")} == {"consolidation", "pleural_effusion"}
    assert o.finding_by_synonym("effusion") is None  # ambiguous: no single answer


def test_parent_cycle_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "findings_lung.yaml", lambda doc: doc["findings"][0].update(parents=["consolidation"]))
    msg = _errors(d)
    assert "parents: cycle" in msg and "lung_opacity" in msg and "consolidation" in msg


def test_yaml_boolean_trap_is_reported(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    text = (d / "findings_lung.yaml").read_text().replace("subcategory: LUNG_FIELD", "subcategory: no", 1)
    (d / "findings_lung.yaml").write_text(text)
    assert "findings_lung.yaml: findings[0] (lung_opacity).subcategory: expected str, got bool" in _errors(d)


def test_unparseable_yaml_fails(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "regions.yaml").write_text("version: '1'\nregions: [\n")
    assert "regions.yaml: cannot read YAML" in _errors(d)


# ---- CLI --------------------------------------------------------------------------------------

def test_cli_prints_counts_and_passes() -> None:
    res = CliRunner().invoke(app, ["ontology"], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "Findings by category" in res.output and "ANATOMICAL_FINDING" in res.output
    assert "nih14" in res.output and "vindr" in res.output
    assert "OK: all" in res.output and "FAIL" not in res.output


def test_cli_check_broken_copy_exits_nonzero(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit(d / "findings_pleura.yaml", lambda doc: doc["findings"][1].update(parents=["nowhere"]))
    res = CliRunner().invoke(app, ["ontology", "--check", str(d)], env={"COLUMNS": "200"})
    assert res.exit_code == 1
    assert "FAIL" in res.output
    assert "findings_pleura.yaml: findings[1] (pleural_effusion).parents: unknown finding 'nowhere'" in res.output


def test_cli_check_missing_dir_exits_nonzero(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["ontology", "--check", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "not a directory" in res.output


def test_cli_openi_coverage_on_sample() -> None:
    sample = Path(__file__).parent / "data" / "ontology" / "openi"
    res = CliRunner().invoke(app, ["ontology", "--openi", str(sample)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "OpenI MeSH coverage: 30/30 major codes map (100.0%); 7/7 reports fully mapped" in res.output


def test_ontology_pickles_for_worker_processes(onto: Ontology) -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(onto))
    assert copy.map_label("vindr", "Lung Opacity") == ["lung_opacity"]
    assert copy.ancestors("picc") == onto.ancestors("picc")
    assert copy.modifiers.severity_of("tiny") == "trace"
    assert copy.finding_terms() == onto.finding_terms()
