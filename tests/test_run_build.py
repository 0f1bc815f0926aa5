"""The build runner: sharding by patient, executors (1 vs 2 workers), resume after a killed worker
or a full disk, rejects and counts. Uses the minimal stage chain (radvqa.run.minimal) over synthetic
studies so it tests the runner alone; the real chain is tested in test_build_e2e.py."""

from __future__ import annotations

import errno
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from radvqa.generate import GenerateOptions
from radvqa.io.parquet import read_scene_graphs, shard_files, tmp_name
from radvqa.io.validate import validate
from radvqa.model import Image, Reject, Study
from radvqa.run.builder import BuildError, BuildOptions, Progress, build, resume_state
from radvqa.run.tasks import ReadStats
from radvqa.run.shards import bucket_of, patient_hash, plan_shards
from radvqa.run.worker import marker_path
from radvqa.sources.synthetic import SyntheticSource

MINIMAL = "radvqa.run.minimal:MinimalPipeline"
N = 400


def records(n: int = N, extra: bool = True) -> list:
    recs: list = list(SyntheticSource(studies=n, seed=3).iter_records())
    if extra:
        recs.insert(5, Reject(source="synthetic", ref="row 6", reason="unreadable record"))
        recs.append(Study(id="synthetic:noimg", patient_id="synthetic:pX", source="synthetic", report_text="x"))
    return recs


def opts(out: Path, **kw) -> BuildOptions:  # noqa: ANN003
    base = dict(source="synthetic", out=str(out), pipeline=MINIMAL, shard_studies=60, seed=7)
    base.update(kw)
    seed = base.pop("seed")
    return BuildOptions(**base, generate=GenerateOptions(seed=seed))


def files_bytes(out: Path) -> dict[str, bytes]:
    return {f"{k}/{p.name}": p.read_bytes() for k in ("qa", "scene_graphs") for p in shard_files(out, k)}


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean") / "out"
    build(opts(out, workers=1), records=records())
    return out


def test_stable_patient_hash_and_plan() -> None:
    # blake2b, not Python's salted hash(): fixed values across processes and runs
    assert patient_hash("synthetic:p0000001") == patient_hash("synthetic:p0000001")
    assert patient_hash("a") == 0x40F89E395B66422F
    assert 0 <= bucket_of("x") < 256
    assert plan_shards(0) == 1 and plan_shards(1) == 1 and plan_shards(2000, 2000) == 1
    assert plan_shards(2001, 2000) == 2 and plan_shards(10**9, 10) == 256
    # the default: 1,000 studies a shard (200k studies -> 256 shards of ~780)
    assert plan_shards(1000) == 1 and plan_shards(1001) == 2 and plan_shards(200_000) == 256


def test_cli_shard_default_is_the_library_default() -> None:
    import typer.main

    from radvqa.cli import app
    from radvqa.run.shards import DEFAULT_SHARD_STUDIES

    build_cmd = typer.main.get_command(app).commands["build"]  # type: ignore[attr-defined]
    (param,) = [p for p in build_cmd.params if p.name == "shard_studies"]
    assert param.default == DEFAULT_SHARD_STUDIES == BuildOptions().shard_studies


def test_counts_rejects_and_manifest(clean_run: Path) -> None:
    m = json.loads((clean_run / "manifest.json").read_text())
    c = m["counts"]
    assert c["studies_in"] == N + 2
    assert c["studies_in"] == c["studies_out"] + c["studies_rejected"]
    assert c["studies_rejected"] == 2 and c["studies_out"] == N
    lines = [json.loads(x) for x in (clean_run / "rejected.jsonl").read_text().splitlines()]
    assert {(r["ref"], r["stage"]) for r in lines} == {("row 6", "source"), ("synthetic:noimg", "localize")}
    assert all(r["reason"] for r in lines)
    assert c["qa_rows"] == sum(c["qa_by_strategy"].values()) == sum(c["qa_by_question_type"].values())
    assert m["shards"]["count"] == 8 and len(shard_files(clean_run, "qa")) == 8
    assert set(m["timings"]) >= {"read_sources", "shards", "finish", "wall"}
    assert set(m["timings"]["stages_cpu"]) >= {"load", "extract", "localize", "generate", "write", "total"}
    assert m["seed"] == 7 and m["source"] == "synthetic"
    rep = validate(clean_run)
    assert rep.ok, rep.errors()
    card = (clean_run / "README.md").read_text()
    assert card.startswith("---\n") and "config_name: qa" in card and "qa/part-*.parquet" in card
    assert (clean_run / "qa_stats.png").read_bytes()[:4] == b"\x89PNG"
    assert not (clean_run / ".radvqa" / "spill").exists()  # spill removed after success


