"""`hf:PATH_OR_ID` — chat-template VLMs through transformers (Qwen2-VL / Qwen2.5-VL, LLaVA-style,
Gemma-3 / MedGemma-style): AutoProcessor + AutoModelForImageTextToText, batched, greedy by default.

A local directory is loaded with local_files_only=True; only a hub id the user typed can download
(and HF_HUB_OFFLINE=1 forbids even that).
"""

from __future__ import annotations

import hashlib
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import yaml

from radvqa.models.base import AdapterError, Request, Response
from radvqa.models.registry import ADAPTERS

_DTYPES = ("auto", "float32", "bfloat16", "float16")


def _box_table() -> dict[str, Any]:
    res = resources.files("radvqa.models") / "hf_models.yaml"
    return yaml.safe_load(res.read_text(encoding="utf-8"))


def _fingerprint(path: Path) -> str:
    """Changes when the checkpoint changes (config + weight file names and sizes): cache safety
    without hashing gigabytes."""
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if f.name.endswith((".json", ".jinja")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        elif f.suffix in (".safetensors", ".bin", ".pt"):
            h.update(f"{f.name}:{f.stat().st_size}".encode())
    return h.hexdigest()[:16]


@ADAPTERS.register("hf")
class HFAdapter:
    default_concurrency = 1  # one model, one device: batches, not threads

    def __init__(
        self,
        name: str,
        *,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        box_convention: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise AdapterError(
                "hf: models need torch and transformers: pip install 'radvqa[hf]' "
                "(CPU: pip install torch==2.13.0 first)"
            ) from exc
        self._torch = torch
        p = Path(name).expanduser()
        self.local = p.exists()
        if self.local:
            if not p.is_dir():
                raise AdapterError(f"hf: {p} is not a model directory")
            src = str(p.resolve())
            fingerprint = _fingerprint(p)
        elif name.startswith((".", "/", "~")) or name.count("/") != 1:
            raise AdapterError(f"hf: no model directory {name!r} (and it is not a hub id ORG/NAME)")
        else:
            src, fingerprint = name, None  # a hub id the user asked for: may download
        self.spec = f"hf:{name}"
        self.source = src
        if dtype is not None and dtype not in _DTYPES:
            raise AdapterError(f"hf: --dtype must be one of {', '.join(_DTYPES)}")
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        kw: dict[str, Any] = {"local_files_only": self.local, "trust_remote_code": trust_remote_code}
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(src, **kw)
        except Exception as exc:
            raise AdapterError(f"hf: cannot load a processor from {name}: {exc}") from exc
        tok = getattr(self.processor, "tokenizer", None)
        if tok is not None:
            tok.padding_side = "left"  # generation appends on the right: pad on the left
        torch_dtype = self._torch_dtype(dtype or "auto")
        self.dtype = str(torch_dtype).removeprefix("torch.")  # resolved: part of the cache key
        load_kw = dict(kw)
        if device == "auto":
            load_kw["device_map"] = "auto"
        self.model = self._load_model(transformers, src, torch_dtype, load_kw)
        if device != "auto":
            self.model.to(device)
        self.model.eval()
        self.model_type = str(getattr(self.model.config, "model_type", ""))
        table = _box_table()
        self.box_convention = box_convention or table["box_convention"].get(
            self.model_type, table["default_box_convention"]
        )
        self.default_batch_size = batch_size or 8
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.fingerprint = fingerprint
        self._lock = threading.Lock()  # one generate at a time on the device
        self._system_ok = True

    def _torch_dtype(self, dtype: str) -> Any:
        torch = self._torch
        if dtype == "auto":
            if self.device.startswith("cuda") or self.device == "auto":
                ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                return torch.bfloat16 if ok else torch.float16
            return torch.float32
        return getattr(torch, dtype)

    def _load_model(self, transformers: Any, src: str, torch_dtype: Any, kw: dict[str, Any]) -> Any:
        classes = [
            getattr(transformers, n)
            for n in ("AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModelForCausalLM")
            if hasattr(transformers, n)
        ]
        errors = []
        # transformers 5 renamed torch_dtype -> dtype; 4.x would take "dtype" as a config field
        major = int(str(transformers.__version__).split(".")[0])
        dkey = "dtype" if major >= 5 else "torch_dtype"
        for cls in classes:
            try:
                return cls.from_pretrained(src, **{dkey: torch_dtype}, **kw)
            except (ValueError, KeyError) as exc:  # config not mapped to this auto class
                errors.append(f"{cls.__name__}: {exc}")
            except OSError as exc:
                raise AdapterError(f"hf: cannot load weights from {src}: {exc}") from exc
        raise AdapterError(f"hf: no transformers class loads {src}: " + " | ".join(errors[-3:]))

    def params(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "fingerprint": self.fingerprint,
            "model_type": self.model_type,
            "dtype": self.dtype,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "box_convention": self.box_convention,
        }

    def run_params(self) -> dict[str, Any]:
        import transformers

        return {
            "device": self.device,
            "torch": self._torch.__version__,
            "transformers": transformers.__version__,
        }

    def _messages(self, req: Request) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = [{"type": "image"} for _ in req.images]
        prompt = req.prompt
        msgs: list[dict[str, Any]] = []
        if req.system:
            if self._system_ok:
                msgs.append({"role": "system", "content": [{"type": "text", "text": req.system}]})
            else:
                prompt = req.system + "\n\n" + prompt
        content.append({"type": "text", "text": prompt})
        msgs.append({"role": "user", "content": content})
        return msgs

    def _chat(self, req: Request) -> str:
        try:
            return self.processor.apply_chat_template(
                self._messages(req), add_generation_prompt=True, tokenize=False
            )
        except Exception:
            if not self._system_ok or not req.system:
                raise
            # some templates refuse a system turn (raise_exception in jinja): fold it into the user turn
            self._system_ok = False
            return self.processor.apply_chat_template(
                self._messages(req), add_generation_prompt=True, tokenize=False
            )

    def _batch(self, reqs: Sequence[Request]) -> list[Response]:
        torch = self._torch
        t0 = time.perf_counter()
        texts = [self._chat(r) for r in reqs]
        images = [[im.pil() for im in r.images] for r in reqs]
        enc = self.processor(text=texts, images=images, padding=True, return_tensors="pt")
        dev = self.model.device
        mdtype = self.model.dtype
        inputs = {
            k: (v.to(dev, dtype=mdtype) if v.is_floating_point() else v.to(dev))
            if hasattr(v, "to") else v
            for k, v in enc.items()
        }
        gen_kw: dict[str, Any] = {"max_new_tokens": self.max_tokens, "do_sample": self.temperature > 0}
        if self.temperature > 0:
            gen_kw["temperature"] = self.temperature
        tok = getattr(self.processor, "tokenizer", None)
        if tok is not None and tok.pad_token_id is not None:
            gen_kw["pad_token_id"] = tok.pad_token_id
        with torch.inference_mode():
            out = self.model.generate(**inputs, **gen_kw)
        new = out[:, inputs["input_ids"].shape[1]:]
        decoded = self.processor.batch_decode(new, skip_special_tokens=True)
        share = (time.perf_counter() - t0) / len(reqs)
        # Qwen-family processors resize again (image_grid_thw, in patches): boxes in "pixels"
        # refer to that size, so report it per image
        seen: list[list[tuple[int, int]] | None] = [None] * len(reqs)
        grid = enc.get("image_grid_thw")
        patch = getattr(getattr(self.processor, "image_processor", None), "patch_size", None)
        if grid is not None and patch:
            sizes = [(int(w) * patch, int(h) * patch) for _, h, w in grid.tolist()]
            i = 0
            for j, r in enumerate(reqs):
                seen[j] = sizes[i : i + len(r.images)]
                i += len(r.images)
        return [
            Response(text=t.strip(), latency_s=share, seen_sizes=s) for t, s in zip(decoded, seen)
        ]

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        if not requests:
            return []
        with self._lock:
            try:
                return self._batch(requests)
            except Exception as exc:
                if len(requests) == 1:
                    return [Response(text=None, error=f"{type(exc).__name__}: {exc}")]
                # a batch can fail for one odd row (or memory): retry one by one so only that row errs
                if self.device.startswith("cuda"):
                    self._torch.cuda.empty_cache()
                out = []
                for r in requests:
                    try:
                        out.extend(self._batch([r]))
                    except Exception as exc1:
                        out.append(Response(text=None, error=f"{type(exc1).__name__}: {exc1}"))
                return out

    def close(self) -> None:
        self.model = None
