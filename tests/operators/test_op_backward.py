"""The op recording covers training when asked (`--backward`): one training step's forward (model
in train mode) and its backward, the backward's ops attributed to the modules whose forward created
them, so the gap report sees ops only a training step dispatches."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.config import REPO_ROOT
from ascendbridge.operators import gaps
from ascendbridge.operators import table as op_table
from bench.support.tiny_adaptations import make_adaptation
from bench.support.torch_env import run_inner_json, torch_env_python

INNER = Path(__file__).resolve().parent / "inner" / "record_backward_logic.py"


@pytest.fixture(scope="module")
def net() -> dict[str, Any]:
    return run_inner_json(INNER, str(REPO_ROOT))


@pytest.fixture(scope="module")
def trained_gpt2(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """tiny-gpt2 recorded by the command line with --backward."""
    directory = make_adaptation(tmp_path_factory.mktemp("ops_bw"), "tiny-gpt2")
    proc = subprocess.run(
        [str(torch_env_python()), "-m", "ab_runtime.ops.record", "--backward", "--out", "p.json"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((directory / "p.json").read_text())


def test_an_op_only_the_backward_dispatches_is_recorded_with_its_module(net: dict[str, Any]) -> None:
    assert "threshold_backward" not in net["forward_only"]
    relu_grad = net["trained"]["threshold_backward"]
    assert relu_grad["phases"] == ["backward"] and relu_grad["modules"] == {"act": 1}
    assert net["trained"]["relu"]["phases"] == ["forward", "training"]
    assert set(net["trained"]["mm"]["modules"]) == {"head", "proj"}  # the Linear weights' gradients


def test_the_model_is_left_as_it_was(net: dict[str, Any]) -> None:
    assert net["training_mode"] is False and not any(net["grads"])
    assert net["requires_grad"] == {"proj.weight": True, "proj.bias": True, "head.weight": True, "head.bias": False}


def test_a_trained_language_model_records_its_loss_and_backward(trained_gpt2: dict[str, Any]) -> None:
    ops = trained_gpt2["ops"]
    assert trained_gpt2["phases"] == ["forward", "generation", "training", "backward"]
    assert ops["nll_loss_backward"]["phases"] == ["backward"]  # the model's own loss, inputs as labels
    assert set(ops["embedding_dense_backward"]["modules"]) == {"transformer.wte", "transformer.wpe"}
    assert "transformer.h.0.ln_1" in ops["native_layer_norm_backward"]["modules"]
    assert "transformer.h.0.attn" in ops["_softmax_backward_data"]["modules"]  # made inside attention


def test_a_gap_only_training_has(trained_gpt2: dict[str, Any]) -> None:
    pinned = op_table.load_table("2.7.1.post2")
    assert gaps.gap_report(trained_gpt2, pinned)["gaps"] == []
    table = dataclasses.replace(
        pinned, release="test", ops={o: w for o, w in pinned.ops.items() if o != "embedding_dense_backward"}
    )
    [gap] = gaps.gap_report(trained_gpt2, table)["gaps"]
    assert gap["op"] == "embedding_dense_backward" and gap["module"] in ("transformer.wte", "transformer.wpe")
