"""Build the FixContext a remedy consults: the model's config and the policy around it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ascendbridge.package.spec import AdaptationSpec
from healing.rules import FixContext

TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def model_config(spec: AdaptationSpec, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config discovery stored on the board, else config.json of a local model directory."""
    config = (metadata or {}).get("config")
    if isinstance(config, dict) and config:
        return config
    if not spec.model.path:
        return {}
    try:
        value = json.loads((Path(spec.model.path) / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def fix_context(spec: AdaptationSpec, allow_remote_code: bool, metadata: dict[str, Any] | None = None) -> FixContext:
    return FixContext(
        model_config=model_config(spec, metadata),
        allow_remote_code=allow_remote_code,
        has_hf_token=any(os.environ.get(name) for name in TOKEN_VARIABLES),
    )
