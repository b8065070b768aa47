"""What the serving tests share: a tiny Llama config.json the plan and the renderer read."""

from __future__ import annotations

GiB = 1024**3
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 256,
}
