"""Source adapters: one module per dataset format, and a registry.

```python
src = get_source("openi")
for rec in src.iter_records(inputs, ontology=onto, limit=None):   # Iterator[Study | Reject]
    ...
```
Adapters are imported lazily (on ``get_source``) so ``import radvqa.sources`` stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from radvqa.registry import Registry

# every source module registers its class with @SOURCES.register(name); they are imported on the
# first lookup, in this order (the order of help texts)
SOURCES: Registry[type] = Registry("source", modules=(
    "radvqa.sources.sample", "radvqa.sources.openi", "radvqa.sources.nih", "radvqa.sources.vindr",
    "radvqa.sources.mimic", "radvqa.sources.imagenome", "radvqa.sources.reflacx", "radvqa.sources.eyegaze",
    "radvqa.sources.radgraph", "radvqa.sources.lunguage",
    "radvqa.sources.chexpert", "radvqa.sources.padchest",
    "radvqa.sources.radimagenet", "radvqa.sources.generic", "radvqa.sources.dicom", "radvqa.sources.synthetic",
))


def get_source(name: str) -> Any:
    """An adapter instance by registry name. Raises KeyError listing the known names."""
    return SOURCES.get(name)()


def sample_inputs() -> list[Path]:
    """Paths of the sample bundled in the package (OpenI XML folder, NIH tables and images)."""
    from radvqa.sources.sample import sample_inputs as _inputs

    return _inputs()


__all__ = ["SOURCES", "get_source", "sample_inputs"]
