"""The lm-evaluation-harness path, offline: the bundled local task over a bundled data file.

Marked `lm_eval` (it builds a second cached torch env with lm-eval installed, ~30 s once per
machine); the suite, .ci/run included, still runs it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bench.support.torch_env import torch_env_python
from business_benchmark.datasets import DATA_DIR
from business_benchmark.gate import check_adaptation
from business_benchmark.lm_eval_path import (
    LM_EVAL_REQUIREMENT,
    LOCAL_SET,
    LOCAL_TASK,
    prepare_lm_eval,
    write_local_task,
)
from business_benchmark.render import copy_sets
from tests.business_benchmark.business_support import demo_dir, load, make_adaptation, run_business
from tests.business_benchmark.conftest import THREADS

pytestmark = pytest.mark.lm_eval


def tiny_gpt2_with_tokenizer(root: Path, python: Path) -> Path:
    """The demo GPT-2 config plus a word-level tokenizer over the bundled sets' words (built with
    the `tokenizers` library in the torch env: lm-eval needs a real tokenizer)."""
    import subprocess

    model_dir = root / "tiny-gpt2-tok"
    model_dir.mkdir(parents=True)
    shutil.copy(demo_dir("tiny-gpt2") / "config.json", model_dir / "config.json")
    text = " ".join(
        (DATA_DIR / f).read_text() for f in ("ab-choice-en.jsonl", "ab-text-en.jsonl", "ab-prompts-en.jsonl")
    )
    words = sorted(set(re.findall(r"\w+|[^\w\s]", text)))[:500]
    script = f"""
import json
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {{w: i for i, w in enumerate(["<|endoftext|>", "[UNK]"] + json.loads({json.dumps(json.dumps(words))}))}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="[UNK]").save_pretrained({str(model_dir)!r})
"""
    subprocess.run([str(python), "-c", script], check=True, timeout=300)
    return model_dir


@pytest.mark.timeout(1200)
def test_lm_eval_local_task_reference_and_target_then_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = torch_env_python(extra=(LM_EVAL_REQUIREMENT,))
    model_dir = tiny_gpt2_with_tokenizer(tmp_path, python)
    directory = make_adaptation(tmp_path / "adaptations", "tiny-gpt2-tok", model_dir, "causal_lm", "GPT2LMHeadModel")
    copy_sets([LOCAL_SET], directory)
    include = write_local_task(directory)
    metrics, _, proc = run_business(
        python,
        directory,
        "causal_lm",
        extra=(
            *THREADS,
            "--max-items",
            "2",
            "--lm-eval",
            LOCAL_TASK,
            "--lm-eval-include",
            str(include),
            "--lm-eval-limit",
            "8",
        ),
        env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    evidence = load(metrics)
    assert evidence["run"]["tokenizer"] == "model"
    lm = next(ev for ev in evidence["evaluations"] if ev["task"] == "lm_eval")
    assert lm["items"] == 8 and lm["dataset"]["tasks"] == [LOCAL_TASK]
    # config-initialised weights: the lm-eval scores are reported as target-minus-reference, not judged
    assert lm["metrics"]["task"] == {} and f"{LOCAL_TASK}.acc.target_minus_reference" in lm["metrics"]["agreement"]
    predictions = json.loads((directory / evidence["predictions"]["file"]).read_text())
    for which in ("reference", "target"):
        samples = predictions["lm_eval"][which]["samples"][LOCAL_TASK]
        assert len(samples) == 8 and all(s["acc"] in (0, 1, 0.0, 1.0) for s in samples)
        assert predictions["lm_eval"][which]["results"][LOCAL_TASK]["acc,none"] == pytest.approx(
            sum(s["acc"] for s in samples) / 8
        )
    report = check_adaptation(directory, str(python))
    assert report.passed, report.summary
    # The stage's install step, on this same env (not a second one): lm-eval[hf] is already there, so
    # uv finds it satisfied without the network.
    (directory / ".venv").symlink_to(python.parent.parent, target_is_directory=True)
    monkeypatch.setenv("UV_OFFLINE", "1")
    assert prepare_lm_eval(directory) is None
