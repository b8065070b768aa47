#!/usr/bin/env python3
"""Regenerate the bundled demo models under demo_models/ with transformers' REAL config classes
(`--sized`: count the parameters of the real-size configs under sized_models/ instead).

Each demo is a config.json (a truly tiny model: hidden 64, 2 layers, vocab 512; tiny-llama32 also
ships a byte-level tokenizer with a chat template), built by the config class of its architecture, then instantiated once to prove the config builds and to record
the exact parameter count in demo_models/manifest.json (tests check discovery's config estimate
against it). Needs torch + transformers: started with the framework python, it re-runs itself in
the shared test torch environment (bench/support/torch_env.py).

    uv run scripts/make_demo_models.py [--out demo_models]
    uv run scripts/make_demo_models.py --sized   # sized_models/manifest.json from the committed configs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, NoReturn

REPO_ROOT = Path(__file__).resolve().parent.parent
# Demos that ship a tokenizer (scripts/make_demo_models.py builds it: special tokens, then the 256
# byte symbols; no merges), with the chat template the serving stage's chat acceptance uses.
TOKENIZER_SPECIALS = ("<pad>", "<s>", "</s>")
WITH_TOKENIZER = ("tiny-llama32",)
QUANTIZED_DEMO = "tiny-llama32"  # a Llama msModelSlim knows, with a head size vLLM's CPU attention serves
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)

# The sizes the demos share (hidden 64, 2 layers of 4 heads, vocab 512, 256 positions) as each kind
# of model spells them: a BERT encoder, a Llama-style decoder (tiny-llama, tiny-qwen2), a BART-style
# encoder-decoder (tiny-bart, tiny-whisper).
ENCODER: dict[str, Any] = dict(
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=256,
)
DECODER: dict[str, Any] = dict(ENCODER, num_key_value_heads=2, bos_token_id=1, eos_token_id=2)


def _both_halves(**sizes: int) -> dict[str, int]:
    """An encoder-decoder whose halves are alike: each size as encoder_<key> and decoder_<key>."""
    return {f"{half}_{key}": n for half in ("encoder", "decoder") for key, n in sizes.items()}


ENCODER_DECODER: dict[str, Any] = dict(
    vocab_size=512, d_model=64, **_both_halves(layers=2, attention_heads=4, ffn_dim=128)
)

# name -> (config class, architecture, task family, description, config kwargs)
DEMOS: dict[str, tuple[str, str, str, str, dict[str, Any]]] = {
    "tiny-llama": ("LlamaConfig", "LlamaForCausalLM", "causal_lm", "Llama decoder (GQA, RoPE, SwiGLU)", DECODER),
    # Head size 32 (vLLM's CPU attention has no 16) and a byte-level tokenizer with a chat template:
    # the demo the serving stage serves on a CPU host (its vocabulary is the tokenizer's 259 ids).
    "tiny-llama32": (
        "LlamaConfig",
        "LlamaForCausalLM",
        "causal_lm",
        "Llama decoder, head size 32, byte-level tokenizer with a chat template",
        dict(
            vocab_size=259,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=32,
            max_position_embeddings=256,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        ),
    ),
    "tiny-qwen2": ("Qwen2Config", "Qwen2ForCausalLM", "causal_lm", "Qwen2 decoder (GQA, RoPE, qkv bias)", DECODER),
    "tiny-gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        "causal_lm",
        "GPT-2 decoder (learned positions, no pad token)",
        dict(vocab_size=512, n_positions=256, n_embd=64, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0),
    ),
    "tiny-bert": ("BertConfig", "BertForMaskedLM", "masked_lm", "BERT encoder with MLM head", ENCODER),
    "tiny-bert-classifier": (
        "BertConfig",
        "BertForSequenceClassification",
        "sequence_classification",
        "BERT encoder with a 3-way classification head",
        dict(ENCODER, num_labels=3),
    ),
    "tiny-t5": (
        "T5Config",
        "T5ForConditionalGeneration",
        "seq2seq",
        "T5 encoder-decoder (relative attention)",
        dict(
            vocab_size=512,
            d_model=64,
            d_kv=16,
            d_ff=128,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        ),
    ),
    "tiny-bart": (
        "BartConfig",
        "BartForConditionalGeneration",
        "seq2seq",
        "BART encoder-decoder",
        dict(ENCODER_DECODER, max_position_embeddings=256),
    ),
    "tiny-vit": (
        "ViTConfig",
        "ViTForImageClassification",
        "image_classification",
        "ViT, 32x32 images, 10 classes",
        dict(
            image_size=32,
            patch_size=8,
            num_channels=3,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            num_labels=10,
        ),
    ),
    "tiny-whisper": (
        "WhisperConfig",
        "WhisperForConditionalGeneration",
        "speech_seq2seq",
        "Whisper speech encoder-decoder, 80 mel bins, 128 frames",
        dict(
            ENCODER_DECODER,
            num_mel_bins=80,
            max_source_positions=64,
            max_target_positions=64,
            pad_token_id=1,
            bos_token_id=2,
            eos_token_id=2,
            decoder_start_token_id=3,
            suppress_tokens=[],
            begin_suppress_tokens=[],
        ),
    ),
}


SIZED_DIR = REPO_ROOT / "sized_models"
# The real-size configs (sized_models/<name>/config.json, the published config's values; where each
# came from: sized_models/README.md): name -> (board id, task family, description). Config only: every
# stage builds them with random weights.
SIZED: dict[str, tuple[str, str, str]] = {
    "qwen3-0.6b": ("sized/qwen3-0.6b", "causal_lm", "Qwen/Qwen3-0.6B's config: 28 layers, hidden 1024, vocab 151936"),
    "qwen2.5-1.5b": (
        "sized/qwen2.5-1.5b",
        "causal_lm",
        "Qwen/Qwen2.5-1.5B's shapes: 28 layers, hidden 1536, vocab 151936",
    ),
    "bert-base-uncased": ("sized/bert-base-uncased", "masked_lm", "bert-base-uncased's config: 12 layers, hidden 768"),
    "vit-base-patch16-224": (
        "sized/vit-base-patch16-224",
        "image_classification",
        "google/vit-base-patch16-224's config: 12 layers, hidden 768, 224x224 images, 1000 classes",
    ),
    "whisper-small": (
        "sized/whisper-small",
        "speech_seq2seq",
        "openai/whisper-small's config: 12 + 12 layers, d_model 768, 80 mel bins",
    ),
}


def count_sized(out: Path) -> dict[str, Any]:
    """sized_models/manifest.json: each config's architecture and exact parameter count, from the model
    built on the meta device (nothing allocated, so a 0.6 B model counts in seconds)."""
    import torch
    import transformers

    manifest: dict[str, Any] = {"transformers_version": transformers.__version__, "models": {}}
    for name, (model_id, family, description) in SIZED.items():
        config = transformers.AutoConfig.from_pretrained(out / name)
        arch = config.architectures[0]
        with torch.device("meta"):
            model = getattr(transformers, arch)(config)
        params = sum(p.numel() for p in model.parameters())
        layers = config.num_hidden_layers
        manifest["models"][name] = entry(model_id, arch, family, description, params, layers=layers)
        print(f"{name:22s} {arch:34s} {params:>13,d} parameters, {layers} layers", flush=True)
    return write_manifest(out, manifest)


def entry(model_id: str, arch: str, family: str, description: str, params: int, **extra: Any) -> dict[str, Any]:
    """One model's row of a manifest (demo_models/ or sized_models/)."""
    return {
        "model_id": model_id,
        "architecture": arch,
        "task_family": family,
        "description": description,
        "parameters": params,
        **extra,
    }


