"""Tiny demo models with saved weights and a tokenizer, built once per test session.

Config-only demo models exercise dry runs; the paths that need real weights and a tokenizer
(library parity through transformers' pipelines, demo.py's answer) need a model that has both.
build_weighted_models.py makes them in the shared torch env from demo_models/ configs and records
transformers' own answers on them (REQUEST's prompt and text), which tests compare against.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import torch_env_python

BUILDER = Path(__file__).resolve().parent / "build_weighted_models.py"
REQUEST = {
    "prompt": "The capital of France is",
    "new_tokens": 5,
    "text": "It rained all day and the match was cancelled.",
    "labels": ["a cat", "a dog", "a car"],
    "vlm_prompt": "Describe this image.",
}


def build_weighted_models(out: Path) -> dict[str, dict[str, Any]]:
    """name -> {"path", and the library's answer: "label" (classifier, clip; with "score") /
    "continuation" (gpt2, qwen-vl)}; "image" -> {"path"} of the PNG the vision answers are on."""
    proc = subprocess.run(
        [str(torch_env_python()), str(BUILDER), str(REPO_ROOT / "demo_models"), str(out), json.dumps(REQUEST)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
