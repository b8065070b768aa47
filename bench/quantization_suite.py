#!/usr/bin/env python3
"""Quantization suite: per model and scheme, msModelSlim's or LLM-Compressor's checkpoint against the
float model, side by side in one run: the accuracy figures of the reference execution and their verdict under the
framework's standard, the weight size ratio, the tool's and the evaluation's seconds, and where the
checkpoint is served.

The same steps the quantization stage runs (quantization/steps.py: the shipped practice with the
recorded calibration sample, `msmodelslim quant --device cpu`, or LLM-Compressor's oneshot W8A8
with the same sample; `ab_runtime.quant.evaluate`), on model directories built here with seeded
random weights: two demo configurations and a held-out Llama configuration (hidden 256, 4 layers,
8 heads of 32; not in the demo set), in the shared CPU torch test environment with the stage's
tools added. The ascendv1 checkpoints are not served on this host: the `ascend` quantization
method needs vLLM-Ascend (the serving stage renders its artefacts, docs/quantization.md).

  uv run python bench/quantization_suite.py [--models tiny-llama32,tiny-qwen2,held-out-llama-h256]
      [--schemes W8A8_DYNAMIC,W8A16,CT_W8A8] [--out bench_quantization.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.support.torch_env import torch_env_python  # noqa: E402
from quantization.env import TOOL_PINS  # noqa: E402
from quantization.evidence import verdict_of  # noqa: E402
from quantization.settings import PRACTICES, SCHEMES  # noqa: E402
from quantization.steps import (  # noqa: E402
    CALIBRATION,
    checkpoint_files,
    compress,
    evaluate,
    file_bytes,
    quantize,
    tool_model_type,
    write_practice,
)

HELD_OUT = {  # a Llama of a size the demo set does not have, with a head size vLLM's CPU attention serves
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 4096,
    "max_position_embeddings": 512,
}
BUILD = """
import json, sys, torch, transformers
from pathlib import Path
source, target = sys.argv[1], Path(sys.argv[2])
torch.manual_seed(0)
if source.startswith("{"):
    data = json.loads(source)
    config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
else:
    config = transformers.AutoConfig.from_pretrained(source)
model = transformers.AutoModelForCausalLM.from_config(config)
model.save_pretrained(target)
print(sum(p.numel() for p in model.parameters()))
"""
# msModelSlim loads a tokenizer with the model: every model gets the byte-level one tiny-llama32 ships
TOKENIZER_SOURCE = REPO / "demo_models" / "tiny-llama32"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
SERVED = "not on this host: --quantization ascend needs vLLM-Ascend (artefacts rendered by the serving stage)"
TIMEOUT_S = 1800.0


def build_model(python: Path, name: str, target: Path) -> int:
    """The model directory with seeded random weights; its parameter count."""
    source = json.dumps(HELD_OUT) if name == "held-out-llama-h256" else str(REPO / "demo_models" / name)
    out = subprocess.run([str(python), "-c", BUILD, source, str(target)], capture_output=True, text=True, check=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_SOURCE / name, target / name)
    return int(out.stdout.strip().splitlines()[-1])


def one_scheme(python: Path, model_dir: Path, scheme: str, work: Path) -> dict[str, Any]:
    """Quantize and evaluate one scheme as the stage does; its row (a tool failure is a row too)."""
    config = json.loads((model_dir / "config.json").read_text())
    checkpoint = work / scheme
    started = time.monotonic()
    with open(work / f"{scheme}.log", "w") as log:
        if scheme in PRACTICES:
            practice_file = work / f"practice-{scheme}.yaml"
            practice = write_practice(python, PRACTICES[scheme], practice_file)["id"]
            started = time.monotonic()
            quantize(python, model_dir, checkpoint, practice_file, tool_model_type(config), TIMEOUT_S, log)
        else:
            compress(python, model_dir, checkpoint, CALIBRATION, TIMEOUT_S, log)
            practice = "llmcompressor-w8a8"
    quantize_s = time.monotonic() - started
    started = time.monotonic()
    code, report, tail = evaluate(python, model_dir, checkpoint, TIMEOUT_S, work, runtime_root=REPO)
    evaluate_s = time.monotonic() - started
    figures = (report or {}).get("figures")
    verdict, reason = verdict_of(scheme, code, figures)
    before = file_bytes(sorted(model_dir.glob("*.safetensors")))
    return {
        "practice": practice,
        "figures": figures,
        "verdict": verdict,
        "reason": reason if figures else f"{reason}: {tail}",
        "size_ratio": file_bytes(checkpoint_files(checkpoint)) / before if before else None,
        "quantize_s": quantize_s,
        "evaluate_s": evaluate_s,
        "peak_rss_mb": (report or {}).get("peak_rss_mb"),
        "served": SERVED if scheme in PRACTICES else "no (the suite does not serve)",
    }


def run_suite(models: list[str], schemes: list[str], root: Path) -> list[dict[str, Any]]:
    python = torch_env_python(extra=TOOL_PINS)
    rows = []
    for name in models:
        model_dir = root / name / "model"
        parameters = build_model(python, name, model_dir)
        for scheme in schemes:
            work = root / name
            print(f"{name}: {scheme} (quantize, then the reference evaluation) ...", flush=True)
            try:
                row = one_scheme(python, model_dir, scheme, work)
            except Exception as exc:  # the tool failed on this model: the suite records it and goes on
                log = work / f"{scheme}.log"
                tail = " | ".join(log.read_text().splitlines()[-6:]) if log.is_file() else ""
                row = {"verdict": "not made", "reason": f"{exc} [log: {tail}]", "figures": None, "served": "no"}
            rows.append({"model": name, "parameters": parameters, "scheme": scheme, **row})
    return rows


def _cell(value: Any, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        "model",
        "params",
        "scheme",
        "verdict",
        "cos min",
        "max err",
        "ppl delta",
        "top-1",
        "size",
        "quant s",
        "eval s",
    )
    print(" | ".join(header))
    for r in rows:
        f = r.get("figures") or {}
        print(
            " | ".join(
                (
                    r["model"],
                    f"{r['parameters']:,}",
                    r["scheme"],
                    r["verdict"],
                    _cell(f.get("cosine_min"), ".5f"),
                    _cell(f.get("max_abs_err_scaled"), ".4f"),
                    _cell(f.get("perplexity_rel_delta"), "+.2e"),
                    _cell(f.get("top1_agreement"), ".3f"),
                    _cell(r.get("size_ratio"), ".2f") + "x",
                    _cell(r.get("quantize_s"), ".1f"),
                    _cell(r.get("evaluate_s"), ".1f"),
                )
            )
        )
    for r in rows:
        if r["verdict"] != "accepted":
            print(f"{r['model']} {r['scheme']}: {r['reason']}")
    print(f"served: the ascendv1 checkpoints {SERVED}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny-llama32,tiny-qwen2,held-out-llama-h256")
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument("--out", type=Path, help="write the rows as JSON here too")
    args = parser.parse_args()
    schemes = args.schemes.split(",")
    if unknown := [s for s in schemes if s not in SCHEMES]:
        parser.error(f"unknown scheme {', '.join(unknown)} (known: {', '.join(SCHEMES)})")
    with tempfile.TemporaryDirectory(prefix="quant-suite-") as root:
        rows = run_suite(args.models.split(","), schemes, Path(root))
    print_table(rows)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["verdict"] != "not made" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
