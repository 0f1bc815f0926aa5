"""Corpus priors: how often findings and regions are positive, used to weight negative sampling
(the anchor samples region and finding negatives with probability rising with how often they are
positive in the corpus, so negatives are plausible rather than trivial).

The packaged numbers (``data/priors.yaml``) are counted from public data by
``python -m radvqa.generate.priors_build`` (see that module and the YAML header for the sources).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml


@dataclass
class Priors:
    finding_positive_rate: dict[str, float] = field(default_factory=dict)
    region_positive_rate: dict[str, float] = field(default_factory=dict)
    count_frequency: dict[int, float] = field(default_factory=dict)
    default_finding_rate: float = 0.005
    default_region_rate: float = 0.005
    source: str = ""

    # a finding never seen positive keeps a small weight: rare negatives still get asked
    def finding_weight(self, fid: str) -> float:
        return max(self.finding_positive_rate.get(fid, 0.0), self.default_finding_rate)

    def region_weight(self, rid: str) -> float:
        return max(self.region_positive_rate.get(rid, 0.0), self.default_region_rate)


def load_priors(path: str | Path | None = None) -> Priors:
    if path is None:
        text = (resources.files("radvqa.generate") / "data" / "priors.yaml").read_text(encoding="utf-8")
        where = "radvqa/generate/data/priors.yaml"
    else:
        text, where = Path(path).read_text(encoding="utf-8"), str(path)
    data = yaml.safe_load(text) or {}
    try:
        return Priors(
            finding_positive_rate={str(k): float(v) for k, v in (data.get("finding_positive_rate") or {}).items()},
            region_positive_rate={str(k): float(v) for k, v in (data.get("region_positive_rate") or {}).items()},
            count_frequency={int(k): float(v) for k, v in (data.get("count_frequency") or {}).items()},
            default_finding_rate=float(data.get("default_finding_rate", 0.005)),
            default_region_rate=float(data.get("default_region_rate", 0.005)),
            source=str(data.get("source", "")),
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{where}: invalid priors file: {exc}") from None
