"""Writes the hand-made gold-graph source fixtures: RadGraph v1 train/dev/test (test with two
labelers), RadGraph2 change labels in both spellings, Lunguage.csv with one patient's sequence of
three studies, and a small MIMIC-CXR side (metadata + split tables, JPGs) to join with. Invented
reports and ids in the real layouts (shared FORMATS.md sections 4 and 5); the real data are
credentialed (PhysioNet). Entities are (first token, last token, label, relations) over the
whitespace-split text, so token indices (0-based, inclusive) cannot drift.

    python tests/data/sources/goldgraphs/make_fixture.py
"""

import csv
import io
import json
from pathlib import Path

HERE = Path(__file__).parent


def graph(text, spans):
    toks = text.split()
    ents = {}
    for n, (start, end, label, rels) in enumerate(spans, start=1):
        ents[str(n)] = {"tokens": " ".join(toks[start:end + 1]), "label": label, "start_ix": start, "end_ix": end,
                        "relations": [[t, str(d)] for t, d in rels]}
    return ents


# --- RadGraph v1 ------------------------------------------------------------------------------
R1 = "small left pleural effusion . heart size is enlarged . no pneumothorax . lungs are clear ."
#      0    1    2       3        4 5     6    7  8        9 10 11          12 13    14  15    16
E1 = [(0, 0, "OBS-DP", [("modify", 4)]), (1, 1, "ANAT-DP", [("modify", 3)]), (2, 2, "ANAT-DP", []),
      (3, 3, "OBS-DP", [("located_at", 3)]), (5, 5, "ANAT-DP", []), (8, 8, "OBS-DP", [("located_at", 5)]),
      (11, 11, "OBS-DA", []), (13, 13, "ANAT-DP", []), (15, 15, "OBS-DP", [("located_at", 8)])]
R3 = "endotracheal tube in place . mild pulmonary edema . right basilar atelectasis or pneumonia ."
#      0            1    2  3     4 5    6         7     8 9     10      11          12 13        14
E3 = [(0, 1, "OBS-DP", []), (5, 5, "OBS-DP", [("modify", 4)]), (6, 6, "ANAT-DP", []),
      (7, 7, "OBS-DP", [("located_at", 3)]), (9, 9, "ANAT-DP", [("modify", 6)]), (10, 10, "ANAT-DP", []),
      (11, 11, "OBS-U", [("located_at", 6)]), (13, 13, "OBS-U", [("located_at", 6)])]
# the same patient as R1, a later study, in the dev file: the patient's studies all go to dev
R11 = "stable small left pleural effusion . no pneumothorax ."
#      0      1     2    3       4        5 6  7           8
E11 = [(1, 1, "OBS-DP", [("modify", 4)]), (2, 2, "ANAT-DP", [("modify", 3)]), (3, 3, "ANAT-DP", []),
       (4, 4, "OBS-DP", [("located_at", 3)]), (7, 7, "OBS-DA", [])]
R2 = "possible right lower lobe consolidation . no acute cardiopulmonary process ."
#      0        1     2     3    4             5 6  7     8               9       10
E2 = [(1, 1, "ANAT-DP", [("modify", 2)]), (2, 3, "ANAT-DP", []), (4, 4, "OBS-U", [("located_at", 2)]),
      (7, 7, "OBS-DA", [("modify", 6)]), (8, 8, "ANAT-DP", []), (9, 9, "OBS-DA", [("located_at", 5)])]
E2b = [(1, 1, "ANAT-DP", [("modify", 2)]), (2, 3, "ANAT-DP", []), (4, 4, "OBS-DP", [("located_at", 2)])]
RX = "mild cardiomegaly . no focal consolidation ."
#      0    1           2 3  4     5             6
EX = [(0, 0, "OBS-DP", [("modify", 2)]), (1, 1, "OBS-DP", []), (4, 4, "OBS-DA", [("modify", 4)]), (5, 5, "OBS-DA", [])]

train = {
    "p10/p10000001/s50000001.txt": {"text": R1, "entities": graph(R1, E1), "data_source": "MIMIC-CXR", "data_split": "train"},
    "p10/p10000003/s50000003.txt": {"text": R3, "entities": graph(R3, E3), "data_source": "MIMIC-CXR", "data_split": "train"},
}
dev = {"p10/p10000001/s50000011.txt": {"text": R11, "entities": graph(R11, E11), "data_source": "MIMIC-CXR", "data_split": "dev"}}
test = {
    "p10/p10000002/s50000002.txt": {
        "text": R2,
        "labeler_1": {"entities": graph(R2, E2), "data_source": "MIMIC-CXR", "data_split": "test"},
        "labeler_2": {"entities": graph(R2, E2b), "data_source": "MIMIC-CXR", "data_split": "test"},
    },
    # a CheXpert report (no MIMIC study to join; the key format of the real file is not documented)
    "chexpert_test_0001": {
        "text": RX,
        "labeler_1": {"entities": graph(RX, EX), "data_source": "CheXpert", "data_split": "test"},
        "labeler_2": {"entities": graph(RX, EX), "data_source": "CheXpert", "data_split": "test"},
    },
}

