"""Operator coverage before hardware: the NPU operator table of a torch_npu release read from its
wheel (`table.py`), the gap report of a model's recorded ATen operators against it (`gaps.py`) and
the board-wide custom-operator worklist (`worklist.py`); docs/operators.md."""
