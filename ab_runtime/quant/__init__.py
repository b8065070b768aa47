"""Quantized checkpoints, executed by reference: the saved int8 weights and scales read back and run
in torch exactly as the format defines them, so accuracy figures come from the checkpoint a
serving engine would load, not from the tool's own claims (docs/quantization.md)."""
