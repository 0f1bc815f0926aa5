"""radvqa.viewer: browse a generated dataset directory in a web page.

``ViewerDataset`` answers facet and query requests straight from the Parquet shards (no full
load); ``serve`` runs the local HTTP server; ``export_html`` writes a self-contained static page.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Filters", "QueryError", "ViewerDataset"]


def __getattr__(name: str) -> Any:
    # imported on first use, not with the package: query.py pulls in pyarrow.dataset and pandas
    # (~0.6 s), which every `radvqa` command (and every process that imports the CLI: a build's
    # spawned readers) would otherwise pay because the CLI registers the viewer's commands
    if name in __all__:
        from radvqa.viewer import query

        return getattr(query, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
