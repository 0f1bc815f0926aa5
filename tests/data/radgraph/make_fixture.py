"""Writes the hand-made RadGraph / RadGraph2 fixtures (invented reports; the real layout of
shared FORMATS.md section 4). Entities are given as (word, label, relations) over the
whitespace-split text so token indices (0-based, inclusive) cannot drift."""

import json


def graph(text, spans):
    toks = text.split()
    ents = {}
    for n, (start, end, label, rels) in enumerate(spans, start=1):
        ents[str(n)] = {"tokens": " ".join(toks[start:end + 1]), "label": label, "start_ix": start, "end_ix": end,
                        "relations": [[t, str(d)] for t, d in rels]}
    return ents


R1 = "small left pleural effusion . heart size is enlarged . no pneumothorax . lungs are clear ."
#      0    1    2       3        4 5     6    7  8        9 10 11          12 13    14  15    16
E1 = [(0, 0, "OBS-DP", [("modify", 4)]),          # 1 small -> effusion
      (1, 1, "ANAT-DP", [("modify", 3)]),         # 2 left -> pleural
      (2, 2, "ANAT-DP", []),                      # 3 pleural
      (3, 3, "OBS-DP", [("located_at", 3)]),      # 4 effusion
      (5, 5, "ANAT-DP", []),                      # 5 heart
      (8, 8, "OBS-DP", [("located_at", 5)]),      # 6 enlarged
      (11, 11, "OBS-DA", []),                     # 7 pneumothorax
      (13, 13, "ANAT-DP", []),                    # 8 lungs
      (15, 15, "OBS-DP", [("located_at", 8)])]    # 9 clear

R2 = "possible right lower lobe consolidation . no acute cardiopulmonary process ."
#      0        1     2     3    4             5 6  7     8               9       10
E2 = [(1, 1, "ANAT-DP", [("modify", 2)]),
      (2, 3, "ANAT-DP", []),
      (4, 4, "OBS-U", [("located_at", 2)]),
      (7, 7, "OBS-DA", [("modify", 6)]),
      (8, 8, "ANAT-DP", []),
      (9, 9, "OBS-DA", [("located_at", 5)])]

R3 = "endotracheal tube in place . mild pulmonary edema ."
#      0            1    2  3     4 5    6         7     8
E3 = [(0, 1, "OBS-DP", []),
      (5, 5, "OBS-DP", [("modify", 4)]),
      (6, 6, "ANAT-DP", []),
      (7, 7, "OBS-DP", [("located_at", 3)])]

v1 = {
    "p10/p10000001/s50000001.txt": {"text": R1, "entities": graph(R1, E1), "data_source": "MIMIC-CXR", "data_split": "train"},
    "p10/p10000002/s50000002.txt": {"text": R2, "entities": graph(R2, E2), "data_source": "MIMIC-CXR", "data_split": "train"},
    "p10/p10000003/s50000003.txt": {"text": R3, "entities": graph(R3, E3), "data_source": "MIMIC-CXR", "data_split": "train"},
}
# v1 test.json: two labelers; labeler_2 reads the consolidation as present
test = {
    "p10/p10000002/s50000002.txt": {
        "text": R2,
        "labeler_1": {"entities": graph(R2, E2), "data_source": "MIMIC-CXR", "data_split": "test"},
        "labeler_2": {"entities": graph(R2, [(1, 1, "ANAT-DP", [("modify", 2)]), (2, 3, "ANAT-DP", []), (4, 4, "OBS-DP", [("located_at", 2)])]),
                      "data_source": "MIMIC-CXR", "data_split": "test"},
    }
}
# RadGraph2: change entities in both spellings the sources show (CHAN-WOR / CHAN-CON-IMP)
R4 = "worsening left pleural effusion . improved right lower lobe atelectasis . unchanged cardiomegaly ."
#      0         1    2       3        4 5        6     7     8    9          10 11        12
E4 = [(0, 0, "CHAN-WOR", [("modify", 4)]),
      (1, 1, "ANAT-DP", [("modify", 3)]),
      (2, 2, "ANAT-DP", []),
      (3, 3, "OBS-DP", [("located_at", 3)]),
      (5, 5, "CHAN-CON-IMP", [("modify", 8)]),
      (6, 6, "ANAT-DP", [("modify", 7)]),
      (7, 8, "ANAT-DP", []),
      (9, 9, "OBS-DP", [("located_at", 7)]),
      (11, 11, "CHAN-NC", [("modify", 10)]),
      (12, 12, "OBS-DP", [])]
v2 = {"p10/p10000004/s50000004.txt": {"text": R4, "entities": graph(R4, E4), "data_split": "train"}}

for name, obj in (("train.json", v1), ("test.json", test), ("radgraph2_train.json", v2)):
    with open(name, "w") as f:
        json.dump(obj, f, indent=1)
