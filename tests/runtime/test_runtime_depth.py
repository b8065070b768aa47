"""Dry-run depth reduction: a 70B config runs in a few GiB; stacks are found generically.

The 70B case runs the real demo.py on Llama-3-70B's published shape (80 layers, hidden 8192,
vocab 128256) in bfloat16: depth drops to 1 layer, every other dimension stays real, and the
process's peak memory is measured.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runtime.rt_support import make_adaptation, parse_result, run_demo, run_probe

GiB = 1024**3
LLAMA_3_70B = dict(
    hidden_size=8192,
    intermediate_size=28672,
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
    vocab_size=128256,
    max_position_embeddings=8192,
    rope_theta=500000.0,
    rms_norm_eps=1e-5,
    bos_token_id=128000,
    eos_token_id=128001,
    architectures=["LlamaForCausalLM"],
)

CASES = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import transformers as T
from ab_runtime.depth import apply_depths, distribute, find_stacks, plan_depth

def stacks(config):
    return [(s.label, s.total, s.aliases, s.minimum) for s in find_stacks(config)]

build = lambda config: T.AutoModelForCausalLM.from_config(config)
llama = T.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=8, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256)
full = plan_depth(llama, build, torch.float32, 10**9, None)
tight = plan_depth(llama, build, torch.float32, 800_000, None)
floor = plan_depth(llama, build, torch.float32, 1, None)

def fragile(config):
    torch.linspace(0, 1, 3).tolist()  # drop-path schedules in some model code: impossible on meta
    return build(config)

sized = plan_depth(llama, fragile, torch.float32, 800_000, None)
bart = T.BartConfig(encoder_layers=6, decoder_layers=4)
bart_stacks = find_stacks(bart)
bart_cut = apply_depths(bart, bart_stacks, [2, 1])
gemma = T.Gemma3TextConfig(num_hidden_layers=12)
gemma_stacks = find_stacks(gemma)
gemma_cut = apply_depths(gemma, gemma_stacks, [2])
t5 = find_stacks(T.T5Config(num_layers=6, num_decoder_layers=6))
print(json.dumps({
    "full": [full.layers_built, full.layers_total, full.depth_reduced, full.over_budget],
    "tight": [tight.layers_built, tight.layers_total, tight.param_bytes, tight.over_budget, tight.config.num_hidden_layers],
    "floor": [floor.layers_built, floor.over_budget],
    "fallback": [sized.sized_by, sized.layers_built, sized.param_bytes, tight.layers_built],
    "swin": stacks(T.SwinConfig(depths=[2, 2, 6, 2])),
    "bart": stacks(bart), "bart_cut": [bart_cut.encoder_layers, bart_cut.num_hidden_layers, bart_cut.decoder_layers],
    "gemma_min": gemma_stacks[0].minimum, "gemma_cut": gemma_cut.layer_types,
    "t5": stacks(T.T5Config(num_layers=6, num_decoder_layers=6)), "t5_split": distribute(t5, 4),
    "whisper": stacks(T.WhisperConfig(encoder_layers=4, decoder_layers=2)),
    "ved": stacks(T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(T.ViTConfig(), T.GPT2Config(n_layer=3))),
}))
"""


def test_depth_planning_on_real_configs(torch_python: Path) -> None:
    out = run_probe(torch_python, CASES)
    assert out["full"] == [8, 8, False, False]
    built, total, param_bytes, over, config_layers = out["tight"]
    assert 1 < built < total == 8 and param_bytes <= 800_000 and not over and config_layers == built
    assert out["floor"] == [1, True]  # cannot go below one layer: recorded as over budget
    sized_by, built, estimate, exact_built = out["fallback"]
    assert sized_by.startswith("config estimate (meta build failed")
    assert 1 <= built < 8 and abs(built - exact_built) <= 1 and estimate <= 800_000
    assert out["swin"] == [[f"depths[{i}]", d, [], 1] for i, d in enumerate([2, 2, 6, 2])]  # num_layers counts stages
    # BART's num_hidden_layers mirrors encoder_layers (stored or mapped, by version): never a third stack
    assert [s[:2] for s in out["bart"]] == [["encoder_layers", 6], ["decoder_layers", 4]]
    assert out["bart_cut"] == [2, 2, 1]
    assert out["gemma_min"] == 2 and sorted(set(out["gemma_cut"])) == ["full_attention", "sliding_attention"]
    assert [s[0] for s in out["t5"]] == ["num_layers", "num_decoder_layers"] and out["t5_split"] == [2, 2]
    assert [s[:2] for s in out["whisper"]] == [["encoder_layers", 4], ["decoder_layers", 2]]
    assert [s[:2] for s in out["ved"]] == [["encoder.num_hidden_layers", 12], ["decoder.n_layer", 3]]


