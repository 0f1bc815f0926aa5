"""radvqa.viewer: browse a generated dataset directory in a web page.

``ViewerDataset`` answers facet and query requests straight from the Parquet shards (no full
load); ``serve`` runs the local HTTP server; ``export_html`` writes a self-contained static page.
"""

from __future__ import annotations

from radvqa.viewer.query import Filters, QueryError, ViewerDataset

__all__ = ["Filters", "QueryError", "ViewerDataset"]
