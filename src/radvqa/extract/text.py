"""Checks on raw report text before extraction: what cannot be read becomes a clear reason,
never an exception (empty, white space only, binary, not UTF-8, too long)."""

from __future__ import annotations

import re
from typing import Final

MAX_CHARS: Final = 100_000  # far above any real radiology report (OpenI max ~1.5k, MIMIC ~10k chars)
# Control characters other than white space, DEL, and the Unicode specials block.
_CONTROL: Final = re.compile("[\x00-\x08\x0e-\x1f\x7f\ufff0-\uffff]")
# ASCII characters that are not in _CONTROL: tab to carriage return, space to tilde
_ASCII_OK: Final = bytes(range(0x09, 0x0E)) + bytes(range(0x20, 0x7F))


def check_text(raw: object, max_chars: int = MAX_CHARS) -> tuple[str, str | None]:
    """(text, error). ``text`` is "" whenever ``error`` is set."""
    if raw is None:
        return "", "no report text"
    if isinstance(raw, (bytes, bytearray, memoryview)):
        b = bytes(raw)
        if b"\x00" in b:
            return "", "binary content (NUL bytes), not report text"
        try:
            raw = b.decode("utf-8")
        except UnicodeDecodeError as e:
            return "", f"not UTF-8 text (invalid byte at offset {e.start})"
    if not isinstance(raw, str):
        return "", f"report text must be str or bytes, got {type(raw).__name__}"
    text = raw
    if not text or text.isspace():  # (no copy, as strip() makes)
        return "", "empty report (no text)" if not text else "empty report (white space only)"
    if len(text) > max_chars:
        return "", f"report too long ({len(text):,} characters > {max_chars:,}): not a single report"
    if not text.isascii():  # ASCII text holds no surrogate: no need to encode it
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "", "text holds unpaired surrogates (undecodable bytes), not valid Unicode"
    if text.isascii():
        # the same count as _CONTROL for ASCII text (most reports): bytes.translate deletes the
        # allowed characters in one C pass; the regex's character-class test per character was
        # 7% of the work of a report whose sentences are all cached
        bad = len(text.encode("ascii").translate(None, _ASCII_OK))
    else:
        bad = len(_CONTROL.findall(text)) if _CONTROL.search(text) else 0
    if "\x00" in text or bad > max(2, len(text) // 20):
        return "", f"binary content ({bad} control characters in {len(text)}), not report text"
    return text, None


def lower_same_length(text: str) -> str:
    """The matching copy of a report: lower case, same length (offsets into it are offsets into
    ``text``; ``"İ".lower()`` has two characters, such characters are kept as they are), and
    de-identification tokens (OpenI ``XXXX``, MIMIC ``___``) blanked to spaces, so that
    "heart XXXX is slightly large" reads as "heart is slightly large" to the patterns."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    if "xxxx" in low:
        if "most xxxx" in low:
            # the mask ate "likely" (OpenI: "airspace disease most XXXX pneumonia", "most XXXX
            # representing atelectasis"; every one of the nine R2Gen train + val sentences): read as
            # the hedge it was, in the same length ("probably" is a hedge cue, context.yaml); a reader
            # of the outside pool marked "most XXXX represent small areas of scarring" stated (session 12)
            low = low.replace("most xxxx", "probably ")
        if "xxxx-a-xxxx" in low:
            # session 14: the mask ate "Port" and "Cath" but left "-A-" ("Left XXXX-a-XXXX is in
            # XXXX", CXR744, CXR765, CXR846, CXR1035, CXR2978; R2Gen train + val): a Port-A-Cath,
            # in the same length (read nothing, the device lists went without it; seed 157)
            low = low.replace("xxxx-a-xxxx", "port-a-cath")
        low = low.replace("xxxx", "    ")  # str.replace: C speed, same length
    if "___" in low:
        low = low.replace("___", "   ")
    return low
