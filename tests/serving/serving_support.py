"""What the serving tests share: a tiny Llama config.json the plan and the renderer read, and the
skip of a test that needs the installed serve environment (the real engine)."""

from __future__ import annotations

import os

import pytest

from serving.env import ready, serve_python

SERVE_PYTHON = serve_python(os.environ.get("ASCENDBRIDGE_SERVING_PYTHON", ""))
NEEDS_ENGINE = pytest.mark.skipif(
    not ready(SERVE_PYTHON.parent.parent),
    reason=f"no installed serve environment at {SERVE_PYTHON}: install it with "
    "`uv run python -m serving.env` (CI does, before the tests)",
)

GiB = 1024**3
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 256,
}
