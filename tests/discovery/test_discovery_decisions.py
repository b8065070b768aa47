"""Decisions with reasons: too large -> skip, remote code -> block, gated without token -> block."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbridge.discovery.decisions import decide, weight_bytes
from ascendbridge.discovery.discover import discover
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.model_info import ModelInfo


def test_70b_llama_config_is_skipped_for_64_gib(tmp_path: Path, model_writer, llama_70b_config, monkeypatch) -> None:
    monkeypatch.delenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", raising=False)
    info = discover("meta-llama/Llama-3.1-70B", "local", str(model_writer(tmp_path, llama_70b_config)))
    assert info.parameter_count_source == "config_estimate" and info.dtype == "bfloat16"
    assert 69e9 < info.parameter_count < 72e9  # published: 70.6B
    decision = decide(info, allow_remote_code=False, has_token=False)
    assert (decision.action, decision.rule) == ("skip", "too_large")
    assert "64 GiB" in decision.reason and "estimated from config.json" in decision.reason


def test_configured_memory_changes_the_verdict(tmp_path: Path, model_writer, llama_70b_config, monkeypatch) -> None:
    info = discover("meta-llama/Llama-3.1-70B", "local", str(model_writer(tmp_path, llama_70b_config)))
    monkeypatch.setenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", "1024")
    assert decide(info, False, False).action == "proceed"
    monkeypatch.setenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", "150")  # 131 GiB x 1.2 margin = 158 > 150
    assert decide(info, False, False).action == "skip"
    monkeypatch.setenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", "lots")
    with pytest.raises(DiscoveryError, match="^bad device setting device_memory_gb: Input should be a valid number"):
        decide(info, False, False)


def test_weight_bytes_follow_the_header_dtypes() -> None:
    info = ModelInfo(
        model_id="a/b", source="local", parameter_count=300, parameters_by_dtype={"bfloat16": 100, "float32": 200}
    )
    assert weight_bytes(info) == 100 * 2 + 200 * 4


def test_remote_code_model_is_blocked_until_allowed(tmp_path: Path, model_writer) -> None:
    config = {
        "architectures": ["MyCustomForCausalLM"],
        "model_type": "my_custom",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "vocab_size": 100,
        "auto_map": {"AutoModelForCausalLM": "modeling_my_custom.MyCustomForCausalLM"},
    }
    path = model_writer(tmp_path, config, {"modeling_my_custom.py": "class MyCustomForCausalLM: pass\n"})
    info = discover("someone/custom", "local", str(path))
    assert info.needs_remote_code and info.remote_code_files == ["modeling_my_custom.py"]
    blocked = decide(info, allow_remote_code=False, has_token=False)
    assert (blocked.action, blocked.rule) == ("block", "remote_code_not_allowed")
    assert "allow_remote_code someone/custom" in blocked.reason
    assert decide(info, allow_remote_code=True, has_token=False).action == "proceed"


def test_auto_map_alone_needs_remote_code(tmp_path: Path, model_writer) -> None:
    config = {
        "architectures": ["XForCausalLM"],
        "model_type": "x",
        "auto_map": {"AutoConfig": "other/repo--configuration_x.XConfig"},
    }
    info = discover("a/x", "local", str(model_writer(tmp_path, config)))
    assert info.needs_remote_code and info.remote_code_files == ["configuration_x.py"]


def test_gated_hub_model_needs_a_token() -> None:
    info = ModelInfo(
        model_id="meta-llama/Llama-3.2-1B",
        source="huggingface",
        gated=True,
        parameter_count=1_235_814_400,
        dtype="bfloat16",
    )
    blocked = decide(info, allow_remote_code=False, has_token=False, memory_gb=64)
    assert (blocked.action, blocked.rule) == ("block", "gated_no_token")
    assert decide(info, allow_remote_code=False, has_token=True, memory_gb=64).action == "proceed"
    # Weights already on disk need no token.
    local = info.model_copy(update={"source": "hf-cache"})
    assert decide(local, allow_remote_code=False, has_token=False, memory_gb=64).action == "proceed"


def test_too_large_wins_over_remote_code() -> None:
    info = ModelInfo(model_id="a/b", source="local", parameter_count=10**11, dtype="bfloat16", needs_remote_code=True)
    assert decide(info, False, False, memory_gb=64).rule == "too_large"


def test_unknown_architecture_proceeds_with_its_reason(tmp_path: Path, model_writer) -> None:
    info = discover(
        "a/xvector",
        "local",
        str(model_writer(tmp_path, {"architectures": ["Wav2Vec2ForXVector"], "model_type": "wav2vec2"})),
    )
    assert info.task_family is None and "Wav2Vec2ForXVector" in info.task_family_reason
    decision = decide(info, False, False, memory_gb=64)
    assert decision.action == "proceed" and "no task family" in decision.reason
