"""A run's TensorBoard event file (written from the saved step log, read back with TensorBoard's own
reader) and a training job's `hf:` dataset (loaded with `datasets`, cached into the package)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.train.corpus import CorpusError, HubDataset, hub_dataset, load_documents
from ascendbridge.board import BoardStore
from ascendbridge.board.records import TrainingJob
from ascendbridge.config import REPO_ROOT
from training.figures import EVENTS_DIR, event_scalars, read_events, write_events
from training.hub_data import cache_dataset, source_record

BOARD_OPS = REPO_ROOT / "scripts" / "board_ops.py"


def _run_dir(tmp_path: Path) -> Path:
    """A run directory as the harness leaves it: the step log (one step without a rate) and the evaluation."""
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {
            "step": i,
            "epoch": 0,
            "loss": 6.0 - 0.37 * i,
            "grad_norm": 2.5 / i,
            "lr": 1e-3 * (1 - i / 10),
            "tokens": 512,
            "tokens_per_s": None if i == 1 else 1000.0 + 3.3 * i,
            "step_time_s": 0.05 * i,
            "peak_memory_bytes": 123_456_789 + i,
            "time": 1_796_000_000.0 + i,
        }
        for i in range(1, 7)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "evaluation.json").write_text(
        json.dumps(
            {
                "before": {"loss": 6.2, "perplexity": 492.7},
                "after": {"loss": 4.1, "perplexity": 60.3},
                "verdict": {"verdict": "improved", "gap": 0.1},
            }
        )
    )
    return run


def test_the_event_file_read_back_holds_the_step_logs_figures(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    directory = write_events(run)
    assert directory == run / EVENTS_DIR and len(list(directory.glob("events.out.tfevents.*"))) == 1
    events = read_events(directory)
    log = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for key in ("loss", "grad_norm", "lr", "tokens_per_s", "step_time_s", "peak_memory_bytes"):
        expected = [(r["step"], r[key]) for r in log if r[key] is not None]
        assert [s for s, _ in events[f"train/{key}"]] == [s for s, _ in expected], key
        assert [v for _, v in events[f"train/{key}"]] == pytest.approx([v for _, v in expected], rel=1e-6), key
    assert events["eval/loss"] == [(0, pytest.approx(6.2)), (6, pytest.approx(4.1))]
    assert events["eval/perplexity"] == [(0, pytest.approx(492.7)), (6, pytest.approx(60.3))]
    assert events == event_scalars(run)  # exactly (float32), what the gate compares
    write_events(run)  # rewritten afresh: one file, not a second run appended
    assert len(list(directory.glob("events.out.tfevents.*"))) == 1 and read_events(directory) == events
    lines = (run / "metrics.jsonl").read_text().splitlines()
    edited = json.loads(lines[2])
    edited["loss"] -= 0.01
    (run / "metrics.jsonl").write_text("\n".join([*lines[:2], json.dumps(edited), *lines[3:]]) + "\n")
    assert read_events(directory) != event_scalars(run)  # the gate's check: an edited log no longer matches
    assert read_events(tmp_path / "none") == {}  # no event directory: nothing read back (the gate: a mismatch)


def test_tensorboard_reads_the_event_file_as_written_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    """training/events.py writes the file without the tensorboard library; TensorBoard's own reader
    (a dev dependency, the `tensorboard` extra for users) must read exactly the same scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = _run_dir(tmp_path)
    directory = write_events(run)
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})  # 0: every event
    accumulator.Reload()
    theirs = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}
    assert theirs == read_events(directory) == event_scalars(run)
    wall = {e.step: e.wall_time for e in accumulator.Scalars("train/loss")}
    assert wall == {i: 1_796_000_000.0 + i for i in range(1, 7)}  # the step log's times
    (path,) = directory.glob("events.out.tfevents.*")
    raw = bytearray(path.read_bytes())
    raw[-6] ^= 0xFF  # one byte of the last record
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="fails its checksum"):
        read_events(directory)


def test_hub_references_parse_and_bad_ones_are_refused() -> None:
    assert hub_dataset("/data/corpus.jsonl") is None
    assert hub_dataset("hf:org/stories") == HubDataset("org/stories", "train", None)
    assert hub_dataset("hf:org/stories:validation@v1.2") == HubDataset("org/stories", "validation", "v1.2")
    assert hub_dataset("hf:/srv/sets/stories:test") == HubDataset("/srv/sets/stories", "test", None)
    assert hub_dataset("hf:org/stories:validation").file_name() == "org_stories.validation.jsonl"
    assert hub_dataset("hf:/srv/sets/stories").file_name() == "stories.train.jsonl"
    for bad in (
        "hf:",
        "hf:/",
        "hf:org/a/b",
        "hf:../up",
        "hf:org/x:bad split",
        "hf:org/x@..",
        "hf:/srv/x@main",
        "hf:/srv/../x",
    ):
        with pytest.raises(CorpusError):
            hub_dataset(bad)


