"""Runs in the torch environment: demo/tiny-llama32 (head 32, a tokenizer) with seeded random weights,
saved as a model directory msModelSlim and the reference forward can load."""

import shutil
import sys
from pathlib import Path

import torch
import transformers

source, target = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(source))
model.save_pretrained(target)
for extra in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
    shutil.copy(source / extra, target / extra)
print(target)
