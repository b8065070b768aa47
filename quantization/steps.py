"""The steps the stage's run and its gate share: export the model to quantize, write the practice,
run msModelSlim or LLM-Compressor, evaluate a checkpoint by reference, digest a checkpoint.

Everything with torch runs in the tool environment (quantization/env.py); the framework side only
hashes files and reads JSON. The evaluation's thread count is pinned and recorded, so the gate's
fresh evaluation computes the same sums in the same order as the run's.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import IO, Any

from ab_runtime.fileops import sha256_file
from ab_runtime.result import read_result
from ascendbridge.gatekit.checker import marked_json
from ascendbridge.package.quant_files import QUANT_DIR, QUANT_EVIDENCE, QUANT_MODEL_DIR
from ascendbridge.workers.process import run_command
from quantization.env import tool_binary

WORK_DIR = QUANT_DIR  # in the adaptation directory
EVIDENCE_FILE = QUANT_EVIDENCE  # read by the dashboard and the serving stage (ascendbridge/package/quant_files.py)
MODEL_DIR = QUANT_MODEL_DIR  # the float model the tools read (exported weights); the serving stage reads it too
EXPORT_REFERENCE = f"{WORK_DIR}/export.json"
SCHEMA = "ascendbridge.quantization/1"
CALIBRATION = Path(__file__).resolve().parent / "data" / "calibration-en.jsonl"
PRACTICE_SCRIPT = Path(__file__).resolve().parent / "inner" / "practice.py"
LLMCOMPRESSOR_SCRIPT = Path(__file__).resolve().parent / "inner" / "llmcompressor_w8a8.py"
ASCEND_DESCRIPTION = "quant_model_description.json"  # msModelSlim's ascendv1 format
EVAL_THREADS = 2
# msModelSlim's model adapters by HF model_type; any other type uses its default adapter.
TOOL_MODEL_TYPES = {"llama": "Llama", "qwen2": "Qwen2.5", "qwen3": "Qwen3"}


class StepError(RuntimeError):
    """A step failed; `rule` names it for the diagnosis."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def checkpoint_format(checkpoint: Path) -> str:
    """`ascendv1` (msModelSlim's description beside the weights) or `compressed-tensors` (LLM-Compressor's)."""
    return "ascendv1" if (checkpoint / ASCEND_DESCRIPTION).is_file() else "compressed-tensors"


def checkpoint_files(checkpoint: Path) -> list[Path]:
    """What the checkpoint is: its description and its weight shards (what vLLM-Ascend loads), or
    for compressed-tensors the config.json holding its quantization_config and its shards."""
    if checkpoint_format(checkpoint) == "ascendv1":
        return [checkpoint / ASCEND_DESCRIPTION, *sorted(checkpoint.glob("quant_model_weights*.safetensors"))]
    return [checkpoint / "config.json", *sorted(checkpoint.glob("model*.safetensors"))]


