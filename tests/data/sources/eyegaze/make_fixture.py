"""Writes the hand-made Eye Gaze (egd-cxr) fixture: invented values in the real layout
(../shared/FORMATS.md §2). Run from this folder: ``python make_fixture.py``; the output is committed.

Cases: a Normal image with boxes, fixations and a transcript (its image on disk in a MIMIC-JPG tree);
a CHF image whose transcript has phrases but no full_text, an unknown box name and an inverted box;
a pneumonia image of the same patient whose transcript is missing; a row with a bad condition value;
box rows of an image not in the sheet; calibration fixations (DICOM_ID not in the sheet); a
multi-line quoted cxr_exam_indication; CRLF line ends in bounding_boxes.csv and fixations.csv.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from PIL import Image

HERE = Path(__file__).parent
EGD = HERE / "egd-cxr"
MIMIC = HERE / "mimic"

CHX = ["Atelectasis__chx", "Cardiomegaly__chx", "Edema__chx", "No_Finding__chx", "Pneumonia__chx"]
MASTER_COLS = (["dicom_id", "path", "study_id", "patient_id", "stay_id", "gender", "anchor_age", "image_top_pad",
                "image_bottom_pad", "image_left_pad", "image_right_pad", "dx1", "dx1_icd", "normal_reports",
                "Normal", "CHF", "pneumonia", "consolidation", "enlarged_cardiac_silhouette", "pulmonary_edema__hazy_opacity"]
               + CHX + ["cxr_exam_indication"])
FIX_COLS = ["SESSION_ID", "MEDIA_ID", "DICOM_ID", "CNT", "Time (in secs)", "TIMETICK(f=10000000)", "FPOGX", "FPOGY", "FPOGS",
            "FPOGD", "FPOGID", "FPOGV", "BPOGX", "BPOGY", "BPOGV", "LPCX", "LPCY", "LPD", "LPS", "LPV", "RPCX", "RPCY", "RPD",
            "RPS", "RPV", "BKID", "BKDUR", "BKPMIN", "LPMM", "LPMMV", "RPMM", "RPMMV", "SACCADE_MAG", "SACCADE_DIR",
            "VID_FRAME", "X_ORIGINAL", "Y_ORIGINAL"]

I1 = ("a1a1a1a1-11111111-22222222-33333333-44444444", "11000001", "51000001")
I2 = ("b2b2b2b2-11111111-22222222-33333333-44444444", "11000002", "51000002")
I3 = ("c3c3c3c3-11111111-22222222-33333333-44444444", "11000002", "51000003")
I4 = ("d4d4d4d4-11111111-22222222-33333333-44444444", "11000004", "51000004")


def q(s: str) -> str:
    return '"' + s.replace('"', '""') + '"' if any(ch in s for ch in ',"\n') else s


def write(path: Path, rows: list[list[str]], crlf: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nl = "\r\n" if crlf else "\n"
    path.write_bytes((nl.join(",".join(q(str(c)) for c in r) for r in rows) + nl).encode())


def master_row(img, normal, chf, pneu, indication):
    did, pat, st = img
    path = f"files/p{pat[:2]}/p{pat}/s{st}/{did}.dcm"
    return [did, path, st, pat, "30000001", "F", "50 - 60", "0", "0", "183", "183", "I50.9" if chf == "1" else "",
            "", "1" if normal == "1" else "0", normal, chf, pneu, "0", "1" if chf == "1" else "0", "0",
            "", "1.0" if chf == "1" else "", "", "1.0" if normal == "1" else "", "", indication]


def main() -> None:
    for d in (EGD, MIMIC):
        if d.exists():
            shutil.rmtree(d)
    write(EGD / "master_sheet.csv", [
        MASTER_COLS,
        master_row(I1, "1", "0", "0", "___F with chest pain.\nEvaluate for acute process."),
        master_row(I2, "0", "1", "0", "Shortness of breath, history of CHF"),
        master_row(I3, "0", "0", "1", "Fever, cough"),
        master_row(I4, "0", "yes", "0", "Cough"),
    ])
    boxes = [["dicom_id", "bbox_name", "x1", "x2", "y1", "y2"]]
    for did in (I1[0], I2[0]):
        boxes += [[did, "right lung", "250.0", "1300.0", "300.0", "2200.0"],
                  [did, "left lung", "1400.0", "2400.0", "320.0", "2250.0"],
                  [did, "cardiac silhouette", "1000.0", "1900.0", "1200.0", "2000.0"],
                  [did, "left costophrenic angle", "2100.0", "2400.0", "1950.0", "2250.0"],
                  [did, "aortic knob", "1350.0", "1600.0", "700.0", "900.0"]]
    boxes += [[I2[0], "left hilar structures", "1500.0", "1700.0", "900.0", "1200.0"],
              [I2[0], "lingular fissure line", "1500.0", "1700.0", "900.0", "1200.0"],  # a name no ontology region has
              [I2[0], "right clavicle", "900.0", "300.0", "150.0", "400.0"],  # inverted: x1 > x2
              ["e5e5e5e5-11111111-22222222-33333333-44444444", "left lung", "1", "2", "3", "4"]]  # not in the sheet
    write(EGD / "bounding_boxes.csv", boxes, crlf=True)
    fix = [FIX_COLS]
    n = 0
    for did, k in ((I1[0], 3), ("calibration_image_01", 2), (I2[0], 2), ("calibration_image_02", 1), (I3[0], 1)):
        for _ in range(k):
            n += 1
            fix.append(["1", "0", did, str(n), f"{n * 0.31:.5f}", str(696216388878 + n * 1000), "0.452", "0.339", "0.018",
                        "0.706", str(n), "1"] + ["0"] * 23 + [str(900 + n), str(1000 + n)])
    write(EGD / "fixations.csv", fix, crlf=True)
    t = EGD / "audio_segmentation_transcripts"
    (t / I1[0]).mkdir(parents=True)
    (t / I1[0] / "transcript.json").write_text(json.dumps({
        "full_text": "The lungs are clear. No pleural effusion or pneumothorax. The heart size is normal.",
        "time_stamped_text": [{"phrase": "the lungs are clear", "begin_time": 0.4, "end_time": 1.6},
                              {"phrase": "no pleural effusion or pneumothorax", "begin_time": 2.0, "end_time": 3.9},
                              {"phrase": "the heart size is normal", "begin_time": 4.3, "end_time": 5.5}]}))
    (t / I2[0]).mkdir(parents=True)
    (t / I2[0] / "transcript.json").write_text(json.dumps({
        "time_stamped_text": [{"phrase": "the heart is enlarged.", "begin_time": 0.5, "end_time": 1.9},
                              {"phrase": "there is mild pulmonary edema.", "begin_time": 2.2, "end_time": 4.0}]}))
    # I3: no transcript folder (missing file); I4 is rejected before its transcript is needed
    f = MIMIC / "files" / f"p{I1[1][:2]}" / f"p{I1[1]}" / f"s{I1[2]}" / f"{I1[0]}.png"
    f.parent.mkdir(parents=True)
    Image.new("1", (2544, 3056), 0).save(f)  # 1-bit PNG: small on disk


if __name__ == "__main__":
    main()
