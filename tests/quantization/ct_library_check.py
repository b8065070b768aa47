"""Runs in the tool environment: compressed-tensors' own library reads a checkpoint, and what it
computes is set beside what ab_runtime.quant reads and computes from the same files.

    python ct_library_check.py CHECKPOINT_DIR FLOAT_MODEL_DIR

Prints one JSON line: the library's parse of the config (format, strategies), the largest
difference between each weight the library decompresses and the reader's int8 x scale, and the
logits of the library's model (transformers' compressed-tensors loader, decompressed, with the
library's own per-token activation quantization) against the reference forward's.
"""

import json
import sys
from pathlib import Path

import torch
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import QuantizationConfig
from transformers import AutoModelForCausalLM
from transformers.utils.quantization_config import CompressedTensorsConfig

from ab_runtime.quant.formats import read_quantized
from ab_runtime.quant.reference import build_reference_model

checkpoint, float_model = Path(sys.argv[1]), Path(sys.argv[2])
config = json.loads((checkpoint / "config.json").read_text())["quantization_config"]
parsed = QuantizationConfig.model_validate(config)
group = next(iter(parsed.config_groups.values()))
compressor = ModelCompressor.from_compression_config(CompressedTensorsConfig.from_dict(config))
library = AutoModelForCausalLM.from_pretrained(
    str(checkpoint), dtype=torch.float32, quantization_config=CompressedTensorsConfig(run_compressed=False)
).eval()
ours = read_quantized(checkpoint)
weight_diff = 0.0
for name, linear in ours.linears().items():
    dequantized = linear.weight.to(torch.float32) * linear.scale.to(torch.float32)
    decompressed = library.get_submodule(name).weight.detach().to(torch.float32)
    weight_diff = max(weight_diff, float((dequantized - decompressed).abs().max()))
reference = build_reference_model(float_model, ours)
ids = torch.randint(3, int(library.config.vocab_size), (2, 32), generator=torch.Generator().manual_seed(7))
with torch.no_grad():
    a = library(ids, use_cache=False).logits.flatten(0, 1)
    b = reference(ids, use_cache=False).logits.flatten(0, 1)
cosine = torch.nn.functional.cosine_similarity(a, b, dim=-1)
print(
    json.dumps(
        {
            "format": parsed.format,
            "quant_method": parsed.quant_method,
            "weights": {"strategy": str(group.weights.strategy), "num_bits": group.weights.num_bits},
            "input_activations": {
                "strategy": str(group.input_activations.strategy),
                "dynamic": group.input_activations.dynamic,
            },
            "compressor_format": str(compressor.quantization_config.format),
            "quantized_modules": len(ours.linears()),
            "weight_max_abs_diff": weight_diff,
            "logits_cosine_min": float(cosine.min()),
            "logits_max_abs_err_scaled": float((a - b).abs().max() / b.abs().max()),
        }
    )
)
