"""Training optimization passes: a pass is used only when the search and its fresh-process
confirmation both keep it; the gate re-derives every verdict from the saved losses and pairs; a pass
that changes what is learnt (a deliberately wrong fused optimizer) is refused by its losses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.train.config import TRAINING_PASSES
from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import torch_env_python
from training.figures import confirmed_passes, passes_figures, passes_problems
from training.settings import TRAINING_PASSES as SETTINGS_PASSES
from training.settings import TrainingSettings

LOSSES = {"losses": [6.0, 5.9, 5.8, 5.7], "grad_norms": [1.0, 0.9, 0.9, 0.8]}


def candidate(verdict: str, baseline_ms: float = 10.0, candidate_ms: float = 8.0, losses: Any = None) -> dict[str, Any]:
    """One candidate's record as passes.py writes it: 6 pairs of 2 steps, the losses of both."""
    pairs = 6
    return {
        "verdict": verdict,
        "losses": {"baseline": LOSSES, "candidate": losses or LOSSES},
        "timing": {
            "iters_per_block": 2,
            "warmup": 0,
            "speedup": baseline_ms / candidate_ms,
            "baseline_samples_ms": [baseline_ms + 0.1 * i for i in range(2 * pairs)],
            "candidate_samples_ms": [candidate_ms + 0.1 * i for i in range(2 * pairs)],
        },
    }


def search(**candidates: dict[str, Any]) -> dict[str, Any]:
    return {"candidates": candidates, "kept": [n for n, c in candidates.items() if c["verdict"] == "kept"]}


def test_a_pass_is_used_only_when_search_and_confirmation_both_keep_it() -> None:
    first = search(fused_adamw=candidate("kept"), compile=candidate("kept"))
    second = search(fused_adamw=candidate("kept"), compile=candidate("no_gain", 10.0, 10.0))
    assert confirmed_passes([first]) == [] and confirmed_passes([first, second]) == ["fused_adamw"]
    assert passes_problems([first, second], {"passes": ["fused_adamw"]}) == []
    figures = passes_figures([first, second])
    assert figures == {"passes_tried": 2.0, "passes_confirmed": 1.0, "pass_fused_adamw_speedup": 1.25}
    assert passes_problems([first, second], {"passes": ["fused_adamw", "compile"]}) == [
        "the run trains with passes ['fused_adamw', 'compile'], the search confirmed ['fused_adamw']"
    ]


def test_the_gate_rederives_each_verdict_from_its_losses_and_pairs() -> None:
    slower = candidate("kept", 10.0, 12.0)  # recorded kept, but every pair is slower
    drifted = candidate("no_gain", losses={**LOSSES, "losses": [6.0, 6.2, 6.4, 6.6]})  # it climbs the loss
    problems = passes_problems(
        [search(compile=slower, fused_adamw=drifted), search(compile=slower)], {"passes": ["compile"]}
    )
    assert problems == [
        "training pass compile: recorded kept, its figures give no_gain",
        "training pass fused_adamw: recorded no_gain, its figures give refused",
        "training pass compile: recorded kept, its figures give no_gain",
    ]


def test_the_settings_know_the_harness_passes_and_refuse_others() -> None:
    assert SETTINGS_PASSES == TRAINING_PASSES
    assert TrainingSettings(passes="compile,fused_adamw").pass_list() == ["compile", "fused_adamw"]
    assert TrainingSettings(passes="").pass_list() == []
    with pytest.raises(ValueError, match="training pass"):
        TrainingSettings(passes="fused_adamw,warp_drive")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_wrong_fused_optimizer_is_refused_by_its_losses(tmp_path: Path) -> None:
    """The real search on demo/tiny-llama with the fused_adamw pass made wrong (it climbs the loss):
    refused by the contract's loss bounds, never timed, and not kept."""
    config = {
        "model_dir": str(REPO_ROOT / "demo_models" / "tiny-llama"),
        "corpus": str(REPO_ROOT / "training" / "corpus" / "tiny_stories.jsonl"),
        "steps": 4,
        "checkpoint_every": 0,
        "fault": {"wrong_fused_adamw": 1},
    }
    (tmp_path / "train.json").write_text(json.dumps(config))
    argv = [str(torch_env_python()), "-m", "ab_runtime.train.run", "passes", "--config", str(tmp_path / "train.json")]
    argv += ["--out", str(tmp_path / "run"), "--candidates", "fused_adamw"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1100, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "passes.json").read_text())
    fused = record["candidates"]["fused_adamw"]
    assert record["kept"] == [] and fused["verdict"] == "refused" and "timing" not in fused
    assert "mean_loss" in fused["reason"]
    assert passes_problems([record], {"passes": []}) == []  # the gate re-derives the refusal


NO_FILL_SCRIPT = """
import json, sys
from dataclasses import replace
from pathlib import Path
import torch
from ab_runtime.train.config import TrainConfig
from ab_runtime.train.harness import Trainer
cfg, out = TrainConfig.load(Path(sys.argv[1])), Path(sys.argv[2])
seen = []
real = Trainer._step
def spy(self, keep_grads):
    seen.append(torch.utils.deterministic.fill_uninitialized_memory)
    return real(self, keep_grads)
Trainer._step = spy
base = Trainer(cfg, out / "base")
cand = Trainer(replace(cfg, passes=["no_uninit_fill"]), out / "cand")
losses = {"base": [], "cand": []}
for _ in range(3):
    losses["base"].append(base.step()["loss"])
    losses["cand"].append(cand.step()["loss"])
print(json.dumps({"losses": losses, "seen": seen, "after": torch.utils.deterministic.fill_uninitialized_memory}))
"""


def test_the_no_fill_pass_trains_bit_identically_and_only_during_its_own_steps(tmp_path: Path) -> None:
    """no_uninit_fill runs the same deterministic kernels without the NaN fill of new tensors: the
    same losses to the bit, the fill off only inside the candidate's steps (a pass search steps both
    trainers in one process), and torch's flag as it was afterwards."""
    config = {
        "model_dir": str(REPO_ROOT / "demo_models" / "tiny-llama"),
        "corpus": str(REPO_ROOT / "training" / "corpus" / "tiny_stories.jsonl"),
        "steps": 3,
        "checkpoint_every": 0,
    }
    (tmp_path / "train.json").write_text(json.dumps(config))
    argv = [str(torch_env_python()), "-c", NO_FILL_SCRIPT, str(tmp_path / "train.json"), str(tmp_path / "run")]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["losses"]["base"] == result["losses"]["cand"]
    assert result["seen"] == [True, False] * 3 and result["after"] is True