def checkpoint_digest(checkpoint: Path) -> str:
    """sha256 over each file's name and sha256: one edited scale or swapped tensor changes it."""
    lines = [f"{p.name} {sha256_file(p)}\n" for p in checkpoint_files(checkpoint) if p.is_file()]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def file_bytes(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def calibration_record(path: Path = CALIBRATION) -> dict[str, Any]:
    """The calibration sample as the evidence records it: the file's name, sha256 and item count."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return {"file": path.name, "sha256": sha256_file(path), "n": len(lines)}


def export(
    python: Path, directory: Path, pretrained: bool, timeout_s: float, log: IO[str] | None = None
) -> dict[str, Any]:
    """The package's model saved as a model directory (its real weights, or config-initialised from
    the recipe's seed) by the runtime's serving export, run in the package with its runtime copy."""
    argv = [
        str(python), "-m", "ab_runtime.serve.export", "--spec", str(directory.resolve() / "adaptation.json"),
        "--out", MODEL_DIR, "--reference", EXPORT_REFERENCE, "--prompts", "1", "--prompt-len", "4",
        "--new-tokens", "2", *(["--use-pretrained"] if pretrained else []),
    ]  # fmt: skip
    result = run_command(argv, cwd=directory, timeout_s=timeout_s, log=log)
    parsed = read_result(result.output)
    if not result.ok or not parsed or not parsed.get("ok"):
        error = (parsed or {}).get("error") or ("timed out" if result.timed_out else result.tail_line())
        raise StepError("quantization_export_failed", f"exporting the model to quantize failed: {error}")
    return parsed


def write_practice(python: Path, practice_id: str, out: Path, calibration: Path = CALIBRATION) -> dict[str, Any]:
    """msModelSlim's shipped practice, copied to `out` with the calibration file as its dataset."""
    result = run_command([str(python), str(PRACTICE_SCRIPT), practice_id, str(calibration), str(out)], timeout_s=300)
    record = marked_json(result.output, "PRACTICE=")
    if not result.ok or record is None:
        raise StepError("quantization_practice_failed", f"reading practice {practice_id}: {result.tail_line()}")
    return record


def tool_model_type(config: dict[str, Any]) -> str:
    model_type = str(config.get("model_type", ""))
    return TOOL_MODEL_TYPES.get(model_type, model_type.capitalize() or "Default")


def quantize(
    python: Path, model_dir: Path, out: Path, practice: Path, model_type: str, timeout_s: float, log: IO[str] | None
) -> list[str]:
    """`msmodelslim quant` on the CPU with the practice file (never --quant_type: it may prompt)."""
    argv = [
        str(tool_binary(python)), "quant", "--model_path", str(model_dir), "--save_path", str(out),
        "--device", "cpu", "--model_type", model_type, "--config_path", str(practice),
    ]  # fmt: skip
    result = run_command(argv, timeout_s=timeout_s, log=log)
    if not result.ok:
        why = "timed out" if result.timed_out else result.tail_line()
        raise StepError("quantization_tool_failed", f"msmodelslim quant ({out.name}) failed: {why}")
    return argv[1:]


def compress(
    python: Path, model_dir: Path, out: Path, calibration: Path, timeout_s: float, log: IO[str] | None
) -> tuple[list[str], dict[str, Any]]:
    """LLM-Compressor's oneshot W8A8 (quantization/inner/llmcompressor_w8a8.py) in the tool
    environment: (its argv, its record: tool and compressed-tensors versions, recipe, sample size)."""
    argv = [str(python), str(LLMCOMPRESSOR_SCRIPT), str(model_dir), str(calibration), str(out)]
    result = run_command(argv, timeout_s=timeout_s, log=log, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    record = marked_json(result.output, "LLMCOMPRESSOR=")
    if not result.ok or record is None:
        why = "timed out" if result.timed_out else result.tail_line()
        raise StepError("quantization_tool_failed", f"llmcompressor oneshot ({out.name}) failed: {why}")
    return [LLMCOMPRESSOR_SCRIPT.name, *argv[2:]], record


def evaluate(
    python: Path, model_dir: Path, checkpoint: Path, timeout_s: float, cwd: Path, runtime_root: Path | None = None
) -> tuple[int | None, dict[str, Any] | None, str]:
    """ab_runtime.quant.evaluate --json in the tool environment: (exit code, report, last line).
    `-m` imports the copy in `cwd` (the package's in the run); the gate runs elsewhere with the
    framework's copy on PYTHONPATH (`runtime_root`)."""
    argv = [str(python), "-m", "ab_runtime.quant.evaluate", "--model", str(model_dir.resolve())]
    argv += ["--quantized", str(checkpoint.resolve()), "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": str(EVAL_THREADS), "MKL_NUM_THREADS": str(EVAL_THREADS)}
    if runtime_root is not None:
        env["PYTHONPATH"] = str(runtime_root)
    result = run_command(argv, cwd=cwd, env=env, timeout_s=timeout_s)
    report = _json_object(result.output) if result.exit_code in (0, 1) else None
    return result.exit_code, report, result.tail_line()


def _json_object(output: str) -> dict[str, Any] | None:
    """The indented JSON object the evaluation prints (from a line `{` to a line `}`), warnings aside."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line == "{"]
    if not starts:
        return None
    ends = [i for i, line in enumerate(lines) if line == "}" and i > starts[-1]]
    try:
        value = json.loads("\n".join(lines[starts[-1] : ends[0] + 1])) if ends else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def model_digest(model_dir: Path) -> str:
    """sha256 over the float model's config and weight files: the reference every figure compares with."""
    files = [model_dir / "config.json", *sorted(model_dir.glob("*.safetensors"))]
    lines = [f"{p.name} {sha256_file(p)}\n" for p in files if p.is_file()]
    return hashlib.sha256("".join(lines).encode()).hexdigest()