def _dataset_dir(tmp_path: Path) -> Path:
    """A local dataset directory as `datasets` reads it: one JSONL file per split, an extra column."""
    directory = tmp_path / "stories"
    directory.mkdir()
    (directory / "train.jsonl").write_text(
        "".join(json.dumps({"text": f"story {i}: the cat sat on the mat.", "id": i}) + "\n" for i in range(25))
    )
    (directory / "test.jsonl").write_text("".join(json.dumps({"text": f"held {i}", "id": i}) + "\n" for i in range(4)))
    return directory


def test_a_dataset_is_cached_into_the_package_with_its_record_and_reused_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("datasets", reason="the datasets extra (uv sync --extra datasets; CI installs it)")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = _dataset_dir(tmp_path)
    data_dir = tmp_path / "pkg" / "train" / "data"
    reference = f"hf:{source}:test"
    corpus = cache_dataset(reference, hub_dataset(reference), data_dir)
    assert corpus.parent == data_dir and corpus.suffix == ".jsonl"
    assert [json.loads(line) for line in corpus.read_text().splitlines()] == [{"text": f"held {i}"} for i in range(4)]
    assert [d.text for d in load_documents(corpus)] == [f"held {i}" for i in range(4)]
    record = json.loads(source_record(corpus).read_text())
    assert record["reference"] == reference and record["split"] == "test" and record["rows"] == 4
    assert record["columns"] == ["text"] and len(record["fingerprint"]) >= 8
    assert record["revision"] is None and record["commit"] is None  # a local directory has no Hub commit
    # the cached file is what later attempts and the gate read: the source can be gone
    shutil.rmtree(source)
    assert cache_dataset(reference, hub_dataset(reference), data_dir) == corpus
    # a cached file that is not the recorded bytes is loaded again (here: the source is gone, so it fails)
    corpus.write_text('{"text": "edited"}\n')
    with pytest.raises(FileNotFoundError):
        cache_dataset(reference, hub_dataset(reference), data_dir)


def test_a_split_without_a_text_column_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets", reason="the datasets extra (uv sync --extra datasets; CI installs it)")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    source = tmp_path / "numbers"
    source.mkdir()
    (source / "train.jsonl").write_text("".join(json.dumps({"x": i}) + "\n" for i in range(5)))
    with pytest.raises(CorpusError, match="none of the columns text, messages, source, target"):
        cache_dataset(f"hf:{source}", HubDataset(str(source)), tmp_path / "data")


HUB_COMMIT = "c0ffee" * 6 + "c0de"
LOAD = """
import json, sys
from pathlib import Path
from ab_runtime.train.corpus import hub_dataset
from training.hub_data import cache_dataset
try:
    print(cache_dataset(sys.argv[1], hub_dataset(sys.argv[1]), Path(sys.argv[2])))
except Exception as exc:
    print(json.dumps({"type": type(exc).__name__, "message": str(exc), "retryable": isinstance(exc, OSError)}))
    sys.exit(1)
"""


