"""Source adapters: one module per dataset format, and a registry.

```python
src = get_source("openi")
for rec in src.iter_records(inputs, ontology=onto, limit=None):   # Iterator[Study | Reject]
    ...
```
Adapters are imported lazily (on ``get_source``) so ``import radvqa.sources`` stays cheap.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

# name -> "module:Class". Order is the order of help texts.
_REGISTRY: dict[str, str] = {
    "sample": "radvqa.sources.sample:SampleSource",
    "openi": "radvqa.sources.openi:OpenISource",
    "nih-cxr14": "radvqa.sources.nih:NIHSource",
    "vindr-cxr": "radvqa.sources.vindr:VinDrSource",
    "mimic-cxr": "radvqa.sources.mimic:MimicSource",
    "chest-imagenome": "radvqa.sources.imagenome:ImaGenomeSource",
    "reflacx": "radvqa.sources.reflacx:ReflacxSource",
    "eye-gaze": "radvqa.sources.eyegaze:EyeGazeSource",
    "chexpert": "radvqa.sources.chexpert:CheXpertSource",
    "padchest": "radvqa.sources.padchest:PadChestSource",
    "radimagenet": "radvqa.sources.radimagenet:RadImageNetSource",
    "csv": "radvqa.sources.generic:CsvSource",
    "dicom": "radvqa.sources.dicom:DicomSource",
    # written by the I/O engineer; any class in the module with ``iter_records`` is taken
    "synthetic": "radvqa.sources.synthetic:",
}

SOURCES: tuple[str, ...] = tuple(_REGISTRY)


def get_source(name: str) -> Any:
    """An adapter instance by registry name. Raises KeyError listing the known names."""
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(SOURCES)}") from None
    mod_name, _, cls_name = target.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name == mod_name:
            raise KeyError(f"source {name!r} is not available yet ({mod_name} missing)") from None
        raise
    if cls_name:
        return getattr(mod, cls_name)()
    for attr in ("SyntheticSource", "Source"):
        cls = getattr(mod, attr, None)
        if isinstance(cls, type) and hasattr(cls, "iter_records"):
            return cls()
    for v in vars(mod).values():
        if isinstance(v, type) and v.__module__ == mod_name and hasattr(v, "iter_records"):
            return v()
    raise KeyError(f"source {name!r}: {mod_name} has no class with iter_records")


def sample_inputs() -> list[Path]:
    """Paths of the sample bundled in the package (OpenI XML folder, NIH tables and images)."""
    from radvqa.sources.sample import sample_inputs as _inputs

    return _inputs()


__all__ = ["SOURCES", "get_source", "sample_inputs"]
