"""The synthetic source: realistic chest X-ray studies at any size, for benchmarks and tests.

``radvqa build synthetic --studies N`` yields N ``Study`` records with:
- patients with several studies (follow-ups, ISO dates in time order) whose findings persist,
  change (increased / decreased / unchanged / new) or resolve, as real follow-ups do;
- findings drawn with NIH ChestX-ray14 / CheXpert prevalences (``data/synthetic.yaml``), each with
  a region, side, severity, sometimes a size, a dataset label mapped through the ontology, and
  expert boxes from one or two readers inside that region;
- one frontal image (PA/AP, NIH-like sizes) and often a lateral; region boxes for the frontal image;
- a report (EXAMINATION / INDICATION / COMPARISON / FINDINGS / IMPRESSION) stating positives with
  their attributes, typical explicit negatives and normal statements.

Everything is drawn from ``random.Random`` seeded by (seed, patient number), and a patient's number of
studies from a hash of the same pair, so a patient's studies are the same whatever ``limit`` or order:
the output is deterministic for a seed. Images do not
exist on disk (paths are placeholders); sizes are set so boxes can be checked.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from radvqa.model import Box, Image, Label, Reject, Study
from radvqa.sources.base import Source, SourceError
from radvqa.sources import SOURCES

Record = Study | Reject

@dataclass(frozen=True)
class _Finding:
    scheme: str
    label: str
    findings: tuple[str, ...]
    p: float
    phrase: str
    regions: tuple[str, ...]
    severities: tuple[str, ...]
    box_p: float
    size_mm: tuple[int, int] | None
    unsided: bool
    bilateral: bool
    where: bool


@dataclass
class _Profile:
    raw: dict[str, Any]
    findings: list[_Finding]
    cum: list[float]
    regions: dict[str, tuple[float, float, float, float]]
    region_names: dict[str, str]
    region_side: dict[str, str | None]
    no_finding: list[str] | None


def _load_yaml(path: Path | None) -> dict[str, Any]:
    if path is None:
        text = resources.files("radvqa.sources").joinpath("data/synthetic.yaml").read_text(encoding="utf-8")
        where = "radvqa/sources/data/synthetic.yaml"
    else:
        text = Path(path).read_text(encoding="utf-8")
        where = str(path)
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "findings" not in data or "regions" not in data:
        raise SourceError(f"{where}: not a synthetic profile (needs 'findings' and 'regions')")
    data["_where"] = where
    return data


def _build_profile(raw: dict[str, Any], onto: Any) -> _Profile:
    where = raw["_where"]
    regions: dict[str, tuple[float, float, float, float]] = {}
    names: dict[str, str] = {}
    sides: dict[str, str | None] = {}
    for rid, frac in raw["regions"].items():
        if onto is not None and rid not in onto.regions:
            raise SourceError(f"{where}: region {rid!r} is not an ontology region id")
        x1, y1, x2, y2 = (float(v) for v in frac)
        if not (0 <= x1 < x2 <= 1 and 0 <= y1 < y2 <= 1):
            raise SourceError(f"{where}: region {rid!r} box {frac} is not inside [0, 1]")
        regions[rid] = (x1, y1, x2, y2)
        reg = onto.regions[rid] if onto is not None else None
        names[rid] = getattr(reg, "name", rid.replace("_", " "))
        sides[rid] = getattr(reg, "side", None) or ("right" if rid.startswith("right_") else "left" if rid.startswith("left_") else None)
    findings: list[_Finding] = []
    for i, f in enumerate(raw["findings"]):
        try:
            fids = tuple(onto.map_label(f["scheme"], f["label"])) if onto is not None else (f["label"].lower(),)
        except KeyError as exc:
            raise SourceError(f"{where}: findings[{i}]: {exc.args[0] if exc.args else exc}") from None
        for r in f["regions"]:
            if r not in regions:
                raise SourceError(f"{where}: findings[{i}] ({f['label']}): region {r!r} has no box fraction in 'regions'")
        sz = f.get("size_mm")
        findings.append(_Finding(
            scheme=f["scheme"], label=f["label"], findings=fids, p=float(f["p"]), phrase=f["phrase"],
            regions=tuple(f["regions"]), severities=tuple(f.get("severities") or ()), box_p=float(f.get("box_p", 0.0)),
            size_mm=(int(sz[0]), int(sz[1])) if sz else None, unsided=bool(f.get("unsided", False)),
            bilateral=bool(f.get("bilateral", False)), where=bool(f.get("where", True)),
        ))
    cum, acc = [], 0.0
    for f in findings:
        acc += f.p
        cum.append(acc)
    no_finding: list[str] | None = None
    if onto is not None:
        try:
            no_finding = list(onto.map_label("nih14", "No Finding"))
        except KeyError:
            no_finding = None
    return _Profile(raw, findings, cum, regions, names, sides, no_finding)


_PROFILES: dict[tuple[str | None, int], _Profile] = {}


def _cached_profile(path: str | None, onto: Any) -> _Profile:
    key = (path, id(onto))
    prof = _PROFILES.get(key)
    if prof is None:
        prof = _PROFILES[key] = _build_profile(_load_yaml(Path(path) if path else None), onto)
    return prof


_M64 = (1 << 64) - 1


def _study_counts(prof: _Profile, seed: int, n: int) -> Any:
    """Studies per patient for patients 1, 2, ... until they add up to at least ``n`` (the last one
    is cut by the caller). Patient ``p``'s count is a function of (seed, p) alone, a geometric draw
    (mean ``mean_studies_per_patient``, capped at ``max_studies_per_patient``) by inversion of a
    splitmix64 hash, so any patient range is computed without the patients before it. numpy is
    imported here, not at the top: the parts' counts travel in their specs, so a reader process
    never imports it (0.1-0.15 s a process here, more with 16 readers starting at once).

    Returns a numpy int64 array of the counts (the last one uncut), computed in chunks of about the
    patients needed (~n / mean), cached per process and extended for a larger ``n``."""
    import numpy as np

    raw = prof.raw
    mean = float(raw.get("mean_studies_per_patient", 2.0))
    cap = max(1, int(raw.get("max_studies_per_patient", 10)))
    key = (id(prof), seed, mean, cap)
    got = _COUNTS.get(key)
    if got is not None and int(got.sum()) >= n:
        return got
    chunks = [got] if got is not None else []
    have = 0 if got is None else len(got)
    total = 0 if got is None else int(got.sum())
    while total < n:
        # about the patients still needed (mean studies each), and at least 1,024 a chunk
        size = max(1024, int((n - total) / max(1.0, min(mean, cap)) * 1.1))
        k = _counts_of(np, seed, have + 1, have + size, mean, cap)
        chunks.append(k)
        have += size
        total += int(k.sum())
    got = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    cut = int(np.searchsorted(np.cumsum(got), n)) + 1
    got = _COUNTS[key] = got[:cut]
    return got


def _counts_of(np: Any, seed: int, first: int, last: int, mean: float, cap: int) -> Any:
    """The study counts of patients ``first..last`` (see ``_study_counts``)."""
    pno = np.arange(first, last + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64((seed << 32) & _M64) ^ (pno * np.uint64(0x9E3779B1))
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53  # in (0, 1)
    if mean <= 1.0:
        return np.ones(len(pno), dtype=np.int64)
    # P(k >= j) = (1 - 1/mean) ** (j - 1): the old loop's "another study with probability 1 - 1/mean"
    return np.minimum(1 + np.floor(np.log(u) / np.log(1.0 - 1.0 / mean)), cap).astype(np.int64)


_COUNTS: dict[tuple[int, int, float, int], Any] = {}


@dataclass
class _Active:
    f: _Finding
    region: str
    severity: str | None
    size: int | None


@SOURCES.register("synthetic")
class SyntheticSource(Source):
    name = "synthetic"
    description = "synthetic studies with realistic finding frequencies, regions, boxes and follow-ups"

    def __init__(self, studies: int = 1000, seed: int = 0, profile: str | Path | None = None) -> None:
        self.studies = studies
        self.seed = seed
        self.profile = str(profile) if profile else None

    # inputs: optional path of another profile YAML (same layout as data/synthetic.yaml)
    def iter_records(self, inputs: Iterable[Path | str] | None = None, *, ontology: Any = None,
                     limit: int | None = None) -> Iterator[Record]:
        paths = [Path(p) for p in inputs or []]
        prof = self._profile(paths, ontology)
        n = self.studies if limit is None else min(self.studies, limit)
        counts = _study_counts(prof, self.seed, n)
        made = 0
        for pno, k in enumerate(counts.tolist(), 1):
            if made >= n:
                break
            yield from self._patient(prof, pno, min(k, n - made))
            made += k

    def _profile(self, paths: list[Path], ontology: Any) -> _Profile:
        for p in paths:
            if not p.is_file():
                raise SourceError(f"synthetic: input must be a profile YAML file, got {p}")
        if len(paths) > 1:
            raise SourceError("synthetic: at most one profile YAML as input")
        if ontology is None:
            from radvqa.ontology import load_ontology

            ontology = load_ontology()
        return _cached_profile(str(paths[0]) if paths else self.profile, ontology)

    # -- the parallel read phase (run/reader.py): consecutive patient ranges -------------------------
    def plan_parts(self, inputs: Iterable[Path | str], n_parts: int, *, ontology: Any = None,
                   limit: int | None = None) -> list[dict[str, Any]]:
        """Up to ``n_parts`` consecutive patient ranges of about equal study counts, from the
        patients' study counts alone (``_study_counts``: vectorised, ~5 ms for 200k studies where a
        Python loop over the patients took 0.3 s here and ~0.7 s on the 16-core device, all of it
        before any reader could start); ``iter_part`` makes the studies."""
        prof = self._profile([Path(p) for p in inputs or []], ontology)
        n = self.studies if limit is None else min(self.studies, limit)
        if n <= 0:
            return []
        import numpy as np

        counts = _study_counts(prof, self.seed, n)
        cum = np.cumsum(counts)
        k = max(1, min(n_parts, len(cum)))
        # the last patient of part i: the first whose running total reaches i/k of the studies
        ends = sorted({int(np.searchsorted(cum, -(-n * i // k))) for i in range(1, k + 1)})
        parts: list[dict[str, Any]] = []
        first, start = 1, 0
        for e in ends:
            # the part's own study counts go with it (a reader then needs no numpy)
            parts.append({"first": first, "last": e + 1, "start": start, "total": n,
                          "counts": counts[first - 1 : e + 1].tolist()})
            first, start = e + 2, int(cum[e])
        return parts

    def iter_part(self, inputs: Iterable[Path | str], part: dict[str, Any], *,
                  ontology: Any = None) -> Iterator[Record]:
        """The studies of patients ``first..last``, exactly as ``iter_records`` yields them."""
        prof = self._profile([Path(p) for p in inputs or []], ontology)
        made = int(part["start"])
        n = int(part["total"])
        first, last = int(part["first"]), int(part["last"])
        counts = part.get("counts")
        if counts is None:
            counts = _study_counts(prof, self.seed, n)[first - 1 : last].tolist()
        for pno, k in zip(range(first, last + 1), counts):
            yield from self._patient(prof, pno, min(k, n - made))
            made += k

    # -- one patient ---------------------------------------------------------------------------------
    def _seed_of(self, pno: int) -> int:
        return (self.seed << 32) ^ (pno * 0x9E3779B1)

    def _patient(self, prof: _Profile, pno: int, k: int) -> list[Study]:
        """Patient ``pno``'s first ``k`` studies (``k``: its study count, cut at the build's total)."""
        raw = prof.raw
        rng = random.Random(self._seed_of(pno))
        pid = f"synthetic:p{pno:07d}"
        day = date(2010, 1, 1) + timedelta(days=rng.randrange(0, 3000))
        active: list[_Active] = []
        out: list[Study] = []
        prev_day: date | None = None
        lo_d, hi_d = raw.get("days_between_studies", [1, 400])
        for j in range(k):
            sid = f"synthetic:s{pno:07d}{j:02d}"
            active, changes = self._evolve(prof, rng, active, first=(j == 0))
            out.append(self._study(prof, rng, pid, sid, day, prev_day, active, changes))
            prev_day = day
            day = day + timedelta(days=rng.randint(int(lo_d), int(hi_d)))
        return out

    def _new_finding(self, prof: _Profile, rng: random.Random) -> _Active:
        f = prof.findings[_pick(prof.cum, rng.random() * prof.cum[-1])]
        region = rng.choice(f.regions)
        sev = rng.choice(f.severities) if f.severities else None
        size = rng.randint(*f.size_mm) if f.size_mm else None
        return _Active(f, region, sev, size)

    def _evolve(self, prof: _Profile, rng: random.Random, active: list[_Active], first: bool
                ) -> tuple[list[_Active], list[tuple[_Active, str]]]:
        """Next study's findings and the change words the report states."""
        raw = prof.raw
        changes: list[tuple[_Active, str]] = []
        if first:
            cur: list[_Active] = []
            if rng.random() >= float(raw.get("normal_fraction", 0.5)):
                # 1.57 labels per abnormal image (NIH): 1 + a geometric tail
                n = 1
                while n < 5 and rng.random() < 0.36:
                    n += 1
                seen: set[str] = set()
                for _ in range(n):
                    a = self._new_finding(prof, rng)
                    if a.f.label not in seen:
                        seen.add(a.f.label)
                        cur.append(a)
            return cur, changes
        weights = raw.get("change_on_followup", {"unchanged": 1.0})
        words, ws = list(weights), [float(v) for v in weights.values()]
        cur = []
        for a in active:
            if rng.random() > float(raw.get("persist_probability", 0.6)):
                changes.append((a, "resolved"))
                continue
            w = rng.choices(words, ws)[0]
            if w in ("resolved", "new"):
                w = "unchanged"
            if w in ("increased", "decreased") and a.f.severities:
                i = a.f.severities.index(a.severity) if a.severity in a.f.severities else 0
                i = min(len(a.f.severities) - 1, i + 1) if w == "increased" else max(0, i - 1)
                a = _Active(a.f, a.region, a.f.severities[i], a.size)
            cur.append(a)
            changes.append((a, w))
        if rng.random() < float(weights.get("new", 0.1)):
            a = self._new_finding(prof, rng)
            if all(b.f.label != a.f.label for b in cur):
                cur.append(a)
                changes.append((a, "new"))
        return cur, changes

    def _study(self, prof: _Profile, rng: random.Random, pid: str, sid: str, day: date, prev_day: date | None,
               active: list[_Active], changes: list[tuple[_Active, str]]) -> Study:
        raw = prof.raw
        lo_w, hi_w, mode_w = raw.get("width", [1143, 3827, 2518])
        lo_h, hi_h, mode_h = raw.get("height", [966, 4715, 2544])
        w = int(rng.triangular(lo_w, hi_w, mode_w))
        h = int(rng.triangular(lo_h, hi_h, mode_h))
        views = raw.get("views", {"PA": 1.0})
        view = rng.choices(list(views), [float(v) for v in views.values()])[0]
        num = sid.split(":s", 1)[1]
        pnum = pid.split(":p", 1)[1]
        folder = f"synthetic/p{pnum}/s{num}"
        images = [Image(id=f"{num}-1", path=f"{folder}/{num}-1.jpg", width=w, height=h, view=view, modality="DX")]
        if rng.random() < float(raw.get("lateral_probability", 0.0)):
            images.append(Image(id=f"{num}-2", path=f"{folder}/{num}-2.jpg", width=h, height=h, view="LATERAL", modality="DX"))
        frontal = images[0]

        labels: list[Label] = []
        boxes: list[Box] = []
        lo_r, hi_r = raw.get("reader_count", [1, 1])
        for a in active:
            labels.append(Label(scheme=a.f.scheme, name=a.f.label, value=1, findings=list(a.f.findings)))
            if rng.random() < a.f.box_p:
                base = _sub_box(rng, prof.regions[a.region], w, h)
                fid = a.f.findings[0] if a.f.findings else None
                for r in range(rng.randint(int(lo_r), int(hi_r))):
                    jx, jy = (base[2] - base[0]) * 0.06, (base[3] - base[1]) * 0.06
                    x1 = _clip(base[0] + rng.uniform(-jx, jx), 0, w - 2)
                    y1 = _clip(base[1] + rng.uniform(-jy, jy), 0, h - 2)
                    x2 = _clip(base[2] + rng.uniform(-jx, jx), x1 + 1, w)
                    y2 = _clip(base[3] + rng.uniform(-jy, jy), y1 + 1, h)
                    boxes.append(Box(image_id=frontal.id, x1=round(x1, 1), y1=round(y1, 1), x2=round(x2, 1),
                                     y2=round(y2, 1), source="expert", reader=f"synthetic-r{r + 1}", label=fid))
        if not active and prof.no_finding is not None:
            labels.append(Label(scheme="nih14", name="No Finding", value=1, findings=list(prof.no_finding)))
        region_boxes = [
            Box(image_id=frontal.id, x1=round(f[0] * w, 1), y1=round(f[1] * h, 1), x2=round(f[2] * w, 1),
                y2=round(f[3] * h, 1), source="region", label=rid)
            for rid, f in prof.regions.items()
        ]
        report = self._report(prof, rng, images, active, changes, prev_day)
        return Study(
            id=sid, patient_id=pid, source="synthetic", images=images, report_text=report, labels=labels,
            boxes=boxes, region_boxes=region_boxes, study_time=day.isoformat(), meta={"synthetic": "1"},
        )

    def _report(self, prof: _Profile, rng: random.Random, images: list[Image], active: list[_Active],
                changes: list[tuple[_Active, str]], prev_day: date | None) -> str:
        raw = prof.raw
        exam = "Chest radiograph, " + (f"{images[0].view} and lateral." if len(images) > 1 else f"{images[0].view} view.")
        if active:
            ind = rng.choice(["Shortness of breath.", "Cough and fever.", f"Follow-up of {active[0].f.phrase}.",
                              "Evaluate for pneumonia.", "Chest pain."])
        else:
            ind = rng.choice(["Cough.", "Preoperative evaluation.", "Chest pain.", "Shortness of breath."])
        comparison = f"Comparison: {prev_day.isoformat()}." if prev_day else "Comparison: None."
        change_of = {id(a): wd for a, wd in changes}
        findings: list[str] = []
        impression: list[str] = []
        for a in active:
            s = _describe(prof, a, change_of.get(id(a)))
            findings.append(s)
            impression.append(s)
        for a, wd in changes:
            if wd == "resolved":
                s = f"Previously seen {a.f.phrase} has resolved."
                findings.append(s)
                impression.append(s)
        negs = [s for s in raw.get("negative_sentences", []) if not any(a.f.phrase.split()[-1] in s.lower() for a in active)]
        findings.extend(rng.sample(negs, k=min(len(negs), rng.randint(1, 2))))
        norms = raw.get("normal_sentences", [])
        if norms:
            findings.extend(rng.sample(norms, k=min(len(norms), 1 if active else 2)))
        if not impression:
            impression.append("No acute cardiopulmonary process.")
        return (f"EXAMINATION: {exam}\nINDICATION: {ind}\nCOMPARISON: {comparison.split(': ', 1)[1]}\n"
                f"FINDINGS: {' '.join(findings)}\nIMPRESSION: {' '.join(impression)}\n")


