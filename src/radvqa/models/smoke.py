"""Smoke / throughput run of the hf adapter with tiny offline models (no download):

    python -m radvqa.models.smoke DATASET_DIR [--device cuda] [--repeat 50] [--batch-size 16]

Builds tiny LLaVA, Gemma-3 (and Qwen2-VL when torchvision is importable) checkpoints in a temp dir, runs
`Predictor` over DATASET_DIR's rows repeated --repeat times, and prints one JSON line per model
with rows/s. Used for the GPU check of the hf adapter; numbers say nothing about real models.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def _repeat_dataset(src: Path, dst: Path, times: int) -> Path:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from radvqa.models.rows import QADataset

    ds = QADataset.open(src)
    roots = ds.image_roots()
    table = pa.concat_tables([pq.read_table(f) for f in ds.files])
    # absolute image paths so the copy needs no image root
    from radvqa.models.rows import ImageResolver

    res = ImageResolver(roots)
    paths = [[str((res.resolve(p) or Path(p)).resolve()) for p in row] for row in table.column("image_paths").to_pylist()]
    table = table.set_column(table.schema.get_field_index("image_paths"), "image_paths", pa.array(paths))
    (dst / "qa").mkdir(parents=True, exist_ok=True)
    parts = []
    for i in range(times):
        ids = pc.binary_join_element_wise(table.column("qa_id"), pa.scalar(f"r{i}"), "-")
        parts.append(table.set_column(0, "qa_id", ids))
    pq.write_table(pa.concat_tables(parts), dst / "qa" / "part-00000.parquet")
    return dst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--models", default="llava,qwen2vl,gemma3")
    ap.add_argument("--out", type=Path, default=None, help="folder for predictions (default: temp)")
    args = ap.parse_args(argv)

    from radvqa.models import tiny
    from radvqa.models.predict import PredictOptions, Predictor
    from radvqa.models.registry import get_adapter

    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        data = _repeat_dataset(args.dataset, tmp / "data", args.repeat) if args.repeat > 1 else args.dataset
        out_dir = args.out or tmp
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in args.models.split(","):
            builder = {"llava": tiny.build_tiny_llava, "qwen2vl": tiny.build_tiny_qwen2vl,
                       "gemma3": tiny.build_tiny_gemma3}[name]
            try:
                path = builder(tmp / name)
            except Exception as exc:  # Qwen2-VL processors need torchvision
                print(json.dumps({"model": name, "skipped": f"{type(exc).__name__}: {exc}"[:300]}))
                continue
            t0 = time.perf_counter()
            adapter = get_adapter(f"hf:{path}", device=args.device, dtype=args.dtype,
                                  max_tokens=args.max_tokens)
            load_s = time.perf_counter() - t0
            out = out_dir / f"preds-{name}.jsonl"
            s = Predictor(adapter, PredictOptions(batch_size=args.batch_size, progress=False,
                                                  overwrite=True)).run(data, out)
            first = json.loads(out.read_text().splitlines()[0])
            # one direct request: what size the model saw (processors that resize report it)
            from radvqa.models.base import Request
            from radvqa.models.images import ImagePrep, load_image
            from radvqa.models.rows import ImageResolver, QADataset

            ds = QADataset.open(args.dataset)
            row = next(r for r in ds.iter_rows() if r["question_type"] == "where_finding")
            img = load_image(ImageResolver(ds.image_roots()).resolve(row["image_paths"][0]), ImagePrep())
            probe = adapter.generate([Request(qa_id="probe", prompt=row["question"], images=(img,))])[0]
            print(json.dumps({
                "model": name, "device": adapter.device, "dtype": adapter.dtype,
                "model_device": str(adapter.model.device), "load_s": round(load_s, 2),
                "box_convention": adapter.box_convention,
                **s.as_dict(), "first_prediction": first,
                "probe": {"stored": img.stored_size, "sent": img.sent_size,
                          "seen_by_model": probe.seen_sizes, "error": probe.error},
            }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
