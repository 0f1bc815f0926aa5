"""Typed records of the ontology (findings, regions, anatomies, label schemes, modifiers).

They are frozen ``msgspec.Struct``s: built once per process at load time and shared by every
stage, so nobody can mutate the cached copy by accident. Sequences are tuples for the same reason.
"""

from __future__ import annotations

import weakref

import msgspec


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """A finding, disease, device or technical observation (or a CT/MR pathology)."""

    id: str
    name: str
    category: str  # ANATOMICAL_FINDING, DISEASE, DEVICE, TECHNICAL, RADIMAGENET_PATHOLOGY, ...
    subcategory: str | None = None  # LUNG_FIELD, PLEURA, CARDIOVASCULAR, TUBES_LINES, ...
    synonyms: tuple[str, ...] = ()
    parents: tuple[str, ...] = ()  # finding ids ("is a")
    default_regions: tuple[str, ...] = ()  # region ids used when the report names none
    lateralised: bool = False  # can be left / right / bilateral
    severities: tuple[str, ...] = ()  # severity levels (modifiers.severity.order) that apply
    # synonyms this finding knowingly shares with other findings (e.g. "opacity"); a lookup of
    # such a term returns every claimant instead of failing validation
    ambiguous_synonyms: tuple[str, ...] = ()
    anatomies: tuple[str, ...] = ()  # anatomy ids (CT/MR body regions) the finding belongs to
    imagenome_name: str | None = None  # Chest ImaGenome attribute name, when it has one
    abnormal: bool = True  # False for "normal"-type entries (normal anatomy, no finding)


class Region(msgspec.Struct, frozen=True, kw_only=True):
    """An anatomical region of a chest radiograph (what reports name and boxes can cover)."""

    id: str
    name: str
    synonyms: tuple[str, ...] = ()
    parents: tuple[str, ...] = ()  # region ids this is a sub-region of
    side: str | None = None  # left, right, or None (midline / both)
    counterpart: str | None = None  # the other side's region id
    boxable: bool = True  # whether a bounding box for it can exist on an image
    imagenome_name: str | None = None  # Chest ImaGenome bbox_name (the 29 boxed regions)


class Anatomy(msgspec.Struct, frozen=True, kw_only=True):
    """A CT / MR / US body region (RadImageNet-style anatomy) with its modalities."""

    id: str
    name: str
    synonyms: tuple[str, ...] = ()
    modalities: tuple[str, ...] = ()  # CT, MR, US


class Scheme(msgspec.Struct, frozen=True, kw_only=True):
    """A dataset's label vocabulary mapped onto finding ids."""

    name: str  # nih14, chexpert14, vindr, padchest, radimagenet, openi_mesh
    title: str
    labels: dict[str, tuple[str, ...]]  # label exactly as the dataset writes it -> finding ids
    source: str | None = None  # where the label list comes from (paper, file)
    case_sensitive: bool = True
    # label -> anatomy id, for schemes whose labels belong to a body region (RadImageNet)
    label_anatomies: dict[str, str] = {}
    # label groups as the dataset documents them (VinDr: "local" / "global"). Two groups have a
    # meaning: "normal" (labels saying "no finding") and "ignored" (labels that name no finding but
    # are not "normal" either, e.g. PadChest "unchanged"); both map to [].
    groups: dict[str, tuple[str, ...]] = {}
    # how map_code reads a composite code: "mesh" (OpenI "Heading/qualifier/...") or "path"
    # (RadImageNet "[modality/]anatomy/pathology"); None: labels only
    codes: str | None = None

    @property
    def normal_labels(self) -> tuple[str, ...]:
        return self.groups.get("normal", ())

    @property
    def ignored_labels(self) -> tuple[str, ...]:
        return self.groups.get("ignored", ())


class Modifiers(msgspec.Struct, frozen=True, kw_only=True, weakref=True):
    """Modifier vocabularies: certainty cues, severity, size units, change, temporal, ..."""

    # cue kind (negation_pre, negation_post, uncertainty_pre, uncertainty_post, hypothetical,
    # historical, pseudo_negation, termination) -> phrases
    certainty: dict[str, tuple[str, ...]]
    severity_order: tuple[str, ...]  # weakest first
    severity: dict[str, tuple[str, ...]]  # level -> words meaning it
    size_units: dict[str, float]  # unit word -> millimetres per unit
    change: dict[str, tuple[str, ...]]  # new/increased/decreased/unchanged/resolved/... -> words
    temporal: dict[str, tuple[str, ...]]
    texture: dict[str, tuple[str, ...]]
    spread: dict[str, tuple[str, ...]]
    laterality: dict[str, tuple[str, ...]]  # left / right / bilateral -> words

    def severity_rank(self, level: str) -> int:
        """Position of a severity level in the order (0 = weakest); ValueError if unknown."""
        try:
            return self.severity_order.index(level)
        except ValueError:
            raise ValueError(f"unknown severity level {level!r}; known: {self.severity_order}") from None

    def to_mm(self, value: float, unit: str) -> float:
        """Convert a size to millimetres; ValueError naming the unit if unknown."""
        key = unit.strip().lower().rstrip(".")
        if key not in self.size_units:
            raise ValueError(f"unknown size unit {unit!r}; known: {sorted(self.size_units)}")
        return float(value) * self.size_units[key]

    def _word_index(self, table_name: str) -> dict[str, str]:
        # word -> level, built once per Modifiers object (the struct is frozen, so cache aside)
        cache = _INDEX_CACHE.get(id(self))
        if cache is None:
            cache = _INDEX_CACHE[id(self)] = {}
            weakref.finalize(self, _INDEX_CACHE.pop, id(self), None)
        if table_name not in cache:
            out: dict[str, str] = {}
            for key, words in getattr(self, table_name).items():
                out.setdefault(key.lower(), key)
                for w in words:
                    out.setdefault(" ".join(w.lower().split()), key)
            cache[table_name] = out
        return cache[table_name]

    def lookup(self, table_name: str, word: str) -> str | None:
        """Normalised value of a modifier word in one table (``severity``, ``change``, ``temporal``,
        ``texture``, ``spread``, ``laterality``, ``certainty``), or None."""
        return self._word_index(table_name).get(" ".join(word.lower().split()))

    def severity_of(self, word: str) -> str | None:
        return self.lookup("severity", word)

    def change_of(self, word: str) -> str | None:
        return self.lookup("change", word)


# id(Modifiers) -> table name -> word index; entries die with their object (weakref.finalize)
_INDEX_CACHE: dict[int, dict[str, dict[str, str]]] = {}


class CheckResult(msgspec.Struct, kw_only=True):
    """One integrity check of an ontology copy (what ``radvqa ontology`` prints)."""

    name: str
    passed: bool
    detail: str = ""
    errors: list[str] = []