def test_rejects_summarised_by_reason(clean_run: Path) -> None:
    m = json.loads((clean_run / "manifest.json").read_text())
    assert sum(m["rejects_by_reason"].values()) == m["counts"]["rejected_lines"] == 2
    assert m["rejects_by_reason"]["source: unreadable record"] == 1
    assert any(k.startswith("localize: ") for k in m["rejects_by_reason"])


def test_strict_stops_at_the_first_source_reject(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"--strict: synthetic row 6: unreadable record"):
        build(opts(tmp_path / "strict", strict=True), records=records())
    assert not (tmp_path / "strict" / "manifest.json").exists()


def test_strict_fails_on_a_later_stage_reject(tmp_path: Path) -> None:
    recs = [r for r in records() if not isinstance(r, Reject)]  # only the image-less study is bad
    with pytest.raises(BuildError, match=r"--strict: 1 reject\(s\); first: localize synthetic:noimg"):
        build(opts(tmp_path / "strict2", strict=True), records=recs)
    assert not (tmp_path / "strict2" / "manifest.json").exists()


def test_patients_in_one_shard_in_time_order_with_prior(clean_run: Path) -> None:
    where: dict[str, set[str]] = {}
    for f in shard_files(clean_run, "scene_graphs"):
        for pid in pq.read_table(f, columns=["patient_id"]).column("patient_id").to_pylist():
            where.setdefault(pid, set()).add(f.name)
    assert all(len(v) == 1 for v in where.values())
    sgs = read_scene_graphs(clean_run)
    by_patient: dict[str, list] = {}
    for sg in sgs:
        by_patient.setdefault(sg.patient_id, []).append(sg)
    followups = 0
    for studies in by_patient.values():
        times = [s.study_time for s in studies]
        assert times == sorted(times)
        assert studies[0].prior_study_id is None
        for prev, cur in zip(studies, studies[1:]):
            assert cur.prior_study_id == prev.study_id
            followups += 1
    assert followups > 50  # the synthetic source makes follow-ups
    diff = [q for q in pq.read_table(clean_run / "qa").to_pylist() if q["strategy"] == "diff"]
    assert diff and all(q["reference_study_id"] for q in diff)


def test_one_and_two_workers_identical(clean_run: Path, tmp_path: Path) -> None:
    out2 = tmp_path / "w2"
    build(opts(out2, workers=2), records=records())
    assert files_bytes(out2) == files_bytes(clean_run)
    assert (out2 / "rejected.jsonl").read_bytes() == (clean_run / "rejected.jsonl").read_bytes()


