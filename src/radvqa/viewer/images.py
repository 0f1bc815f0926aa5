"""Image sizes and browser-ready copies for the viewer.

Browsers show JPEG/PNG/GIF/WebP/BMP themselves; those files are served as they are. DICOM and
TIFF (and 16-bit greys) are decoded here and sent as 8-bit PNG/JPEG. Box coordinates never change:
the page draws them in the stored file's pixel space (its size is the SVG viewBox), whatever size
the copy it shows has.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

BROWSER_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp"})
DICOM_SUFFIXES = frozenset({".dcm", ".dicom"})


class ImageError(ValueError):
    pass


def browser_ready(path: Path) -> bool:
    return path.suffix.lower() in BROWSER_SUFFIXES


def image_size(path: Path) -> tuple[int, int] | None:
    """(width, height) of the stored file from its header, or None when unreadable."""
    try:
        if path.suffix.lower() in DICOM_SUFFIXES:
            import pydicom

            ds = pydicom.dcmread(path, stop_before_pixels=True)
            return int(ds.Columns), int(ds.Rows)
        from PIL import Image

        with Image.open(path) as im:
            return int(im.width), int(im.height)
    except Exception:  # noqa: BLE001 - pydicom/Pillow raise many types; unreadable = no size
        return None


def _stretch(arr: Any) -> Any:
    import numpy as np

    arr = arr.astype(np.float64)
    lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
    if hi <= lo:
        return np.zeros(arr.shape, dtype=np.uint8)
    return ((arr - lo) * (255.0 / (hi - lo))).clip(0, 255).astype(np.uint8)


def open_8bit(path: Path) -> Any:
    """The file as an 8-bit PIL image (L or RGB)."""
    from PIL import Image, UnidentifiedImageError

    if path.suffix.lower() in DICOM_SUFFIXES:
        import pydicom

        try:
            ds = pydicom.dcmread(path)
            arr = ds.pixel_array
            try:  # the window the modality says to show, when the file has one
                from pydicom.pixels import apply_voi_lut

                arr = apply_voi_lut(arr, ds)
            except Exception:  # noqa: BLE001 - older pydicom or no VOI data: plain min-max
                pass
        except Exception as exc:  # noqa: BLE001
            raise ImageError(f"cannot decode DICOM {path.name}: {exc}") from exc
        if arr.ndim == 3 and arr.shape[-1] not in (3, 4):
            arr = arr[0]  # multi-frame: first frame
        out = _stretch(arr)
        if str(getattr(ds, "PhotometricInterpretation", "")) == "MONOCHROME1":
            out = 255 - out  # stored inverted
        return Image.fromarray(out)
    try:
        img = Image.open(path)
        img.load()
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise ImageError(f"cannot decode image {path.name}: {exc}") from exc
    if img.mode in ("L", "RGB"):
        return img
    if img.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        import numpy as np

        return Image.fromarray(_stretch(np.asarray(img)))
    return img.convert("RGB")


def encode(path: Path, *, max_side: int | None, fmt: str = "PNG", quality: int = 85) -> bytes:
    """An 8-bit copy of the file, at most ``max_side`` pixels on its longest side."""
    from PIL import Image

    img = open_8bit(path)
    if max_side and max(img.size) > max_side:
        img.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    if fmt.upper() == "JPEG":
        img.save(buf, format="JPEG", quality=quality, optimize=True)
    else:
        img.save(buf, format="PNG")
    return buf.getvalue()
