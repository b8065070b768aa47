"""Read what a model directory says about itself: config, card, tokenizer, remote code, pooling.

Shared by every source: a local directory, a snapshot in the HF cache, and the small files
fetched from the Hub. Weights are not read here (see safetensors_header).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ab_runtime.spec import TOKENIZER_FILES
from ascendbridge import capped_read
from ascendbridge.discovery.errors import DiscoveryError

CONFIG_FILE = "config.json"
MODULES_FILE = "modules.json"


def check_tokenizer_sizes(files: dict[str, int | None]) -> None:
    """Refuse (corrupt_config, on the first attempt) a model whose top-level tokenizer file is over
    capped_read.TOKENIZER_MAX_BYTES: the model's runs would read it whole (a MemoryError, retried)."""
    limit = capped_read.TOKENIZER_MAX_BYTES
    for name, size in files.items():
        if name in TOKENIZER_FILES and size is not None and size > limit:
            raise DiscoveryError(
                f"{name} is {size} bytes, over the {limit // capped_read.MiB} MiB limit for a "
                "tokenizer file; not a usable model",
                "corrupt_config",
            )


PROCESSOR_FILES = frozenset(
    {
        "preprocessor_config.json",
        "processor_config.json",
        "image_processor_config.json",
        "feature_extractor_config.json",
        "video_preprocessor_config.json",
    }
)
REMOTE_CODE_PATTERN = re.compile(
    r"^(modeling|configuration|tokenization|processing|image_processing|feature_extraction)_.*\.py$"
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf")
POOLING_KEYS = (
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_weightedmean_tokens", "weightedmean"),
    ("pooling_mode_lasttoken", "lasttoken"),
)


def load_json(path: Path, what: str, rule: str) -> Any:
    """Parse a JSON file (at most capped_read.CONFIG_MAX_BYTES), turning every defect into one
    DiscoveryError line."""
    try:
        return json.loads(capped_read.read_text(path, capped_read.CONFIG_MAX_BYTES))
    except FileNotFoundError:
        raise DiscoveryError(f"{what} not found at {path}", rule) from None
    except capped_read.FileTooLargeError as exc:
        raise DiscoveryError(f"{what}: {exc.strerror}", rule) from None
    except UnicodeDecodeError:
        raise DiscoveryError(f"{what} is not UTF-8 text ({path})", rule) from None
    except json.JSONDecodeError as exc:
        raise DiscoveryError(
            f"{what} is not valid JSON ({path}: line {exc.lineno} column {exc.colno}: {exc.msg})", rule
        ) from None
    except OSError as exc:
        raise DiscoveryError(f"cannot read {what} ({path}: {exc.strerror or exc})", rule) from None


def load_config(path: Path) -> dict[str, Any]:
    config = load_json(path, "config.json", "corrupt_config")
    if not isinstance(config, dict):
        raise DiscoveryError(f"config.json is not a JSON object ({path})", "corrupt_config")
    for key in ("architectures", "model_type"):
        value = config.get(key)
        if (
            key == "architectures"
            and value is not None
            and not (isinstance(value, list) and all(isinstance(a, str) for a in value))
        ):
            raise DiscoveryError(
                f"config.json: 'architectures' must be a list of class names ({path})", "corrupt_config"
            )
        if key == "model_type" and value is not None and not isinstance(value, str):
            raise DiscoveryError(f"config.json: 'model_type' must be a string ({path})", "corrupt_config")
    return config


def is_weight_file(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(WEIGHT_SUFFIXES) and base not in (
        "training_args.bin",
        "optimizer.pt",
        "scheduler.pt",
        "rng_state.pth",
    )


def remote_code_files(names: Iterable[str], config: dict[str, Any]) -> list[str]:
    """Custom-code files shipped with the model, plus the modules its auto_map points to."""
    found = {n for n in names if "/" not in n and REMOTE_CODE_PATTERN.match(n)}
    auto_map = config.get("auto_map")
    if isinstance(auto_map, dict):
        for target in auto_map.values():
            for ref in target if isinstance(target, list) else [target]:
                if isinstance(ref, str) and "." in ref:
                    found.add(ref.split("--")[-1].rsplit(".", 1)[0] + ".py")
    return sorted(found)


def needs_remote_code(config: dict[str, Any], code_files: list[str]) -> bool:
    return bool(config.get("auto_map")) or bool(code_files)


def has_any(names: Iterable[str], wanted: frozenset[str]) -> bool:
    return any(n.rsplit("/", 1)[-1] in wanted for n in names)


def card_metadata(readme: Path) -> tuple[dict[str, Any], str | None]:
    """(front matter, warning) of a model card; a broken card is a warning, never an error."""
    if not readme.is_file():
        return {}, None
    try:
        from huggingface_hub.repocard import RepoCard

        text = capped_read.read_text(readme, capped_read.CONFIG_MAX_BYTES).removeprefix("\ufeff")
        return RepoCard(text).data.to_dict(), None
    except capped_read.FileTooLargeError as exc:
        return {}, f"README.md not read: {exc.strerror}"
    except Exception as exc:  # a card's YAML is free text written by people
        return {}, f"README.md front matter unreadable: {type(exc).__name__}"


def license_of(card: dict[str, Any]) -> str | None:
    value = card.get("license")
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    if value == "other" and card.get("license_name"):
        value = f"other ({card['license_name']})"
    return str(value) if value else None


def pipeline_tag(card: dict[str, Any]) -> str | None:
    """The card's `pipeline_tag` (the task the Hub lists the model under), if it names one."""
    value = card.get("pipeline_tag")
    return value if isinstance(value, str) and value else None


def gated_in_card(card: dict[str, Any]) -> bool | None:
    """A card that asks for access (extra_gated_*) belongs to a gated repo; otherwise unknown."""
    if card.get("gated") in (True, "auto", "manual") or any(k.startswith("extra_gated") for k in card):
        return True
    return None


def sentence_transformers_info(directory: Path) -> tuple[bool, str | None, bool]:
    """(is a sentence-transformers model, pooling mode, normalizes) from modules.json."""
    modules_path = directory / MODULES_FILE
    if not modules_path.is_file():
        return False, None, False
    modules = load_json(modules_path, MODULES_FILE, "corrupt_config")
    if not isinstance(modules, list):
        raise DiscoveryError(f"{MODULES_FILE} is not a JSON list ({modules_path})", "corrupt_config")
    pooling: str | None = None
    normalize = False
    for module in modules:
        if not isinstance(module, dict):
            continue
        kind = str(module.get("type", ""))
        if kind.endswith("Normalize"):
            normalize = True
        if kind.endswith("Pooling"):
            pooling = _pooling_mode(directory / str(module.get("path", "")) / CONFIG_FILE)
    return True, pooling, normalize


def _pooling_mode(path: Path) -> str | None:
    if not path.is_file() or ".." in path.parts:
        return None
    cfg = load_json(path, "pooling config", "corrupt_config")
    if not isinstance(cfg, dict):
        return None
    if isinstance(cfg.get("pooling_mode"), str):
        return cfg["pooling_mode"]
    for key, mode in POOLING_KEYS:
        if cfg.get(key) is True:
            return mode
    return None


def config_dtype(config: dict[str, Any]) -> str | None:
    """transformers 5 writes 'dtype', older versions 'torch_dtype'."""
    for key in ("dtype", "torch_dtype"):
        value = config.get(key)
        if isinstance(value, str) and value not in ("auto", ""):
            return value.removeprefix("torch.")
    return None