def test_resume_after_worker_killed(clean_run: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "killed"
    recs = records()
    victim = recs[250].id  # a study somewhere in the middle
    monkeypatch.setenv("RADVQA_MINIMAL_KILL_ON", victim)
    with pytest.raises(BuildError, match="worker process died.*--resume"):
        build(opts(out, workers=2), records=recs)
    st = resume_state(out)
    assert st["read_done"] and len(st["complete"]) < st["n_shards"]
    assert not (out / "manifest.json").exists()
    # no shard file is taken as complete without its marker
    for k in range(st["n_shards"]):
        if k not in st["complete"]:
            assert not marker_path(out, k).exists()
    before = {k: marker_path(out, k).stat().st_mtime_ns for k in st["complete"]}
    monkeypatch.delenv("RADVQA_MINIMAL_KILL_ON")
    build(opts(out, workers=2, resume=True), records=None)  # sources are not read again
    for k, t in before.items():  # finished shards were not redone
        assert marker_path(out, k).stat().st_mtime_ns == t
    assert files_bytes(out) == files_bytes(clean_run)
    assert (out / "rejected.jsonl").read_bytes() == (clean_run / "rejected.jsonl").read_bytes()
    m = json.loads((out / "manifest.json").read_text())
    assert m["options"]["resumed_shards"] == len(before)
    assert validate(out).ok


def test_disk_full_then_resume(clean_run: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "full"
    real = pq.ParquetWriter.write_table
    calls = {"n": 0}

    def flaky(self, *a, **k):  # noqa: ANN001, ANN002, ANN003
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", flaky)
    with pytest.raises(BuildError, match="disk full"):
        build(opts(out, workers=1), records=records())
    for kind in ("qa", "scene_graphs"):
        leftovers = list((out / kind).glob(".*.tmp")) if (out / kind).exists() else []
        assert leftovers == []
    done = resume_state(out)["complete"]
    assert 0 < len(done) < 8
    for k in range(8):
        if k not in done:
            assert not (out / "qa" / f"part-{k:05d}.parquet").exists()
    monkeypatch.setattr(pq.ParquetWriter, "write_table", real)
    build(opts(out, workers=1, resume=True))
    assert files_bytes(out) == files_bytes(clean_run)


def test_resume_redoes_only_unfinished_shard(clean_run: Path, tmp_path: Path) -> None:
    import shutil

    out = tmp_path / "partial"
    build(opts(out, workers=1, keep_spill=True), records=records())
    # simulate a crash in shard 3: marker gone, half-written temp file left behind
    marker_path(out, 3).unlink()
    (out / "qa" / "part-00003.parquet").unlink()
    tmp_name(out / "qa" / "part-00003.parquet").write_bytes(b"PAR1 half")
    rep = validate(out)
    assert not rep.ok and any("unfinished temporary shard" in e for e in rep.errors())
    mt = {k: marker_path(out, k).stat().st_mtime_ns for k in range(8) if k != 3}
    build(opts(out, workers=1, resume=True))
    assert all(marker_path(out, k).stat().st_mtime_ns == t for k, t in mt.items())
    assert files_bytes(out) == files_bytes(clean_run)
    assert not tmp_name(out / "qa" / "part-00003.parquet").exists()
    shutil.rmtree(out)


def test_resume_refuses_other_options(tmp_path: Path) -> None:
    out = tmp_path / "o"
    build(opts(out), records=records(50, extra=False))
    with pytest.raises(BuildError, match="seed"):
        build(opts(out, seed=8, resume=True), records=records(50, extra=False))


def test_refuses_foreign_output_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(BuildError, match="not a radvqa output"):
        build(opts(tmp_path), records=records(10, extra=False))
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_worker_exception_is_reported(tmp_path: Path, monkeypatch) -> None:
    recs = records(60, extra=False)
    monkeypatch.setenv("RADVQA_MINIMAL_FAIL_ON", recs[10].id)
    # a study whose processing raises is a reject line naming the error; the shard goes on
    m = build(opts(tmp_path / "f"), records=recs)
    assert m["counts"]["studies_rejected"] == 1 and m["counts"]["studies_out"] == 59
    lines = [json.loads(x) for x in (tmp_path / "f" / "rejected.jsonl").read_text().splitlines()]
    assert lines == [{"source": "synthetic", "ref": recs[10].id, "reason": f"pipeline failed: RuntimeError: injected failure on {recs[10].id}", "stage": "pipeline"}]


def test_synthetic_source_is_deterministic_and_realistic() -> None:
    a = list(SyntheticSource(studies=300, seed=1).iter_records())
    b = list(SyntheticSource(studies=300, seed=1).iter_records())
    assert a == b and len(a) == 300
    assert list(SyntheticSource(studies=300, seed=2).iter_records()) != a
    patients = {s.patient_id for s in a}
    assert 40 < len(patients) < 200  # several studies per patient
    assert sum(len(s.images) > 1 for s in a) > 60  # laterals
    boxed = [s for s in a if s.boxes]
    assert boxed
    for s in boxed:
        im = {i.id: i for i in s.images}
        for bx in s.boxes:
            w, h = im[bx.image_id].width, im[bx.image_id].height
            assert 0 <= bx.x1 < bx.x2 <= w and 0 <= bx.y1 < bx.y2 <= h
            assert bx.label and any(bx.label in lab.findings for lab in s.labels)
    abnormal = sum(any(lab.findings for lab in s.labels) for s in a) / len(a)
    assert 0.3 < abnormal < 0.7  # NIH: 46% of images have a finding
    assert all(s.report_text and "FINDINGS:" in s.report_text for s in a)
    assert any("Unchanged" in s.report_text or "resolved" in s.report_text for s in a)


def test_spill_round_trip_in_parts_with_small_blocks(tmp_path: Path) -> None:
    from radvqa.run.shards import SpillWriter, load_shard_studies, part_dir

    recs = [r for r in records(300, extra=False)]
    # two readers (parts), tiny blocks: every bucket file is appended to many times
    for k, chunk in enumerate((recs[:170], recs[170:])):
        w = SpillWriter(part_dir(tmp_path / "spill", k), block=256)
        for r in chunk:
            w.add(r)
        w.close()
        assert sum(w.counts) == len(chunk)
    got = []
    for k in range(4):
        part = load_shard_studies(tmp_path / "spill", k, 4, n_parts=2)
        assert [s.patient_id for s in part] == sorted(s.patient_id for s in part)
        got.extend(part)
    assert sorted(got, key=lambda s: s.id) == sorted(recs, key=lambda s: s.id)


def test_parallel_read_phase_identical(tmp_path: Path) -> None:
    """The synthetic source read by the workers (patient ranges, one spill folder per part) gives
    the same files as one reader; the manifest says how many parts were read."""
    one = build(opts(tmp_path / "r1", workers=1, studies=300), records=None)
    parts: list[ReadStats] = []

    class Parts(Progress):
        def part_done(self, stats: ReadStats) -> None:
            parts.append(stats)

    two = build(opts(tmp_path / "r2", workers=2, studies=300), records=None, progress=Parts())
    assert one["timings"]["read_parts"] == 1 and two["timings"]["read_parts"] == 4
    # each part reported to the progress hook once (benchmarks/scale.py --timeline), and the
    # manifest's slowest part / sum of parts are those parts' own seconds
    assert sorted(p.part for p in parts) == [0, 1, 2, 3] and sum(p.studies for p in parts) == 300
    t = two["timings"]
    assert t["read_part_max"] == max(p.seconds for p in parts) > 0
    assert t["read_part_sum"] == pytest.approx(sum(p.seconds for p in parts), abs=1e-3)
    assert t["read_part_max"] <= t["read_part_sum"] and t["card"] > 0
    assert two["counts"]["studies_in"] == 300
    assert files_bytes(tmp_path / "r2") == files_bytes(tmp_path / "r1")
    assert (tmp_path / "r2" / "rejected.jsonl").read_bytes() == (tmp_path / "r1" / "rejected.jsonl").read_bytes()
    # the same studies as the source yields in one pass (records handed to build)
    three = tmp_path / "r3"
    build(opts(three, workers=1), records=list(SyntheticSource(studies=300, seed=7).iter_records()))
    assert files_bytes(three) == files_bytes(tmp_path / "r1")


def test_read_part_failure_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="cannot load source"):
        build(opts(tmp_path / "x", source="radvqa.no_such_module:Nope", workers=2, studies=10), records=None)


def test_replicated_openi_read_in_parts_identical(tmp_path: Path) -> None:
    """Real report text (the sample's OpenI XML) replicated to 300 studies: position ranges read by
    two workers give the files one reader gives; replicas get new study and patient ids."""
    from radvqa.sources import sample_inputs

    xml = [str(p) for p in sample_inputs() if p.name == "openi"]
    src = "radvqa.sources.replicate:ReplicatedOpenI"
    one = build(opts(tmp_path / "o1", source=src, inputs=xml, studies=150, workers=1), records=None)
    two = build(opts(tmp_path / "o2", source=src, inputs=xml, studies=150, workers=2), records=None)
    assert two["timings"]["read_parts"] == 4 and one["counts"]["studies_in"] == two["counts"]["studies_in"] >= 150
    assert files_bytes(tmp_path / "o2") == files_bytes(tmp_path / "o1")
    assert (tmp_path / "o2" / "rejected.jsonl").read_bytes() == (tmp_path / "o1" / "rejected.jsonl").read_bytes()
    ids = [sg.study_id for sg in read_scene_graphs(tmp_path / "o1")]
    assert len(ids) == one["counts"]["studies_out"] and len(set(ids)) == len(ids)
    assert any("~r" in i for i in ids)


def _openi_inputs(tmp: Path) -> list[str]:
    """The sample's OpenI XMLs, a copy of one of them under a later name (a duplicate report id
    read by another part than its first copy) and a malformed file, as a folder and as a .tgz."""
    import shutil
    import tarfile

    from radvqa.sources import sample_inputs

    src = next(p for p in sample_inputs() if p.name == "openi")
    d = tmp / "xml" / "ecgen-radiology"
    shutil.copytree(src, d)
    first = sorted(d.glob("*.xml"))[0]
    (d / "99999.xml").write_bytes(first.read_bytes())
    (d / "99998.xml").write_text("<eCitation><uId id='CXRbroken'>")
    with tarfile.open(tmp / "reports.tgz", "w:gz") as tf:
        for f in sorted(d.glob("*.xml")):
            tf.add(f, arcname=f"ecgen-radiology/{f.name}")
    return [str(tmp / "xml"), str(tmp / "reports.tgz")]


def test_openi_read_in_parts_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenI reports (a folder, then an archive holding the same reports) split into ranges of
    reports read by the workers: the same files and rejects as one reader, every duplicate report
    id (the archive's copies, read by other parts than the first copies) rejected as one reader
    rejects it."""
    from radvqa.sources import openi

    monkeypatch.setattr(openi, "MIN_PART_REPORTS", 10)  # the parts are planned in this process
    inputs = _openi_inputs(tmp_path)
    one = build(opts(tmp_path / "o1", source="openi", inputs=inputs, workers=1), records=None)
    two = build(opts(tmp_path / "o2", source="openi", inputs=inputs, workers=2), records=None)
    assert one["timings"]["read_parts"] == 1 and two["timings"]["read_parts"] == 4
    assert files_bytes(tmp_path / "o2") == files_bytes(tmp_path / "o1")
    rej = (tmp_path / "o1" / "rejected.jsonl").read_text()
    assert (tmp_path / "o2" / "rejected.jsonl").read_text() == rej
    assert rej.count("duplicate report id") == 1 + 41 and "malformed XML" in rej
    assert two["counts"]["studies_in"] == one["counts"]["studies_in"] > 0


def test_synthetic_plan_parts_equal_one_pass_and_keep_the_study_count() -> None:
    """The vectorised plan (per-patient study counts from a hash of (seed, patient)) cuts the same
    stream one pass yields, whatever the number of parts, with or without the counts in the spec."""
    from radvqa.ontology import load_ontology
    from radvqa.sources.synthetic import _COUNTS

    onto = load_ontology()
    for n in (1, 7, 301):
        src = SyntheticSource(studies=n, seed=5)
        whole = [s.id for s in src.iter_records([], ontology=onto)]
        assert len(whole) == n
        for k in (1, 3, 16):
            specs = src.plan_parts([], k, ontology=onto)
            assert len(specs) <= k and specs[0]["start"] == 0
            assert [s.id for p in specs for s in src.iter_part([], p, ontology=onto)] == whole
            _COUNTS.clear()  # a reader that computes the counts itself (no "counts" in its spec)
            bare = [{x: v for x, v in p.items() if x != "counts"} for p in specs]
            assert [s.id for p in bare for s in src.iter_part([], p, ontology=onto)] == whole
    # a patient's studies do not depend on --studies: a small build is the start of a large one
    # (its last patient cut short)
    small = list(SyntheticSource(studies=50, seed=5).iter_records([], ontology=onto))
    large = list(SyntheticSource(studies=5000, seed=5).iter_records([], ontology=onto))
    assert small == large[:50]
    per_patient = Counter(s.patient_id for s in large)
    mean = 5000 / len(per_patient)
    assert 3.0 < mean < 4.2 and max(per_patient.values()) <= 12  # synthetic.yaml: mean 3.64, cap 12


def test_workers_drop_their_own_spill_unless_kept(tmp_path: Path) -> None:
    """Each shard deletes its bucket files once its marker is written (the driver no longer
    removes the whole spill after the last shard); --keep-spill keeps every file."""
    from radvqa.run.shards import shard_spill_files
    from radvqa.run.tasks import ShardTask
    from radvqa.run.worker import run_shard

    out = tmp_path / "kept"
    build(opts(out, workers=1, keep_spill=True), records=records())
    spill = out / ".radvqa" / "spill"
    mine = [p for p in shard_spill_files(spill, 2, 8) if p.exists()]
    others = sorted(p for p in spill.rglob("b*.bin") if p not in mine)
    assert mine and others
    marker = (out / ".radvqa" / "shards" / "part-00002.done.json").read_bytes()
    base = opts(out, workers=1)
    stats = run_shard(ShardTask(out=str(out), spill=str(spill), shard=2, n_shards=8, n_parts=1,
                                options=base.worker_options(), drop_spill=True))
    assert stats.studies_in > 0 and not any(p.exists() for p in mine)
    assert sorted(p for p in spill.rglob("b*.bin")) == others  # the other shards' inputs are left
    # the shard redone from its spill wrote the same marker statistics (timings aside)
    drop = ("timings", "pid")
    old = {k: v for k, v in json.loads(marker).items() if k not in drop}
    assert {k: v for k, v in stats.to_dict().items() if k not in drop} == old
    # a default build leaves no spill behind
    out2 = tmp_path / "dropped"
    build(opts(out2, workers=2), records=records())
    assert not (out2 / ".radvqa" / "spill").exists()
    assert files_bytes(out2) == files_bytes(out)
