"""AscendBridge adaptation runtime: copied verbatim into every `adaptations/<name>/ab_runtime/`.

It runs inside the adaptation's own uv environment (torch + transformers, optionally torch_npu)
and never imports the framework, so a generated package stays self-contained. Modules:
device (npu -> cuda -> cpu selection, the only NPU-specific code), families (task-family inputs
and outputs), depth (dry-run depth reduction), loading (model from config or weights), demo.
Laid out like the stages: the modules several stages use sit here (harness, measure, comparator,
accuracy_standard, ...); `optimize/` is the optimizer's side (pass catalogue, search, confirmation,
perf run), `bench/` the benchmark's (benchmark_run), `business/` the business benchmark's (run) and
`train/` the training harness (run, contract, verify, supervise).
"""

# The RESULT line's marker (ab_runtime/result.py writes and reads that line; the gates parse it, never free text).
from .result import RESULT_MARKER

__all__ = ["RESULT_MARKER"]