def write_manifest(out: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def in_torch_env() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def relaunch() -> int:
    """Re-run this script with the shared torch environment's interpreter."""
    sys.path.insert(0, str(REPO_ROOT))
    from bench.support.torch_env import torch_env_python

    print("starting in the shared torch environment (created on first use) ...", flush=True)
    python = str(torch_env_python())
    os.execv(python, [python, str(Path(__file__).resolve()), *sys.argv[1:]])
    return 1  # not reached


def save_tokenizer(target: Path) -> None:
    """A byte-level tokenizer (any text encodes; every id decodes) with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    symbols = [*TOKENIZER_SPECIALS, *sorted(pre_tokenizers.ByteLevel.alphabet())]
    tokenizer = Tokenizer(models.BPE(vocab={s: i for i, s in enumerate(symbols)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(TOKENIZER_SPECIALS))
    pad, bos, eos = TOKENIZER_SPECIALS
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token=pad, bos_token=bos, eos_token=eos, chat_template=CHAT_TEMPLATE
    ).save_pretrained(target)


def not_served_on_cpu(family: str, config: Any) -> bool:
    """A family vLLM serves with a head size its CPU attention lacks: the serving stage would refuse it."""
    sys.path.insert(0, str(REPO_ROOT))
    from serving.plan import CPU_HEAD_SIZES, SERVED_FAMILIES

    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return family in SERVED_FAMILIES and head not in CPU_HEAD_SIZES


def build(out: Path) -> dict[str, Any]:
    import torch
    import transformers

    torch.manual_seed(0)
    manifest: dict[str, Any] = {"transformers_version": transformers.__version__, "models": {}}
    for name, (config_cls, arch, family, description, kwargs) in DEMOS.items():
        config = getattr(transformers, config_cls)(**kwargs)
        config.architectures = [arch]
        model = getattr(transformers, arch)(config)  # proves the config builds the real model
        params = sum(p.numel() for p in model.parameters())
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        config.save_pretrained(target)
        if name in WITH_TOKENIZER:
            save_tokenizer(target)
        manifest["models"][name] = entry(
            f"demo/{name}",
            arch,
            family,
            description,
            params,
            # registered with the serving stage skipped (docs/serving.md: the CPU attention refuses the head)
            **({"skip_stages": ["serving"]} if not_served_on_cpu(family, config) else {}),
            # the main job's quantized causal LM (docs/quantization.md: msModelSlim knows its type)
            **({"enable_stages": ["quantization"]} if name == QUANTIZED_DEMO else {}),
        )
        print(f"{name:22s} {arch:34s} {params:>9,d} parameters", flush=True)
    return write_manifest(out, manifest)


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake is one `error:` line and exit 2, as in every CLI (ascendbridge/cli_errors.py,
    which this script cannot import: it also runs in the torch environment, without the framework)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def main() -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (default demo_models/, or sized_models/)")
    parser.add_argument("--sized", action="store_true", help="count the real-size configs' parameters instead")
    args = parser.parse_args()
    if not in_torch_env():
        return relaunch()
    if args.sized:
        count_sized(Path(args.out or SIZED_DIR))
        return 0
    out = Path(args.out or REPO_ROOT / "demo_models")
    out.mkdir(parents=True, exist_ok=True)
    build(out)
    print(f"wrote {len(DEMOS)} demo configs and manifest.json to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
