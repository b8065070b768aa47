"""Which stage failures are refusals (deterministic: a retry gives the same answer) and what unlocks them.

The team lead retries a failed attempt while the stage's budget lasts, because load, a busy Hub
or a timeout can change the next time. A refusal cannot: no task family for the architecture,
a model too large for the device, remote code the board does not allow, a gated repo and no
token, a corrupt config, a bad setting. Retrying those only triples the log. So a diagnosis is
classified here, in one table: a refusal ends the task on its first attempt (`failed`, or
`blocked` where a person's action unlocks it) with its reason and the remedy a person can act
on. A stage may also mark its own diagnosis `"retryable": false` (or `true`, to overrule the table).
"""

from __future__ import annotations

from typing import Any

from ascendbridge.unsupported_families import needed_family

# rule -> the remedy a person can act on. Every rule not listed can change on retry.
REFUSALS: dict[str, str] = {
    # discovery
    "too_large": "run on a device with more memory (ASCENDBRIDGE_DEVICE_MEMORY_GB) or register a smaller "
    "or quantized variant",
    "gated_no_token": "request access on the Hub, set HF_TOKEN for that account, then `board_ops.py retry MODEL`",
    "remote_code_not_allowed": "review the repository's code, then `board_ops.py allow_remote_code MODEL` "
    "and `board_ops.py retry MODEL`",
    "invalid_model_id": "register the model under a valid Hub id or local path",
    "bad_source": "register the model with source huggingface, local or hf-cache",
    "not_found": "check the model id / revision (or the local path), then register it again",
    "not_in_cache": "download the model into the HF cache (`huggingface-cli download MODEL`), then retry",
    "missing_directory": "make the registered local directory exist, then retry",
    "missing_config": "add the model's config.json, then retry",
    "corrupt_config": "repair config.json, then retry",
    "corrupt_safetensors": "re-download the weights, then retry",
    "bad_setting": "fix the setting named in the reason, then retry",
    "proxy_depth_invalid": "`board_ops.py set_depth MODEL N` with N between 1 and the layer count the reason names "
    "(or `--full`), then `board_ops.py retry MODEL --stage discovery`",
    # adaptation
    "unknown_task_family": "a task family for this architecture in ascendbridge/task_families.py and "
    "ab_runtime/families.py (docs/adaptation.md lists what each missing family needs), "
    "or an adapter agent (docs/agents.md)",
    "corrupt_metadata": "re-run discovery for the model (`board_ops.py retry MODEL --stage discovery`)",
    # every stage after adaptation: the package it works on is not there
    "missing_adaptation": "run the team lead with the adaptations folder the board's packages were made in "
    "(ASCENDBRIDGE_ADAPTATIONS), or make the package again: `board_ops.py rollback MODEL --to adaptation`",
    # every stage after adaptation: the package's ab_runtime/ is not this framework's (an update since)
    "outdated_runtime": "render the package again with this framework: `board_ops.py rollback MODEL --to adaptation` "
    "(healing and the later stages then run again on it)",
    # healing: the runtime itself refuses the model (ab_runtime.errors.UnsupportedModel / SpecError)
    "unsupported_model": "a task family or input recipe the runtime can drive for this model "
    '(docs/adaptation.md, "Families not supported yet"), or an adapter agent (docs/agents.md)',
    # training (the stage marks these not retryable itself; the table says what unlocks them)
    "training_cards_short": "run the job through the team lead on a host with a card per process "
    "(`--devices`), or register it with fewer processes (`--train-processes N`)",
    "training_batch_split": "set a batch that splits evenly over processes x micro-batches "
    "(`--set training.batch=N`, `--set training.accumulation=N`), then `board_ops.py retry MODEL --stage training`",
    "training_data_load": "check the dataset's name, split and revision (`hf:ORG/NAME[:SPLIT][@REV]`, "
    'docs/training.md "Data"), then `board_ops.py retry MODEL --stage training`',
    "training_data_missing": "put the registered training data back at its path, then "
    "`board_ops.py retry MODEL --stage training`",
    "training_refused": 'fix what the reason names (a corpus format docs/training.md "Data" lists, or a model '
    "of a paradigm it trains: causal LM, masked LM, seq2seq), then `board_ops.py retry MODEL --stage training`",
    "host_below_expectation": "find why the host is slow (a throttled or hot card: `npu-smi info` / "
    "`nvidia-smi -q -d PERFORMANCE`; a link down; other jobs on it), measure it again "
    "(`uv run python -m training.host_acceptance --adapt NAME --fresh`), or run the job with "
    "`--set training.host_acceptance=warn`; then `board_ops.py retry MODEL --stage training`",
    # the team lead, before an attempt starts: a timed stage's claim is larger than the host
    "not_enough_devices": "run it on a host with that many timed slots (`--devices npu:LIST` / `cuda:LIST`; on a "
    "CPU-only host more cores, or a smaller `--timed-cores`), or register it needing fewer (a training job: "
    "`--train-processes N`), then `board_ops.py retry MODEL --stage STAGE`",
    # a timed stage, before it loads anything: its memory plan finds no way to fit (docs/memory.md)
    "memory_plan_refused": "a host with more memory, the target on an accelerator (`--devices`), or a smaller or "
    "depth-reduced model (the reason names the figures; docs/memory.md), then `board_ops.py retry MODEL --stage STAGE`",
    # any stage: the attempt died for memory (the OOM killer, MemoryError; ascendbridge/workers/oom.py)
    "out_of_memory": "free memory on the host (other jobs) or set what a stage may use (ASCENDBRIDGE_HOST_MEMORY_BYTES, "
    "ASCENDBRIDGE_MEMORY_FRACTION) so its memory plan refuses or picks a smaller one; or a host with more memory, "
    "the target on an accelerator, a smaller or depth-reduced model (docs/memory.md); then `board_ops.py retry MODEL`",
    # every stage's own settings
    "bad_input": "fix the setting or the adaptation.json named in the reason, then retry",
    "benchmark_setup": "fix the setting or the adaptation.json named in the reason, then retry",
}


# A stage's own refusal of a rule the table does not list: never an empty remedy.
UNLISTED_REMEDY = "fix what the reason names (a retry alone meets the same answer), then `board_ops.py retry MODEL`"


def is_refusal(diagnosis: dict[str, Any] | None) -> bool:
    """True when retrying cannot change the outcome (the table, or the stage's own `retryable`)."""
    if not diagnosis:
        return False
    retryable = diagnosis.get("retryable")
    if isinstance(retryable, bool):
        return not retryable
    return diagnosis.get("rule") in REFUSALS


def remedy(diagnosis: dict[str, Any]) -> str:
    """What unlocks a refusal: the stage's own remedy, else the table's, naming the family needed."""
    if diagnosis.get("remedy"):
        return str(diagnosis["remedy"])
    rule = str(diagnosis.get("rule") or "")
    text = REFUSALS.get(rule, "")
    if rule == "unknown_task_family":
        need = needed_family(str(diagnosis.get("architecture") or ""))
        if need is not None:
            return f"needs the {need.family} task family ({need.needs}); {text}"
    return text or UNLISTED_REMEDY


def as_refusal(diagnosis: dict[str, Any]) -> dict[str, Any]:
    """The diagnosis recorded for a refusal: marked not retryable, with its remedy."""
    return {**diagnosis, "retryable": False, "remedy": remedy(diagnosis)}
