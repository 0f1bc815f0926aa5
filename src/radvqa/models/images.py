"""Image loading and resizing for model input, and the box coordinate bookkeeping that goes with it.

Convention (contract, see radvqa.model): boxes in predictions are pixels of the *stored* image file.
A model sees a possibly resized copy (`sent_size`); `radvqa.models.boxes` maps its boxes back with the
ratio stored_size / seen size, so resizing for the model never leaks into the predictions.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_DICOM_SUFFIXES = (".dcm", ".dicom")


@dataclass(frozen=True)
class ImagePrep:
    """How images are prepared for a model. Part of the cache key and the run metadata."""

    max_side: int | None = 1024  # longest side sent to the model; None keeps the stored size
    format: str = "auto"  # auto: send the file's own bytes when no resize is needed, else PNG

    def as_dict(self) -> dict[str, Any]:
        return {"max_side": self.max_side, "format": self.format}


@dataclass(frozen=True)
class LoadedImage:
    path: str
    sha256: str  # of the stored file's bytes
    stored_size: tuple[int, int]  # (width, height) of the stored file
    sent_size: tuple[int, int]  # (width, height) of what the model receives
    data: bytes = field(repr=False)  # encoded image sent to the model
    mime: str = "image/png"

    def data_url(self) -> str:
        import base64

        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def pil(self) -> Any:
        """The sent image as an RGB PIL image (decoded on demand: HTTP adapters never need it)."""
        from PIL import Image

        img = Image.open(io.BytesIO(self.data))
        return img.convert("RGB")


class ImageLoadError(ValueError):
    pass


def _open_dicom(raw: bytes, path: str) -> Any:
    import numpy as np
    import pydicom
    from PIL import Image

    try:
        ds = pydicom.dcmread(io.BytesIO(raw))
        arr = ds.pixel_array.astype("float32")
    except Exception as exc:  # pydicom raises many types for broken files
        raise ImageLoadError(f"cannot decode DICOM {path}: {exc}") from exc
    if arr.ndim == 3 and arr.shape[-1] not in (3, 4):
        arr = arr[0]  # multi-frame: first frame
    lo, hi = float(arr.min()), float(arr.max())
    arr = (arr - lo) / (hi - lo) * 255.0 if hi > lo else arr * 0.0
    if str(getattr(ds, "PhotometricInterpretation", "")) == "MONOCHROME1":
        arr = 255.0 - arr  # MONOCHROME1 stores inverted grey levels
    return Image.fromarray(arr.astype(np.uint8))


def load_image(path: str | Path, prep: ImagePrep = ImagePrep()) -> LoadedImage:
    """Read one image file (JPEG/PNG/... or DICOM) and prepare what is sent to the model."""
    from PIL import Image, UnidentifiedImageError

    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ImageLoadError(f"cannot read image {p}: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(raw).hexdigest()
    if p.suffix.lower() in _DICOM_SUFFIXES:
        img = _open_dicom(raw, str(p))
        src_format = None
    else:
        try:
            img = Image.open(io.BytesIO(raw))
            img.load()
        except (UnidentifiedImageError, OSError) as exc:
            raise ImageLoadError(f"cannot decode image {p}: {exc}") from exc
        src_format = img.format
    width, height = img.size
    scale = 1.0
    if prep.max_side and max(width, height) > prep.max_side:
        scale = prep.max_side / max(width, height)
    sent = (max(1, round(width * scale)), max(1, round(height * scale)))
    passthrough = (
        prep.format == "auto" and scale == 1.0 and src_format in ("JPEG", "PNG")
        and img.mode in ("L", "RGB", "RGBA", "P")
    )
    if passthrough:
        data, mime = raw, f"image/{src_format.lower()}"
    else:
        if img.mode not in ("L", "RGB"):
            # 16-bit / float greys: stretch to 8 bits rather than clip
            if img.mode in ("I", "I;16", "I;16B", "F"):
                import numpy as np

                arr = np.asarray(img, dtype="float32")
                lo, hi = float(arr.min()), float(arr.max())
                arr = (arr - lo) / (hi - lo) * 255.0 if hi > lo else arr * 0.0
                img = Image.fromarray(arr.astype("uint8"))
            else:
                img = img.convert("RGB")
        if sent != (width, height):
            img = img.resize(sent, Image.Resampling.BICUBIC)
        buf = io.BytesIO()
        fmt = "JPEG" if prep.format == "jpeg" else "PNG"
        img.save(buf, format=fmt, **({"quality": 95} if fmt == "JPEG" else {"optimize": False}))
        data, mime = buf.getvalue(), f"image/{fmt.lower()}"
    return LoadedImage(
        path=str(p), sha256=digest, stored_size=(width, height), sent_size=sent, data=data, mime=mime
    )
