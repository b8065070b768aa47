"""Runs in the tool environment: LLM-Compressor's `oneshot` quantizes a causal LM to a
compressed-tensors W8A8 checkpoint (int8 weights per output channel, int8 activations per token
at run time, symmetric; the `W8A8` preset of compressed-tensors), what vLLM loads with its
`compressed-tensors` method. The recipe is SmoothQuant (strength 0.8, calibrated on the sample)
then round-to-nearest quantization of every Linear but the head, as vLLM's INT8 W8A8 guide does
(without its GPTQ step, which needs far more calibration text than the recorded sample).

    python llmcompressor_w8a8.py MODEL_DIR CALIBRATION_JSONL OUT_DIR

The calibration file is the stage's sample (msModelSlim's `inputs_pretokenized` field). Prints
one line `LLMCOMPRESSOR={"tool_version", "compressed_tensors_version", "recipe", "calibration_n"}`.
"""

import json
import sys
from importlib.metadata import version
from pathlib import Path

from datasets import Dataset
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import QuantizationModifier
from llmcompressor.modifiers.transform.smoothquant import SmoothQuantModifier
from transformers import AutoModelForCausalLM, AutoTokenizer

SMOOTHING_STRENGTH = 0.8
MAX_SEQ = 256

model_dir, calibration, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
texts = [json.loads(line)["inputs_pretokenized"] for line in calibration.read_text().splitlines() if line.strip()]
tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="auto")
samples = Dataset.from_dict(
    {"input_ids": [tokenizer(t, truncation=True, max_length=MAX_SEQ)["input_ids"] for t in texts]}
)
recipe = [
    SmoothQuantModifier(smoothing_strength=SMOOTHING_STRENGTH),
    QuantizationModifier(targets="Linear", scheme="W8A8", ignore=["lm_head"]),
]
oneshot(
    model=model,
    dataset=samples,
    recipe=recipe,
    num_calibration_samples=len(texts),
    max_seq_length=MAX_SEQ,
    shuffle_calibration_samples=False,
)
model.save_pretrained(str(out), save_compressed=True)
tokenizer.save_pretrained(str(out))
record = {
    "tool_version": version("llmcompressor"),
    "compressed_tensors_version": version("compressed-tensors"),
    "recipe": (
        f"SmoothQuantModifier(smoothing_strength={SMOOTHING_STRENGTH}), "
        "QuantizationModifier(targets='Linear', scheme='W8A8', ignore=['lm_head'])"
    ),
    "calibration_n": len(texts),
}
print("LLMCOMPRESSOR=" + json.dumps(record))
