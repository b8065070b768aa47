"""Runs in the torch environment: a copy of an ascendv1 or compressed-tensors checkpoint with one
tensor edited the way a careless hand or a wrong tool would: a scale multiplied, two same-shaped
weights swapped, a quantized weight saved as float; or (compressed-tensors) its config claiming
static per-tensor activations its files do not have."""

import json
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

source, target, how = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
shutil.copytree(source, target)
shard = next(p for p in sorted(target.glob("*.safetensors")) if p.name.startswith(("quant_model_weights", "model")))
tensors = load_file(str(shard))
layer = "model.layers.0.self_attn"
if how == "scale":
    tensors["model.layers.1.mlp.down_proj.weight_scale"] *= 1.5
elif how == "swap":
    tensors[f"{layer}.k_proj.weight"], tensors[f"{layer}.v_proj.weight"] = (
        tensors[f"{layer}.v_proj.weight"],
        tensors[f"{layer}.k_proj.weight"],
    )
elif how == "float":
    tensors[f"{layer}.q_proj.weight"] = tensors[f"{layer}.q_proj.weight"].float()
elif how == "static":
    config = json.loads((target / "config.json").read_text())
    config["quantization_config"]["config_groups"]["group_0"]["input_activations"].update(
        dynamic=False, strategy="tensor"
    )
    (target / "config.json").write_text(json.dumps(config))
save_file(tensors, str(shard), metadata={"format": "pt"})