def _load_in_a_process(reference: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """cache_dataset in a fresh process, as the stage's: huggingface_hub and datasets read HF_ENDPOINT
    (the stand-in's) at import, which this test process may have done long ago."""
    return subprocess.run(
        [sys.executable, "-c", LOAD, reference, str(data_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
    )


def _hub_dataset_repo(tmp_path: Path, fmt: str) -> tuple[Path, list[dict[str, Any]]]:
    """A dataset repo as the Hub holds one: a card, data/<split> files (JSONL or Parquet), an extra column."""
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "README.md").write_text("---\nlicense: mit\nlanguage: en\n---\n# Tiny stories\n")
    splits = {
        split: [{"text": f"{split} story {i}: the cat sat on the mat.", "id": i} for i in range(n)]
        for split, n in (("train", 11), ("test", 3))
    }
    for split, rows in splits.items():
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(rows), repo / "data" / f"{split}-00000-of-00001.parquet")
        else:
            (repo / "data" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return repo, splits["train"]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_hub_dataset_is_loaded_at_its_commit_and_reused_offline(
    fake_hub, fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real Hub code path: datasets asks the stand-in (HF_ENDPOINT) for the card, the revision's
    commit, the tree listing and the split's file; the package records that commit."""
    pytest.importorskip("datasets", reason="the datasets extra (uv sync --extra datasets; CI installs it)")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    repo, train = _hub_dataset_repo(tmp_path, fmt)
    fake_hub.add_dataset("org/stories", repo, HUB_COMMIT, refs=("v1.0",))
    reference = "hf:org/stories:train@v1.0"
    data_dir = tmp_path / "pkg" / "train" / "data"
    proc = _load_in_a_process(reference, data_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    corpus = Path(proc.stdout.split()[-1])
    assert corpus == data_dir / "org_stories.train.jsonl"
    assert [json.loads(line) for line in corpus.read_text().splitlines()] == [{"text": r["text"]} for r in train]
    record = json.loads(source_record(corpus).read_text())
    assert record["commit"] == HUB_COMMIT and record["revision"] == "v1.0" and record["rows"] == len(train)
    assert record["reference"] == reference and record["name"] == "org/stories" and record["split"] == "train"
    # the tag was resolved once; the listing and the split's file were read at the commit it named
    paths = [p for _, p, _ in fake_hub.requests]
    assert f"/api/datasets/org/stories/tree/{HUB_COMMIT}" in paths
    train_file = next(n for n in (repo / "data").iterdir() if n.name.startswith("train"))
    assert fake_hub.full_downloads(f"/datasets/org/stories/resolve/{HUB_COMMIT}/data/{train_file.name}")
    assert not [p for p in paths if "/resolve/v1.0/" in p and "README.md" not in p]
    cached, recorded = corpus.read_bytes(), source_record(corpus).read_bytes()
    fake_hub.stop()  # the Hub is gone: the second load is the cached file, byte for byte
    again = _load_in_a_process(reference, data_dir)
    assert again.returncode == 0 and Path(again.stdout.split()[-1]) == corpus, again.stdout + again.stderr
    assert corpus.read_bytes() == cached and source_record(corpus).read_bytes() == recorded


def test_an_unknown_hub_dataset_revision_or_split_is_one_line_and_not_retried(
    fake_hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("datasets", reason="the datasets extra (uv sync --extra datasets; CI installs it)")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    fake_hub.add_dataset("org/stories", _hub_dataset_repo(tmp_path, "jsonl")[0], HUB_COMMIT, refs=("v1.0",))
    for reference, says in (
        ("hf:org/missing:train@v1.0", "Dataset 'org/missing' doesn't exist on the Hub"),
        ("hf:org/stories:train@v9", "Revision 'v9' doesn't exist for dataset 'org/stories'"),
        ("hf:org/stories:valid@v1.0", 'Unknown split "valid"'),
    ):
        proc = _load_in_a_process(reference, tmp_path / "pkg" / "train" / "data")
        assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
        error = json.loads(proc.stdout)
        assert error["type"] == "CorpusError" and not error["retryable"], error
        assert error["message"].startswith(f"{reference}: {says}") and "\n" not in error["message"], error
    assert not list((tmp_path / "pkg").rglob("*.jsonl"))  # nothing half-written


def _board_ops(board: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BOARD_OPS), "--board", str(board), *args], capture_output=True, text=True, timeout=120
    )


def test_a_hub_dataset_job_is_registered_as_given_and_bad_references_exit_2(board: BoardStore, tmp_path: Path) -> None:
    for bad, says in (
        ("hf:org/a/b", "a Hub id ORG/NAME or an absolute directory"),
        ("hf:org/x:bad split", "bad split"),
        (f"hf:{tmp_path / 'none'}", "is not a directory"),
    ):
        proc = _board_ops(board.path, "register_model", "--model_id", "org/m", "--train-data", bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and says in proc.stderr, (bad, proc.stderr)
    assert board.list_models() == []
    proc = _board_ops(board.path, "register_model", "--model_id", "org/m", "--train-data", "hf:org/stories:train@main")
    assert proc.returncode == 0, proc.stderr
    assert board.get_model("org/m").training == TrainingJob(data="hf:org/stories:train@main")
    # a registration file keeps a reference as it is (a corpus file is resolved against the file)
    (tmp_path / "models.jsonl").write_text(json.dumps({"model_id": "org/n", "training": {"data": "hf:org/s"}}) + "\n")
    assert _board_ops(board.path, "register_many", str(tmp_path / "models.jsonl")).returncode == 0
    assert board.get_model("org/n").training == TrainingJob(data="hf:org/s")


def test_a_registration_files_corpus_is_resolved_against_the_file_and_a_missing_one_exits_2(
    board: BoardStore, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    corpus = tmp_path / "data" / "corpus.jsonl"
    corpus.write_text('{"text": "once upon a time"}\n')
    listing = tmp_path / "lists" / "models.jsonl"
    listing.parent.mkdir()
    listing.write_text(json.dumps({"model_id": "org/gone", "training": {"data": "../data/missing.jsonl"}}) + "\n")
    proc = _board_ops(board.path, "register_many", str(listing))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"training data {tmp_path / 'data' / 'missing.jsonl'} is not a file" in proc.stderr
    assert board.list_models() == []
    listing.write_text(json.dumps({"model_id": "org/kept", "training": {"data": "../data/corpus.jsonl"}}) + "\n")
    assert _board_ops(board.path, "register_many", str(listing)).returncode == 0
    assert board.get_model("org/kept").training == TrainingJob(data=str(corpus))
