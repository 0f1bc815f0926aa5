"""Test helpers for the generator tests: the mini ontology and hand-made scene graphs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

HERE = Path(__file__).parent


def mini_ontology() -> SimpleNamespace:
    data = yaml.safe_load((HERE / "mini_ontology.yaml").read_text())
    findings = {f["id"]: SimpleNamespace(**{"parents": (), "default_regions": (), "severities": (),
                                            "lateralised": False, "abnormal": True, "anatomies": (),
                                            "subcategory": None, **f}) for f in data["findings"]}
    regions = {r["id"]: SimpleNamespace(**{"parents": (), "side": None, "counterpart": None,
                                           "boxable": True, **r}) for r in data["regions"]}
    anatomies = {a["id"]: SimpleNamespace(**a) for a in data["anatomies"]}
    schemes = {k: SimpleNamespace(name=k, labels=v["labels"], label_anatomies={}) for k, v in data["schemes"].items()}
    return SimpleNamespace(version=data["version"], findings=findings, regions=regions, anatomies=anatomies,
                           schemes=schemes, modifiers=SimpleNamespace(**data["modifiers"]))


# --- hand-made scene graphs ----------------------------------------------------------------------
from radvqa.model import (  # noqa: E402
    Box, Image, Indication, Observation, Report, SceneGraph, Sentence, Span,
)

REPORT = ("INDICATION: Shortness of breath, evaluate for effusion. FINDINGS: There is a small left pleural "
          "effusion. Mild atelectasis in the left lower lobe. No pneumothorax. Heart size is normal. "
          "Endotracheal tube in the trachea. IMPRESSION: Small left effusion.")


def _sent(text: str, sid: str, piece: str, section: str) -> Sentence:
    i = text.index(piece)
    return Sentence(id=sid, section=section, start=i, end=i + len(piece), text=piece)


def cxr_report_sg(study_id: str = "openi:CXR1", patient: str = "openi:p1", time: str | None = None,
                  region_boxes: bool = True) -> SceneGraph:
    """A chest X-ray report study (OpenI-like) with region boxes on a frontal image."""
    t = REPORT
    s = [_sent(t, "S01", "Shortness of breath, evaluate for effusion.", "INDICATION"),
         _sent(t, "S02", "There is a small left pleural effusion.", "FINDINGS"),
         _sent(t, "S03", "Mild atelectasis in the left lower lobe.", "FINDINGS"),
         _sent(t, "S04", "No pneumothorax.", "FINDINGS"),
         _sent(t, "S05", "Heart size is normal.", "FINDINGS"),
         _sent(t, "S06", "Endotracheal tube in the trachea.", "FINDINGS")]
    ev = lambda k: [Span(start=s[k].start, end=s[k].end, text=s[k].text, sentence_id=s[k].id)]  # noqa: E731
    rb = []
    i1 = f"{study_id}/i1"
    if region_boxes:
        rb = [Box(image_id=i1, x1=520, y1=100, x2=900, y2=850, source="region", label="left_lung"),
              Box(image_id=i1, x1=100, y1=100, x2=500, y2=850, source="region", label="right_lung"),
              Box(image_id=i1, x1=100, y1=100, x2=900, y2=850, source="region", label="lungs"),
              Box(image_id=i1, x1=560, y1=500, x2=880, y2=840, source="region", label="left_lower_lobe"),
              Box(image_id=i1, x1=700, y1=700, x2=900, y2=880, source="region", label="left_costophrenic_angle"),
              Box(image_id=i1, x1=100, y1=700, x2=300, y2=880, source="region", label="right_costophrenic_angle"),
              Box(image_id=i1, x1=380, y1=450, x2=760, y2=820, source="region", label="cardiac_silhouette"),
              Box(image_id=i1, x1=450, y1=50, x2=560, y2=400, source="region", label="trachea"),
              Box(image_id=i1, x1=80, y1=80, x2=920, y2=900, source="region", label="pleura")]
    lcpa = [b for b in rb if b.label == "left_costophrenic_angle"]
    lll = [b for b in rb if b.label == "left_lower_lobe"]
    obs = [
        Observation(id="O01", finding="pleural_effusion", certainty="present", laterality="left",
                    regions=["left_costophrenic_angle"], severity="small", evidence=ev(1), boxes=lcpa),
        Observation(id="O02", finding="atelectasis", certainty="present", laterality="left",
                    regions=["left_lower_lobe"], severity="mild", evidence=ev(2), boxes=lll),
        Observation(id="O03", finding="pneumothorax", certainty="absent", evidence=ev(3)),
        Observation(id="O04", finding="cardiomegaly", certainty="absent", evidence=ev(4)),
        Observation(id="O05", finding="endotracheal_tube", certainty="present", regions=["trachea"],
                    evidence=ev(5), boxes=[b for b in rb if b.label == "trachea"]),
    ]
    return SceneGraph(
        study_id=study_id, patient_id=patient, source="openi",
        images=[Image(id=i1, path="img/i1.png", width=1000, height=1000, view="PA"),
                Image(id=f"{study_id}/i2", path="img/i2.png", width=1000, height=1000, view="LATERAL")],
        report=Report(text=t, sentences=s),
        indication=Indication(text="Shortness of breath, evaluate for effusion", evaluate=["pleural_effusion"],
                              evidence=ev(0)),
        observations=obs, region_boxes=rb, study_time=time, extractor="rules:1")


def normal_report_sg(study_id: str = "openi:CXR2", patient: str = "openi:p2") -> SceneGraph:
    t = "FINDINGS: The lungs are clear. No pleural effusion or pneumothorax. Heart size is normal."
    s = [_sent(t, "S01", "The lungs are clear.", "FINDINGS"),
         _sent(t, "S02", "No pleural effusion or pneumothorax.", "FINDINGS"),
         _sent(t, "S03", "Heart size is normal.", "FINDINGS")]
    sp = lambda k: [Span(start=s[k].start, end=s[k].end, text=s[k].text, sentence_id=s[k].id)]  # noqa: E731
    obs = [Observation(id="O01", finding="consolidation", certainty="absent", regions=["lungs"], evidence=sp(0)),
           Observation(id="O02", finding="pleural_effusion", certainty="absent", evidence=sp(1)),
           Observation(id="O03", finding="pneumothorax", certainty="absent", evidence=sp(1)),
           Observation(id="O04", finding="cardiomegaly", certainty="absent", evidence=sp(2))]
    return SceneGraph(study_id=study_id, patient_id=patient, source="openi",
                      images=[Image(id=f"{study_id}/n1", path="img/n1.png", width=800, height=800, view="PA")],
                      report=Report(text=t, sentences=s), observations=obs)


def box_sg(study_id: str = "nih-cxr14:00000001_000.png", patient: str = "nih-cxr14:1", findings=None,
           time: str = "0", size: int = 448, source: str = "nih-cxr14", readers: int = 1) -> SceneGraph:
    """A box-labelled frontal image (NIH / VinDr style). ``findings``: (finding, [x1, y1, x2, y2])
    in stored pixels; with readers > 1 every reader draws the box (slightly shifted) and a fused
    box is added."""
    iid = f"{study_id}/x1"
    findings = findings if findings is not None else [("nodule", [60, 80, 110, 130]),
                                                      ("pleural_effusion", [300, 300, 420, 420])]
    obs = []
    for k, (fid, bb) in enumerate(findings):
        boxes = []
        if bb is not None:
            if readers > 1:
                for r in range(readers):
                    boxes.append(Box(image_id=iid, x1=bb[0] + r, y1=bb[1] + r, x2=bb[2] + r, y2=bb[3] + r,
                                     source="expert", reader=f"R{r + 1}", label=fid))
                boxes.append(Box(image_id=iid, x1=bb[0] + 1, y1=bb[1] + 1, x2=bb[2] + 1, y2=bb[3] + 1,
                                 source="expert_fused", label=fid))
            else:
                boxes.append(Box(image_id=iid, x1=bb[0], y1=bb[1], x2=bb[2], y2=bb[3], source="expert", label=fid))
        obs.append(Observation(id=f"O{k + 1:02d}", finding=fid, certainty="present", source="label",
                               from_report=False, boxes=boxes))
    return SceneGraph(study_id=study_id, patient_id=patient, source=source,
                      images=[Image(id=iid, path="images/x1.png", width=size, height=size, view="PA",
                                    original_width=1024, original_height=1024)],
                      observations=obs, study_time=time)


def rin_sg(study_id: str = "radimagenet:MR/knee/acl_tear/1.png", anatomy: str = "knee",
           pathology: str | None = "acl_tear", modality: str = "MR", patient: str | None = None) -> SceneGraph:
    obs = [Observation(id="O01", finding=pathology, certainty="present", source="label", from_report=False)] \
        if pathology else []
    return SceneGraph(study_id=study_id, patient_id=patient or study_id, source="radimagenet",
                      images=[Image(id=study_id + "#img", path=study_id.split(":", 1)[1], width=224, height=224,
                                    modality=modality)],
                      observations=obs, anatomy=anatomy, modality=modality)
