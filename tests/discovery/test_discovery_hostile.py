"""Files that never end: an 8 GB sparse config.json, a model card, a model list, /dev/zero. Each
is refused on the first attempt, in one line, without being read whole (the CLI runs under a
1.5 GB address-space limit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge import capped_read
from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.config import REPO_ROOT
from ascendbridge.discovery.batch_sources import read_id_list
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.refusals import is_refusal
from discovery.stage import DISCOVERY_STAGE

CLI = REPO_ROOT / "scripts" / "get_model_info.py"
LIMIT_AS = "--as=1500000000"  # 1.5 GB: enough for the CLI, far too little to read 8 GB


def huge_sparse(path: Path, size: int = 8 * 1024**3) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def model_with_config(directory: Path, size: int) -> Path:
    """A model directory whose config.json is `size` bytes of holes (a symlink to /dev/zero is not
    a file: discovery already says there is no config)."""
    directory.mkdir()
    huge_sparse(directory / "config.json", size)
    return directory


@pytest.mark.parametrize("size", [8 * 1024**3, capped_read.CONFIG_MAX_BYTES + 1])
def test_get_model_info_refuses_a_huge_config_in_one_line(tmp_path: Path, size: int) -> None:
    model = model_with_config(tmp_path / "m", size)
    proc = subprocess.run(
        ["prlimit", LIMIT_AS, "--", sys.executable, str(CLI), "org/x", "--source", "local", "--path", str(model)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "limit for this file" in proc.stderr and "MemoryError" not in proc.stderr


def test_the_discovery_stage_refuses_it_on_the_first_attempt(
    claim_discovery, board: BoardStore, tmp_path: Path
) -> None:
    model = model_with_config(tmp_path / "m", 8 * 1024**3)
    board.register_models([Registration(model_id="org/x", source="local", path=str(model))])
    ctx = claim_discovery("org/x")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "corrupt_config"
    assert is_refusal(outcome.diagnosis)  # not retried as a crash
    assert "limit for this file" in outcome.summary


def test_a_huge_tokenizer_file_is_refused_on_the_first_attempt(
    claim_discovery, board: BoardStore, tmp_path: Path
) -> None:
    """transformers would read tokenizer.json whole inside the package's runs: discovery refuses it
    from its size, before any run, and a model whose tokenizer is in bounds still passes."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    huge_sparse(model / "tokenizer.json", capped_read.TOKENIZER_MAX_BYTES + 1)
    board.register_models([Registration(model_id="org/tok", source="local", path=str(model))])
    ctx = claim_discovery("org/tok")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "corrupt_config", outcome.summary
    assert is_refusal(outcome.diagnosis) and "tokenizer.json is" in outcome.summary
    assert "limit for a tokenizer file" in outcome.summary


def test_an_oversized_card_is_a_warning_and_a_model_list_a_refusal(tmp_path: Path, model_writer, cli) -> None:
    model = model_writer(tmp_path / "m", {"architectures": ["BertModel"], "model_type": "bert"})
    huge_sparse(model / "README.md")
    proc = cli(str(model), "--json")
    assert proc.returncode == 0, proc.stderr
    assert any("README.md not read" in w for w in json.loads(proc.stdout)["warnings"])
    for endless in (Path("/dev/zero"), huge_sparse(tmp_path / "ids.txt")):
        with pytest.raises(DiscoveryError, match="limit for this file") as refused:
            read_id_list(endless)
        assert refused.value.rule == "bad_list"


def test_capped_reads_stop_at_the_cap(tmp_path: Path) -> None:
    small = tmp_path / "small.json"
    small.write_text('{"a": 1}')
    assert capped_read.read_text(small, 8) == '{"a": 1}'
    with pytest.raises(capped_read.FileTooLargeError, match="is 8 bytes, over the 7 bytes limit"):
        capped_read.read_text(small, 7)
    with pytest.raises(capped_read.FileTooLargeError, match="holds more than the 1 MiB limit"):
        capped_read.read_bytes("/dev/zero", capped_read.MiB)
