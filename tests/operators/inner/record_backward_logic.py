"""The recorder's training step on a tiny module (prints one JSON).

    python record_backward_logic.py RUNTIME_PARENT

A Linear -> ReLU -> Linear net recorded for a forward and one training step: ReLU's backward
(`threshold_backward`) exists only in the backward pass; the model's mode, requires_grad flags and
gradients are as they were afterwards.
"""

from __future__ import annotations

import json
import sys

sys.path.insert(0, sys.argv[1])

import torch

from ab_runtime.ops import record


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.proj(x)))


torch.manual_seed(0)
net = Net().eval()
net.head.bias.requires_grad_(False)  # a frozen parameter stays frozen
x = torch.randn(3, 8)
forward_only = record.profile(record.record(net, [("forward", lambda: net(x))]), {})
trained = record.profile(record.record(net, [("forward", lambda: net(x))], lambda: net(x).float().mean()), {})
print(
    json.dumps(
        {
            "forward_only": forward_only["ops"],
            "trained": trained["ops"],
            "training_mode": net.training,
            "grads": [p.grad is not None for p in net.parameters()],
            "requires_grad": {n: p.requires_grad for n, p in net.named_parameters()},
        }
    )
)
