"""`benchmark_tool.py compare`: accuracy of outputs B against outputs A, per output tensor.

Run in an adaptation's interpreter: `python compare_outputs.py A.pt B.pt [--dtype D]`. Each file
is an AscendBridge outputs file (its target outputs are compared) or any torch.save'd tensor /
tuple / dict of tensors. Prints one JSON object: the framework comparator's result.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _framework import framework_module


def _load(path: Path) -> tuple[Any, Any, str]:
    """(outputs, float64 reference or None, dtype name) from one file."""
    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise SystemExit(f"error: {path}: file not found") from None
    except Exception as exc:
        raise SystemExit(f"error: {path}: cannot be loaded ({type(exc).__name__})") from None
    if isinstance(data, dict) and data.get("format") == "ascendbridge.outputs/1":
        return data["target"], data.get("reference_fp64"), str(data.get("dtype", "float32"))
    comparator = framework_module("comparator")
    flat = comparator.flatten_outputs(data)
    dtypes = {str(t.dtype).replace("torch.", "") for t in flat.values() if t.is_floating_point()}
    return data, None, dtypes.pop() if len(dtypes) == 1 else "float32"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--dtype", help="dtype B computed in (default: from the file)")
    parser.add_argument("--tolerances", default="{}", help="JSON object, the spec's tolerances")
    args = parser.parse_args(argv)
    comparator = framework_module("comparator")
    ref, fp64, _ = _load(Path(args.a))
    target, _, dtype = _load(Path(args.b))
    thresholds = comparator.Thresholds.from_spec(json.loads(args.tolerances))
    print(json.dumps(comparator.compare_outputs(target, ref, thresholds, args.dtype or dtype, fp64)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