@pytest.mark.timeout(420)
def test_llama_3_70b_config_dry_run_fits_in_a_few_gib(torch_python: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "llama-3-70b"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"model_type": "llama", **LLAMA_3_70B}))
    spec = {
        "name": "llama-3-70b",
        "model": {"model_id": "meta-llama/Meta-Llama-3-70B", "source": "local", "path": "model", "has_weights": False},
        "task_family": "causal_lm",
        "model_class": "LlamaForCausalLM",
        "inputs": {"batch_size": 1, "seq_len": 8},
    }
    adaptation = make_adaptation(tmp_path / "adapt", spec)
    (adaptation / "model").symlink_to(model_dir)  # a relative path resolves against the adaptation dir
    proc = run_demo(torch_python, adaptation, "--dry-run", "--dtype", "bfloat16", timeout=400)
    result = parse_result(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result["ok"] and result["depth_reduced"] is True
    assert (result["layers_built"], result["layers_total"]) == (1, 80)
    assert result["outputs"]["logits"]["shape"] == [1, 8, 128256] and result["outputs"]["logits"]["finite"]
    # full model: 70.6e9 parameters = 131 GiB in bf16; one layer plus embeddings is ~5.5 GiB
    assert result["param_bytes"] < 6 * GiB
    assert result["host_peak_rss_bytes"] < 8 * GiB
    assert "layers: 1 of 80 built" in proc.stdout


PROXY = """
import json, sys
sys.path.insert(0, sys.argv[1])
import transformers as T
from pathlib import Path
from ab_runtime.depth import proxy_config
from ab_runtime.errors import SpecError
from ab_runtime.train.harness import build_model

whisper, whisper_proxy = proxy_config(T.WhisperConfig(encoder_layers=4, decoder_layers=2), 3)
gemma, gemma_proxy = proxy_config(T.Gemma3TextConfig(num_hidden_layers=12), 1)
try:
    proxy_config(T.BertConfig(num_hidden_layers=2), 3)
    refused = None
except SpecError as exc:
    refused = str(exc)
model, _, config = build_model(Path(sys.argv[2]), 0, {}, proxy_depth=1)
print(json.dumps({
    "whisper": [whisper.encoder_layers, whisper.decoder_layers, whisper_proxy],
    "gemma": [gemma.num_hidden_layers, sorted(set(gemma.layer_types)), gemma_proxy["stacks"]],
    "refused": refused,
    "trained": [config.num_hidden_layers, len(model.model.layers)],
}))
"""


def test_a_proxy_cuts_every_stack_and_the_training_harness_builds_it(torch_python: Path) -> None:
    """`--depth N` in the runtime: each stack at most N (a shorter one whole, one layer of each kind
    kept), N past the model's layers refused in one line, and the training harness's model built at N."""
    tiny_llama = Path(__file__).resolve().parents[2] / "demo_models" / "tiny-llama"  # 2 layers
    out = run_probe(torch_python, PROXY, str(tiny_llama))
    assert out["whisper"] == [
        3,
        2,
        {"layers": 3, "of": 4, "stacks": {"encoder_layers": [3, 4], "decoder_layers": [2, 2]}},
    ]
    gemma_layers, kinds, stacks = out["gemma"]
    assert (
        gemma_layers == 2
        and kinds == ["full_attention", "sliding_attention"]
        and stacks == {"num_hidden_layers": [2, 12]}
    )
    assert out["refused"] == "depth 3 is not within the model's 2 layers (a proxy builds 1 to 2)"
    assert out["trained"] == [1, 1]
