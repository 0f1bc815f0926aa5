"""Writes the hand-made REFLACX fixture (invented values, real layout: ../shared/FORMATS.md §1).

Run from this folder: ``python make_fixture.py``. The files it writes are committed; this script
documents how they were made and which trap each case holds. CSVs end lines in CRLF and write NaN
as an empty cell, as the release does (pandas through ``newline='\\r\\n'``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image

HERE = Path(__file__).parent
MAIN = HERE / "main_data"
MIMIC = HERE / "mimic"

P1 = ["Airway wall thickening", "Atelectasis", "Consolidation", "Emphysema", "Enlarged cardiac silhouette", "Fibrosis",
      "Fracture", "Groundglass opacity", "Mass", "Nodule", "Other", "Pleural effusion", "Pleural thickening",
      "Pneumothorax", "Pulmonary edema", "Quality issue", "Support devices", "Wide mediastinum"]
P23 = ["Abnormal mediastinal contour", "Acute fracture", "Atelectasis", "Consolidation", "Enlarged cardiac silhouette",
       "Enlarged hilum", "Groundglass opacity", "Hiatal hernia", "High lung volume / emphysema",
       "Interstitial lung disease", "Lung nodule or mass", "Other", "Pleural abnormality", "Pneumothorax",
       "Pulmonary edema", "Support devices"]
BOOL = {"Support devices", "Quality issue"}
HEAD = "id,split,eye_tracking_data_discarded,image,dicom_id,subject_id,image_size_x,image_size_y"


def csv(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())


def meta_row(rid, split, disc, subj, study, dicom, w, h, labels, cols, other=""):
    vals = []
    for c in cols:
        if c == "Other":
            vals.append(other)
        elif c in BOOL:
            vals.append("True" if labels.get(c) else "False")
        else:
            v = labels.get(c, 0)
            vals.append("" if v is None else str(v))  # None: the release's NaN -> empty integer cell
    img = f"physionet.org/files/mimic-cxr/2.0.0/files/p{subj[:2]}/p{subj}/s{study}/{dicom}.dcm"
    return f"{rid},{split},{disc},{img},{dicom},{subj},{w},{h}," + ",".join(vals)


def ellipses(rid, cols, rows, header=None):
    head = header or ["xmin", "ymin", "xmax", "ymax", "certainty"] + cols
    lines = [",".join(head)]
    for x1, y1, x2, y2, cert, labs in rows:
        lines.append(",".join([str(x1), str(y1), str(x2), str(y2), str(cert)] + [str(c in labs) for c in head[5:]]))
    csv(MAIN / rid / "anomaly_location_ellipses.csv", lines)


def chest(rid, box):
    csv(MAIN / rid / "chest_bounding_box.csv", ["xmin,ymin,xmax,ymax", ",".join(map(str, box))])


def transcript(rid, text):
    (MAIN / rid).mkdir(parents=True, exist_ok=True)
    (MAIN / rid / "transcription.txt").write_text(text)
    words = text.replace(".", " .").replace(",", " ,").split()
    csv(MAIN / rid / "timestamps_transcription.csv",
        ["word,timestamp_start_word,timestamp_end_word"] + [f"{w},{i * 0.4:.3f},{i * 0.4 + 0.35:.3f}" for i, w in enumerate(words)])


def fixations(rid):
    csv(MAIN / rid / "fixations.csv", [
        "timestamp_start_fixation,timestamp_end_fixation,x_position,y_position,pupil_area_normalized,"
        "angular_resolution_x_pixels_per_degree,angular_resolution_y_pixels_per_degree,window_width,window_level,"
        "xmin_shown_from_image,ymin_shown_from_image,xmax_shown_from_image,ymax_shown_from_image,"
        "xmin_in_screen_coordinates,ymin_in_screen_coordinates,xmax_in_screen_coordinates,ymax_in_screen_coordinates",
        "0.512,0.803,150,210,0.412,41.20000,41.10000,1.00000,0.50000,0,0,300,400,480,0,1440,1080"])


def main() -> None:
    for d in (MAIN, MIMIC):
        if d.exists():
            shutil.rmtree(d)
    # ---- phase 1: image A (subject 10000001, study 50000001) read by three radiologists
    rows1 = []
    A = ("10000001", "50000001", "aaaa0001-11111111-22222222-33333333-44444444", 300, 400)
    for rid, labs, disc, other in (
        ("P102R111111", {"Atelectasis": 4, "Pleural effusion": 5, "Support devices": True}, "False", ""),
        ("P102R222222", {"Atelectasis": 3, "Pleural effusion": 2, "Nodule": None}, "False", "scoliosis|old rib deformity"),
        # eye tracking discarded: no transcription, fixations or gaze, but labels, ellipses, chest box
        ("P102R333333", {"Atelectasis": 5, "Quality issue": True}, "True", ""),
    ):
        rows1.append(meta_row(rid, "train", disc, A[0], A[1], A[2], A[3], A[4], labs, P1, other))
    ellipses("P102R111111", P1, [(40, 250, 120, 330, 4, {"Atelectasis"}), (30, 280, 140, 390, 5, {"Pleural effusion"})])
    ellipses("P102R222222", P1, [(45, 255, 125, 335, 3, {"Atelectasis"}), (180, 300, 260, 380, 2, {"Pleural effusion"}),
                                 # "Other" only: the readers were told not to draw it; no finding to place
                                 (200, 100, 240, 140, 3, {"Other"})])
    ellipses("P102R333333", P1, [(42, 248, 118, 328, 5, {"Atelectasis"})])
    for rid in ("P102R111111", "P102R222222", "P102R333333"):
        chest(rid, (20, 30, 285, 395))
    transcript("P102R111111", "Left basilar atelectasis. Small right pleural effusion. Endotracheal tube in place.")
    transcript("P102R222222", "Subsegmental atelectasis at the left base, possibly a small effusion.")
    fixations("P102R111111")
    fixations("P102R222222")
    csv(MAIN / "metadata_phase_1.csv", [HEAD + "," + ",".join(P1)] + rows1)

    # ---- phase 3: one reading per image
    rows3 = []
    B = ("10000002", "50000002", "bbbb0002-11111111-22222222-33333333-44444444", 300, 400)
    C = ("10000002", "50000003", "cccc0003-11111111-22222222-33333333-44444444", 400, 300)
    rows3.append(meta_row("P300R000002", "train", "False", *B, {"Lung nodule or mass": 5, "Enlarged cardiac silhouette": 3}, P23))
    ellipses("P300R000002", P23, [(100, 100, 140, 140, 5, {"Lung nodule or mass"}),
                                  (110, 180, 250, 330, 3, {"Enlarged cardiac silhouette"}),
                                  # entirely outside the 300x400 image: a reject line
                                  (320, 410, 380, 470, 4, {"Lung nodule or mass"}),
                                  # crosses the right border: box clipped, ellipse kept
                                  (260, 50, 340, 120, 4, {"Lung nodule or mass"}),
                                  # empty certainty cell (NaN written as "")
                                  (10, 10, 50, 50, "", {"Lung nodule or mass"})])
    chest("P300R000002", (15, 25, 290, 390))
    transcript("P300R000002", "There is a right upper lobe nodule. The heart is mildly enlarged.")
    fixations("P300R000002")
    # MIMIC splits are patient-level: the same patient as B, so the same split
    rows3.append(meta_row("P300R000003", "train", "False", *C, {"Pneumothorax": 1}, P23))
    ellipses("P300R000003", P23, [(20, 20, 90, 120, 1, {"Pneumothorax"})])
    chest("P300R000003", (10, 10, 390, 290))
    transcript("P300R000003", "No pneumothorax. Lungs are clear.")
    # D: the reading folder is missing
    rows3.append(meta_row("P300R000004", "train", "False", "10000004", "50000004",
                          "dddd0004-11111111-22222222-33333333-44444444", 300, 400, {"Atelectasis": 4}, P23))
    # E: an ellipse file with a label column no vocabulary has
    rows3.append(meta_row("P300R000005", "train", "False", "10000005", "50000005",
                          "eeee0005-11111111-22222222-33333333-44444444", 300, 400, {"Consolidation": 4}, P23))
    ellipses("P300R000005", P23, [(10, 10, 80, 80, 4, {"Lung opacity"})],
             header=["xmin", "ymin", "xmax", "ymax", "certainty"] + [c if c != "Consolidation" else "Lung opacity" for c in P23])
    chest("P300R000005", (5, 5, 295, 395))
    transcript("P300R000005", "Right lower lobe consolidation.")
    # F: transcription missing although eye tracking was kept
    rows3.append(meta_row("P300R000006", "train", "False", "10000006", "50000006",
                          "ffff0006-11111111-22222222-33333333-44444444", 300, 400, {}, P23))
    ellipses("P300R000006", P23, [])
    chest("P300R000006", (5, 5, 295, 395))
    # G: an ellipse file written with the phase 1 vocabulary in a phase 3 reading
    rows3.append(meta_row("P300R000007", "validate", "False", "10000007", "50000007",
                          "gggg0007-11111111-22222222-33333333-44444444", 300, 400, {"Abnormal mediastinal contour": 4}, P23))
    ellipses("P300R000007", P1, [(100, 50, 200, 200, 4, {"Wide mediastinum"})])
    chest("P300R000007", (5, 5, 295, 395))
    transcript("P300R000007", "The mediastinum is widened.")
    csv(MAIN / "metadata_phase_3.csv", [HEAD + "," + ",".join(P23)] + rows3)

    # ---- MIMIC-CXR-JPG side: image A stored at full size, image B as a half-size copy; metadata
    for (subj, study, dicom, w, h), size in ((A, (300, 400)), (B, (150, 200))):
        f = MIMIC / "files" / f"p{subj[:2]}" / f"p{subj}" / f"s{study}" / f"{dicom}.jpg"
        f.parent.mkdir(parents=True, exist_ok=True)
        Image.new("L", size, 0).save(f, quality=50)
    csv(MIMIC / "mimic-cxr-2.0.0-metadata.csv", [
        "dicom_id,subject_id,study_id,PerformedProcedureStepDescription,ViewPosition,Rows,Columns,StudyDate,StudyTime",
        f"{A[2]},{A[0]},{A[1]},CHEST (PA AND LAT),PA,400,300,21800101,101010.000",
        f"{B[2]},{B[0]},{B[1]},CHEST (PORTABLE AP),AP,400,300,21810505,080000.000",
        f"{C[2]},{C[0]},{C[1]},CHEST (PORTABLE AP),AP,300,400,21810606,090000.000",
    ])


if __name__ == "__main__":
    main()