# --- RadGraph2: change entities, both spellings (CHAN-WOR / CHAN-CON-IMP) and a device label ------
R4 = "worsening left pleural effusion . improved right lower lobe atelectasis . unchanged cardiomegaly . new right picc line ."
#      0         1    2       3        4 5        6     7     8    9          10 11        12           13 14 15    16   17
E4 = [(0, 0, "CHAN-WOR", [("modify", 4)]), (1, 1, "ANAT-DP", [("modify", 3)]), (2, 2, "ANAT-DP", []),
      (3, 3, "OBS-DP", [("located_at", 3)]), (5, 5, "CHAN-CON-IMP", [("modify", 8)]), (6, 6, "ANAT-DP", [("modify", 7)]),
      (7, 8, "ANAT-DP", []), (9, 9, "OBS-DP", [("located_at", 7)]), (11, 11, "CHAN-NC", [("modify", 10)]),
      (12, 12, "OBS-DP", []), (14, 14, "CHAN-DEV-AP", [("modify", 12)]), (16, 17, "OBS-DP", [])]
radgraph2 = {"p10/p10000004/s50000004.txt": {"text": R4, "entities": graph(R4, E4), "data_split": "train"}}

# --- Lunguage -----------------------------------------------------------------------------------
COLS = ["subject_id", "study_id", "sequence", "section", "sent", "ent", "ent_idx", "cat", "dx_status", "dx_certainty",
        "location", "evidence", "associate", "morphology", "distribution", "measurement", "severity", "comparison",
        "onset", "no change", "improved", "worsened", "placement", "past hx", "other source", "assessment limitations",
        "report", "gt_entity_group", "gt_temporal_group"]
T1 = ("FINDINGS: Small right pleural effusion. Mild cardiomegaly. No pneumothorax. "
      "IMPRESSION: Small right effusion.")
T2 = ("FINDINGS: Moderate right pleural effusion, increased. Stable mild cardiomegaly. "
      "New left lower lobe opacity, possibly atelectasis.")
T3 = ("HISTORY: Pleural effusion. FINDINGS: The right pleural effusion has resolved. Mild cardiomegaly, unchanged. "
      "Right PICC line in place.")
T4 = "FINDINGS: No acute cardiopulmonary process. Zebra sign at the hilum."
T5 = "FINDINGS: Small left effusion."


def L(subj, study, seq, section, sent, ent, cat, status, cert, report, **attrs):
    row = dict.fromkeys(COLS, "")
    row.update(subject_id=subj, study_id=study, sequence=seq, section=section, sent=sent, ent=ent, cat=cat,
               dx_status=status, dx_certainty=cert, report=report)
    for k, v in attrs.items():
        row[k.replace("_", " ")] = v
    return [row[c] for c in COLS]