def _describe(prof: _Profile, a: _Active, change: str | None) -> str:
    """One report sentence: change word, size or severity, side or extent, phrase, location."""
    words: list[str] = []
    if change in ("unchanged", "increased", "decreased", "new"):
        words.append(change)
    if a.size:
        words.append(f"{a.size} mm")
    elif a.severity:
        words.append(a.severity)
    if a.f.bilateral:
        words.append("bilateral")
    elif a.f.unsided and prof.region_side.get(a.region) and a.f.where:
        words.append(prof.region_side[a.region] or "")
    text = " ".join(words + [a.f.phrase])
    if a.size and not change:
        text = f"a {text}"
    where = f" in the {prof.region_names.get(a.region, a.region)}" if (a.f.where and not a.f.bilateral) else ""
    s = f"{text}{where}."
    return s[0].upper() + s[1:]


def _pick(cum: list[float], x: float) -> int:
    lo, hi = 0, len(cum) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _clip(v: float, lo: float, hi: float) -> float:
    return lo if v < lo else hi if v > hi else v


def _sub_box(rng: random.Random, frac: tuple[float, float, float, float], w: int, h: int) -> tuple[float, float, float, float]:
    """A box covering 30-80% of the region's width and height, placed at random inside it."""
    x1, y1, x2, y2 = frac[0] * w, frac[1] * h, frac[2] * w, frac[3] * h
    bw = (x2 - x1) * rng.uniform(0.3, 0.8)
    bh = (y2 - y1) * rng.uniform(0.3, 0.8)
    bx = rng.uniform(x1, x2 - bw)
    by = rng.uniform(y1, y2 - bh)
    return bx, by, bx + bw, by + bh
