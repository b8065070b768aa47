"""The steps the stage's run and its gate share: export the package's model and reference, read the
plan's inputs, plan, render, and launch the server exactly as serve.sh does.

The plan's inputs are recorded in the evidence (`plan_inputs`), so the gate recomputes the same
plans from them and the exported config, and re-renders serve/ from those plans.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import IO, Any

import psutil

from ab_runtime.result import EXIT_BAD_INPUT
from ab_runtime.tools import run_tool
from ascendbridge.package.serve_files import SERVE_EVIDENCE
from ascendbridge.package.uv_env import parse_result
from ascendbridge.workers.devices import DeviceSpecError, Runner, parse_index_list, probe
from ascendbridge.workers.placement import VISIBLE_ENV, claimed_cards
from ascendbridge.workers.process import run_command
from serving.plan import ASCEND_STACKS, SERVER_MODULE, DeviceProfile, ModelFacts, Refusal, ServePlan, plan_serving
from serving.render import WEIGHTS_DIR, engine_args
from serving.settings import ServingSettings

REFERENCE_FILE = "serve/reference.json"
EVIDENCE_FILE = SERVE_EVIDENCE
SERVER_LOG = "serve/server.log"
SCHEMA = "ascendbridge.serving/1"
GiB = 1024**3
_ARCHS = (
    "import json; from vllm import ModelRegistry; "
    "print('ARCHS=' + json.dumps(sorted(ModelRegistry.get_supported_archs())))"
)


# A refused export's remedy: the runtime exits EXIT_BAD_INPUT for what the model lacks (e.g. the
# tokenizer files an embedding model's text endpoint needs), which no retry of the same model changes.
EXPORT_REFUSED_REMEDY = (
    "give the model what the reason names (e.g. its tokenizer files beside config.json), then "
    "`board_ops.py retry MODEL --stage serving`"
)


class StepError(RuntimeError):
    """A step failed; `rule` names it for the diagnosis, `refusal` marks one a retry cannot change
    (the diagnosis's `retryable: false` and its remedy)."""

    def __init__(self, rule: str, message: str, refusal: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.refusal = refusal or {}


def export(
    python: Path,
    directory: Path,
    settings: ServingSettings,
    pretrained: bool,
    log: IO[str] | None = None,
    runtime_root: Path | None = None,
    out: Path | None = None,
    reference: Path | None = None,
) -> dict[str, Any]:
    """Run ab_runtime.serve.export in the serve environment (the package's runtime copy, or the
    framework's when `runtime_root` is given, as the gate does, with absolute `out` and `reference`
    outside the package); its RESULT."""
    argv = [
        str(python),
        "-m",
        "ab_runtime.serve.export",
        "--spec",
        str(Path(directory).resolve() / "adaptation.json"),
        "--out",
        str(out or WEIGHTS_DIR),
        "--reference",
        str(reference or REFERENCE_FILE),
        "--prompts",
        str(settings.prompts),
        "--prompt-len",
        str(settings.prompt_len),
        "--new-tokens",
        str(settings.new_tokens),
        *(["--use-pretrained"] if pretrained else []),
    ]
    # `-m` puts the working directory first on sys.path: the package's directory imports its own copy,
    # any other directory (with runtime_root on PYTHONPATH) the framework's.
    env = None if runtime_root is None else {**os.environ, "PYTHONPATH": str(runtime_root)}
    cwd = directory if runtime_root is None else Path(out or WEIGHTS_DIR).parent
    result = run_command(argv, cwd=cwd, env=env, timeout_s=settings.export_timeout_s, log=log)
    parsed = parse_result(result.output)
    if not result.ok or not parsed or not parsed.get("ok"):
        error = (parsed or {}).get("error") or ("timed out" if result.timed_out else result.tail_line())
        if result.exit_code == EXIT_BAD_INPUT:
            raise StepError(
                "serving_export_refused",
                f"the model cannot be exported for serving: {error}",
                {"retryable": False, "remedy": EXPORT_REFUSED_REMEDY},
            )
        raise StepError("serving_export_failed", f"exporting the weights for serving failed: {error}")
    return parsed


def supported_architectures(python: Path) -> list[str]:
    """The architectures the installed vLLM registers."""
    result = run_command([str(python), "-c", _ARCHS], timeout_s=300)
    for line in reversed(result.output.splitlines()):
        if line.startswith("ARCHS="):
            return list(json.loads(line[len("ARCHS=") :]))
    raise StepError("serving_engine_broken", f"the serve environment's vLLM does not import: {result.tail_line()}")


def ascend_cards(settings: ServingSettings, env: Mapping[str, str]) -> tuple[int, str]:
    """(cards, where from) of the Ascend deployment plan: the cards claimed for this task, else the
    `serving.ascend_cards` setting (a host with no claim, e.g. a CPU host planning the deployment)."""
    claimed = claimed_cards(env, "npu")
    return (claimed, VISIBLE_ENV["npu"]) if claimed else (settings.ascend_cards, "serving.ascend_cards")


def cuda_device(env: Mapping[str, str], runner: Runner = run_tool) -> DeviceProfile:
    """The GPUs the acceptance runs on, as nvidia-smi reports them: the task's claimed cards (the team
    lead's CUDA_VISIBLE_DEVICES mask, physical indices as nvidia-smi numbers them), else every card;
    the smallest one's memory. StepError when nvidia-smi does not report them all."""
    found, _ = probe("cuda", runner)
    raw = env.get(VISIBLE_ENV["cuda"], "").strip()
    try:
        wanted = set(parse_index_list(raw, VISIBLE_ENV["cuda"])) if raw else None
    except DeviceSpecError as exc:
        raise StepError("serving_no_gpu", str(exc)) from None
    cards = [d for d in found or [] if wanted is None or d.index in wanted]
    if not cards or (wanted is not None and len(cards) < len(wanted)) or any(d.memory_gb is None for d in cards):
        seen = ", ".join(f"{d.label} {d.memory_gb} GiB" for d in found or []) or "none"
        raise StepError(
            "serving_no_gpu",
            f"serving on cuda needs its GPUs ({VISIBLE_ENV['cuda']}={raw or 'all'}), but nvidia-smi reports: {seen}",
        )
    return DeviceProfile("cuda", int(min(d.memory_gb or 0.0 for d in cards) * GiB), len(cards), bf16=True)


def local_device(settings: ServingSettings, env: Mapping[str, str]) -> DeviceProfile:
    """The device the acceptance runs on: this host's memory on CPU; on Ascend the claimed cards
    (the setting when none were claimed) at the setting's card memory; on CUDA the GPUs themselves."""
    if settings.profile == "cpu":
        return DeviceProfile("cpu", int(psutil.virtual_memory().total))
    if settings.profile == "ascend":
        return DeviceProfile(
            "ascend",
            int(settings.ascend_card_memory_gb * GiB),
            ascend_cards(settings, env)[0],
            bf16=settings.ascend_generation != "310P",
            generation=settings.ascend_generation,
        )
    return cuda_device(env)


def plan_inputs(
    settings: ServingSettings, architectures: list[str], architecture: str, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Everything the plans depend on besides the exported model (`env`: the task's environment, by
    default this process's, where its placement's device mask is): recorded in the evidence."""
    env = os.environ if env is None else env
    cards, cards_from = ascend_cards(settings, env)
    return {
        "device": asdict(local_device(settings, env)),
        "ascend_device": asdict(
            DeviceProfile(
                "ascend",
                int(settings.ascend_card_memory_gb * GiB),
                cards,
                bf16=settings.ascend_generation != "310P",
                generation=settings.ascend_generation,
            )
        ),
        "ascend_cards_from": cards_from,
        "architecture_supported": architecture in architectures,
        "max_model_len": settings.max_model_len,
        "max_num_seqs": settings.max_num_seqs,
    }


def read_reference(directory: Path) -> dict[str, Any]:
    """The exported CPU float32 reference (`serve/reference.json`: the model's config, its parameter count,
    the reference outputs), as the stage, the plans and the gate read it; OSError / JSONDecodeError raised."""
    return json.loads((Path(directory) / REFERENCE_FILE).read_text())


def plans(directory: Path, family: str, inputs: dict[str, Any]) -> tuple[ServePlan | Refusal, ServePlan | Refusal]:
    """(local plan, Ascend deployment plan) from the exported model and the recorded inputs."""
    reference = read_reference(directory)
    facts = ModelFacts.from_config(reference["config"], family, int(reference["parameters"]))
    if reference.get("max_seq_length"):  # vLLM derives the limit from sentence_bert_config.json too
        facts = replace(facts, max_positions=min(facts.max_positions, int(reference["max_seq_length"])))
    supported = frozenset({facts.architecture}) if inputs["architecture_supported"] else frozenset()
    options = {
        "max_model_len": inputs["max_model_len"],
        "max_num_seqs": inputs["max_num_seqs"],
        "tokenizer": bool(reference["tokenizer"]),
        "ascend_stack": ASCEND_STACKS[0],
    }
    return (
        plan_serving(facts, DeviceProfile(**inputs["device"]), supported, **options),
        plan_serving(facts, DeviceProfile(**inputs["ascend_device"]), supported, **options),
    )


def server_argv(python: Path, plan: ServePlan, name: str, port: int) -> list[str]:
    """serve.sh's command with the serve environment's interpreter and a port (cwd: the adaptation)."""
    return [str(python), "-m", SERVER_MODULE, *engine_args(plan, name, WEIGHTS_DIR, "127.0.0.1"), "--port", str(port)]