lunguage = [
    L("p10000010", "s50000101", "1", "find", "Small right pleural effusion.", "pleural effusion", "pf", "positive", "definitive", T1,
      location="right pleural", severity="small", gt_entity_group="effusion"),
    L("p10000010", "s50000101", "1", "find", "Mild cardiomegaly.", "cardiomegaly", "pf", "positive", "definitive", T1, severity="mild"),
    L("p10000010", "s50000101", "1", "find", "No pneumothorax.", "pneumothorax", "pf", "negative", "definitive", T1),
    L("p10000010", "s50000101", "1", "impr", "Small right effusion.", "pleural effusion", "pf", "positive", "definitive", T1,
      location="right", severity="small"),
    L("p10000010", "s50000102", "2", "find", "Moderate right pleural effusion, increased.", "pleural effusion", "pf", "positive",
      "definitive", T2, location="right pleural", severity="moderate", worsened="increased"),
    L("p10000010", "s50000102", "2", "find", "Stable mild cardiomegaly.", "cardiomegaly", "pf", "positive", "definitive", T2,
      severity="mild", no_change="stable"),
    L("p10000010", "s50000102", "2", "find", "New left lower lobe opacity, possibly atelectasis.", "atelectasis", "cf", "positive",
      "tentative", T2, location="left lower lobe", onset="new"),
    L("p10000010", "s50000103", "3", "hist", "Pleural effusion.", "pleural effusion", "pf", "positive", "definitive", T3),
    L("p10000010", "s50000103", "3", "find", "The right pleural effusion has resolved.", "pleural effusion", "pf", "negative",
      "definitive", T3, location="right pleural", improved="resolved"),
    L("p10000010", "s50000103", "3", "find", "Mild cardiomegaly, unchanged.", "cardiomegaly", "pf", "positive", "definitive", T3,
      severity="mild", no_change="unchanged"),
    L("p10000010", "s50000103", "3", "find", "Right PICC line in place.", "picc line", "cof", "positive", "definitive", T3,
      location="right", placement="in place"),
    L("p10000010", "s50000103", "3", "find", "Right PICC line in place.", "patient", "patient info.", "positive", "definitive", T3),
    # a second patient: a normal statement, an entity no ontology term names, two bad rows
    L("p10000011", "s50000111", "1", "find", "No acute cardiopulmonary process.", "acute cardiopulmonary process", "pf",
      "negative", "definitive", T4),
    L("p10000011", "s50000111", "1", "find", "Zebra sign at the hilum.", "zebra sign", "pf", "positive", "definitive", T4,
      location="hilum"),
    L("p10000011", "s50000111", "1", "find", "Zebra sign at the hilum.", "hilar mass", "pf", "maybe", "definitive", T4),
    L("p10000011", "s50000111", "1", "find", "A sentence the report does not hold.", "nodule", "pf", "positive", "definitive", T4),
    # a study whose rows disagree on its place in the sequence: rejected as a whole
    L("p10000012", "s50000121", "1", "find", "Small left effusion.", "pleural effusion", "pf", "positive", "definitive", T5,
      location="left"),
    L("p10000012", "s50000121", "2", "find", "Small left effusion.", "pleural effusion", "pf", "positive", "definitive", T5,
      location="left"),
]

# --- MIMIC-CXR side -----------------------------------------------------------------------------
MIMIC = [  # subject, study, dicom, date, time, split, view
    ("10000001", "50000001", "d0000001-aaaa", "21800101", "101010.000", "train", "PA"),
    ("10000001", "50000011", "d0000011-aaaa", "21800301", "090000.000", "train", "PA"),
    ("10000002", "50000002", "d0000002-aaaa", "21810505", "120000.000", "test", "AP"),
    ("10000009", "50000099", "d0000099-aaaa", "21820101", "120000.000", "train", "PA"),  # no gold report
    ("10000010", "50000101", "d0000101-aaaa", "21830101", "080000.000", "validate", "PA"),
    ("10000010", "50000102", "d0000102-aaaa", "21830201", "080000.000", "validate", "PA"),
    ("10000010", "50000103", "d0000103-aaaa", "21830301", "080000.000", "validate", "AP"),
]


def write_csv(path, rows, crlf=False):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n" if crlf else "\n").writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue().encode("utf-8"))


def main():
    from PIL import Image

    for name, obj in (("radgraph/train.json", train), ("radgraph/dev.json", dev), ("radgraph/test.json", test),
                      ("radgraph2/radgraph_change_train_joint_final.json", radgraph2)):
        p = HERE / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(obj, indent=1) + "\n")
    write_csv(HERE / "lunguage" / "Lunguage.csv", [COLS] + lunguage, crlf=True)
    write_csv(HERE / "lunguage" / "Lunguage_vocab.csv", [["target_term", "normed_term", "category", "subcategory"],
                                                          ["effusion", "pleural effusion", "pf", ""]])
    m = HERE / "mimic"
    write_csv(m / "mimic-cxr-2.0.0-metadata.csv",
              [["dicom_id", "subject_id", "study_id", "PerformedProcedureStepDescription", "ViewPosition", "Rows", "Columns",
                "StudyDate", "StudyTime", "ProcedureCodeSequence_CodeMeaning", "ViewCodeSequence_CodeMeaning",
                "PatientOrientationCodeSequence_CodeMeaning"]]
              + [[d, s, st, "CHEST (PA AND LAT)", v, "48", "40", dt, tm, "CHEST (PA AND LAT)", "postero-anterior", "Erect"]
                 for s, st, d, dt, tm, _sp, v in MIMIC])
    write_csv(m / "mimic-cxr-2.0.0-split.csv", [["dicom_id", "study_id", "subject_id", "split"]]
              + [[d, st, s, sp] for s, st, d, _dt, _tm, sp, _v in MIMIC])
    for s, st, d, *_ in MIMIC:
        f = m / "files" / f"p{s[:2]}" / f"p{s}" / f"s{st}" / f"{d}.jpg"
        f.parent.mkdir(parents=True, exist_ok=True)
        Image.new("L", (40, 48), 128).save(f, quality=50)


if __name__ == "__main__":
    main()
