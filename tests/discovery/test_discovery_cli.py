"""get_model_info.py as users run it: summaries, JSON, one-line errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from ascendbridge.demo_models import list_demo_models


def _one_line_error(stderr: str) -> None:
    assert stderr.startswith("error: ") and stderr.count("\n") == 1 and "Traceback" not in stderr


def test_summary_of_a_demo_model(cli) -> None:
    demo = next(d for d in list_demo_models() if d.name == "tiny-whisper")
    proc = cli(str(demo.path))
    assert proc.returncode == 0, proc.stderr
    assert "task family: speech_seq2seq" in proc.stdout
    assert "(config_estimate)" in proc.stdout and "decision: proceed" in proc.stdout


def test_json_of_minilm(minilm_dir: Path, cli) -> None:
    proc = cli("sentence-transformers/all-MiniLM-L6-v2", "--source", "local", "--path", str(minilm_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["parameter_count"] == 22_713_216 and info["decision"]["action"] == "proceed"
    assert info["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_corrupt_config(tmp_path: Path, cli) -> None:
    (tmp_path / "config.json").write_text('{"architectures": ["BertModel"], ')
    proc = cli(str(tmp_path))
    assert proc.returncode == 1
    _one_line_error(proc.stderr)
    assert "config.json is not valid JSON" in proc.stderr and proc.stdout == ""


def test_truncated_safetensors_header(tmp_path: Path, cli, safetensors_writer) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "model_type": "bert"}))
    safetensors_writer(tmp_path / "model.safetensors", {"w": ("F32", [32, 32])})
    raw = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(raw[:40])
    proc = cli(str(tmp_path))
    assert proc.returncode == 1
    _one_line_error(proc.stderr)
    assert "model.safetensors: truncated or corrupt safetensors header" in proc.stderr


def test_unknown_architecture_is_not_an_error(tmp_path: Path, cli) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["QuuxForHoloDecoding"], "model_type": "quux"}))
    proc = cli(str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "task family: none (architecture QuuxForHoloDecoding has no supported task family" in proc.stdout


def test_remote_code_decision_shown(tmp_path: Path, cli) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps(
            {"architectures": ["XForCausalLM"], "model_type": "x", "auto_map": {"AutoModel": "modeling_x.XModel"}}
        )
    )
    (tmp_path / "modeling_x.py").write_text("")
    proc = cli(str(tmp_path))
    assert proc.returncode == 0 and "decision: block (remote_code_not_allowed)" in proc.stdout
    allowed = cli(str(tmp_path), "--allow-remote-code")
    assert "decision: proceed" in allowed.stdout


def test_missing_directory_and_bad_id(tmp_path: Path, cli) -> None:
    proc = cli("x", "--source", "local", "--path", str(tmp_path / "absent"))
    assert proc.returncode == 1
    _one_line_error(proc.stderr)
    bad = cli("../../etc/passwd", "--source", "hf-cache")
    assert bad.returncode == 1
    _one_line_error(bad.stderr)


def test_usage_error(cli) -> None:
    proc = cli("a/b", "--source", "ftp")
    assert proc.returncode == 2
    _one_line_error(proc.stderr)
