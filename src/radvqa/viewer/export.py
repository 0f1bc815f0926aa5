"""Static export: one self-contained HTML file with N sampled rows.

The page is the same ``index.html`` + ``app.js`` + ``app.css`` as the live viewer, inlined, with the
rows embedded as JSON; images are downscaled JPEG data URLs (each file encoded once, however many
rows use it). Boxes stay in stored-image pixels: the page's SVG overlay uses the stored size as its
viewBox, so a smaller embedded copy still lines up. Nothing is fetched when the file is opened.
"""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from radvqa.viewer.images import ImageError, encode
from radvqa.viewer.query import FACETS, NULL_TOKEN, Filters, ViewerDataset
from radvqa.viewer.server import asset_text

STATIC_CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)


def _data_url(path: Path, max_side: int, quality: int) -> str | None:
    try:
        data = encode(path, max_side=max_side, fmt="JPEG", quality=quality)
    except (ImageError, OSError):
        return None
    return "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")


def _facets_of(items: list[dict[str, Any]]) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    for name, (col, is_list) in FACETS.items():
        cnt: Counter[str] = Counter()
        present = False
        for it in items:
            if col not in it:
                continue
            present = True
            v = it[col]
            if is_list:
                cnt.update(str(x) for x in (v or []))
            else:
                cnt[NULL_TOKEN if v is None else str(v)] += 1
        if present:
            out[name] = [[v, c] for v, c in sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))]
    return out


def render_static(
    data: ViewerDataset,
    n: int = 100,
    *,
    seed: int = 0,
    filters: Filters | None = None,
    max_side: int = 512,
    quality: int = 80,
) -> tuple[str, dict[str, int]]:
    """The page text and a few counts (items, images embedded, images missing)."""
    rows = data.sample(n, seed=seed, filters=filters)
    cache: dict[str, str | None] = {}
    items: list[dict[str, Any]] = []
    missing = no_path = 0
    for row in rows:
        item = data.present(row)
        for im in item["images"]:
            if not im["path"]:  # the row names an image that has no file (e.g. a prior study's)
                no_path += 1
                im["url"] = im["data_url"] = None
                continue
            _, real = data.gate.url_for(im["path"])
            url = None
            if real is not None:
                key = str(real)
                if key not in cache:
                    cache[key] = _data_url(real, max_side, quality)
                url = cache[key]
            if url is None:
                missing += 1
            im["url"] = None  # no server behind a static file
            im["data_url"] = url
        items.append(item)
    # the reports of the sampled studies, so "Show report" works offline too
    reports = {sid: st["report"] for sid, st in data.studies(it.get("study_id") or "" for it in items).items()
               if st.get("report")}
    payload = {
        "items": items,
        "reports": reports,
        "facets": {
            "total": len(items),
            "facets": _facets_of(items),
            "manifest": data.manifest_summary(),
            "dataset": f"{data.dir.name} (sample of {len(items)} of {data.total_rows}, seed {seed})",
        },
    }
    # No "<" at all inside the <script> element: "</script" would close it early, and "<!--" then
    # "<script" switches the HTML parser into a state where the real "</script>" no longer closes it
    # (the page froze). In JSON "<" only occurs inside strings, where \u003c means the same.
    blob = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    page = asset_text("index.html")
    page = _swap(page, "css", "<style>\n" + asset_text("app.css") + "\n</style>")
    page = _swap(page, "js", "<script>\n" + asset_text("app.js").replace("</script", "<\\/script") + "\n</script>")
    page = page.replace("<!--radvqa:data-->", f'<script id="radvqa-data" type="application/json">{blob}</script>')
    page = page.replace("<!--radvqa:csp-->", f'<meta http-equiv="Content-Security-Policy" content="{STATIC_CSP}">')
    stats = {"items": len(items), "images_embedded": sum(1 for v in cache.values() if v), "images_missing": missing,
             "images_without_path": no_path}
    return page, stats


def _swap(page: str, name: str, replacement: str) -> str:
    start, end = f"<!--radvqa:{name}-->", f"<!--/radvqa:{name}-->"
    i, j = page.index(start), page.index(end) + len(end)
    return page[:i] + replacement + page[j:]


def export_html(data: ViewerDataset, out: str | os.PathLike[str], n: int = 100, **kw: Any) -> dict[str, int]:
    page, stats = render_static(data, n, **kw)
    out_path = Path(out)
    tmp = out_path.with_name(out_path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out_path)  # never leave a half-written page under the final name
    stats["bytes"] = out_path.stat().st_size
    return stats
