"""The training stage: train the package's model on the corpus it was registered with, from a
trusted baseline, resumable and guarded.

run: a model without a training job is skipped with the reason. Otherwise it renders train.py (a
thin wrapper of ab_runtime.train), the two configs and the corpus copy into the package, syncs the
device profile's environment, runs the baseline contract (target vs CPU float32 reference, K
steps, the framework's table), then the training run under the hang watch
(ab_runtime.train.supervise: a hang or a kill is resumed from the last good checkpoint; under
torchrun when the job has more than one process), draws the loss curve, writes the TensorBoard event file
from the saved step log (training/figures.py) and proposes the figures. An `hf:` corpus is loaded
with the `datasets` library first and cached into train/data/ (training/hub_data.py). A paradigm
the harness refuses, a failed contract or a guard's stop (NaN / inf, a spike, a full disk) is a
failed outcome with the diagnosis; a guard's stop is not retried (the same config stops the same
way) except a full disk.
gate: training/scripts/check_training.py, a separate process that recomputes the verdicts from
the saved logs with the framework's code and re-runs a step from the last checkpoint.

It is a timed stage (ascendbridge/workers/placement.py TIMED_STAGES): the device pool gives it
devices (or a CPU-only host's core slots) to itself, because a training run fills a card's memory
and its tokens/s is a measurement: as many as the job's world size (`TrainingJob.processes`,
placement.stage_devices). Each torchrun rank takes its own card of the claim, the LOCAL_RANK-th
(ab_runtime/device.py rank_device); a claim with fewer cards than ranks is refused here before
anything is written (`training_cards_short`), and by the run itself.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ab_runtime.result import EXIT_BAD_INPUT
from ab_runtime.train.corpus import hub_dataset
from ascendbridge.board.records import TrainingJob
from ascendbridge.envmode import use_model_env
from ascendbridge.gatekit.checker import package_gate
from ascendbridge.memory_plan import MemoryPlan, Room, training_plan
from ascendbridge.package import uv_env
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.stack import env_stack
from ascendbridge.package.train_files import RUN_DIR
from ascendbridge.stable_envs import python as package_python
from ascendbridge.stage_api import FigureSet, GateResult, StageContext, StageOutcome, failed
from ascendbridge.stage_inputs import memory_planned, run_with_inputs
from ascendbridge.workers.devices import DeviceSpecError
from ascendbridge.workers.placement import VISIBLE_ENV, claimed_cards
from ascendbridge.workers.process import CommandResult
from training.figures import (
    CONFIRM_FILE,
    FIGURES_FILE,
    LOSS_CURVE,
    PASSES_FILE,
    draw,
    read_passes,
    read_peak,
    read_profile,
    step_log,
    training_figures,
    write_events,
    write_peak,
)
from training.hub_data import cache_dataset
from training.preflight import package_measure, preflight, with_events
from training.render import CONTRACT_CONFIG, TRAIN_CONFIG, TRAIN_DIR, TRAIN_PY, config_text, render_package
from training.settings import TrainingSettings


def memory_remedy(method: str) -> str:
    """What unlocks a refused training plan (a LoRA job is offered only to a full one)."""
    lora = "a LoRA job instead of a full one (`--train-method lora`), " if method == "full" else ""
    return (
        "a host with more memory (or, where this one has more to give, a larger ASCENDBRIDGE_HOST_MEMORY_BYTES / "
        f"ASCENDBRIDGE_MEMORY_FRACTION), training on an accelerator (`--devices`), {lora}or a smaller variant of "
        "the model, then `board_ops.py retry MODEL --stage training`"
    )


def model_dir(spec: AdaptationSpec) -> str:
    """The local directory of the model's config (and weights): its path, or its Hub snapshot."""
    model = spec.model
    if model.source == "local" and model.path:
        return str(Path(model.path).resolve())
    from huggingface_hub import snapshot_download

    return snapshot_download(
        model.model_id,
        revision=model.revision,
        cache_dir=model.path if model.source == "hf-cache" else None,
        local_files_only=model.source == "hf-cache",
        allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt"],
    )


def train_command(processes: int, python: Path) -> list[str]:
    """The training command the hang watch runs (and restarts with --resume), in the package's
    environment (`python`: its own `.venv` or its lock's stable one, locked or system mode alike)."""
    launcher = (
        [str(python), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
        if processes > 1
        else [str(python)]
    )
    return [*launcher, TRAIN_PY, "train", "--config", TRAIN_CONFIG, "--out", RUN_DIR]


def _prepare_run_dir(directory: Path, train_config: dict[str, Any]) -> bool:
    """Keep an unfinished run of the same config (the next attempt resumes it); start afresh otherwise.
    True when a run is resumed."""
    run = directory / RUN_DIR
    recorded = run / "config.json"
    unfinished = (run / "checkpoints").is_dir() and not (run / "train_result.json").exists()
    if unfinished and recorded.is_file() and recorded.read_text() == config_text(train_config):
        return True
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    recorded.write_text(config_text(train_config))
    return False


def _unfit(settings: TrainingSettings, job: TrainingJob) -> StageOutcome | None:
    """A job this host or these settings cannot run, refused before anything is prepared."""
    short = _cards_short(settings.device, job.processes)
    if short:
        return failed(short, "training_cards_short", retryable=False)
    if settings.batch % (job.processes * settings.accumulation):
        return failed(
            f"training batch {settings.batch} does not split over {job.processes} process(es) x "
            f"{settings.accumulation} micro-batch(es)",
            "training_batch_split",
            retryable=False,
        )
    return None


def _trained(run: Path, result: dict[str, Any], supervision: dict[str, Any], memory: MemoryPlan | None) -> StageOutcome:
    """A finished run's outcome: its figures (written for the gate to recompute), loss curve, events and summary."""
    steps = step_log(run)
    contract = _read(run / "contract.json") or {}
    draw(run, run / LOSS_CURVE)
    write_events(run)
    profile = read_profile(run)
    figures = training_figures(result, steps, contract, supervision, profile, read_passes(run), read_peak(run))
    (run / FIGURES_FILE).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")  # the gate recomputes it
    evaluation = result["evaluation"]["verdict"]
    summary = (
        f"{result['method']} {result['paradigm']} on {result['device']['kind']} {result['precision']}, "
        f"{result['strategy']} x{result['world']}: loss {figures['loss_first']:.4f} -> "
        f"{figures['loss_last']:.4f} in {result['steps']} steps; held-out {evaluation['verdict']} "
        f"({result['evaluation']['before']['loss']:.4f} -> {result['evaluation']['after']['loss']:.4f}); "
        f"contract {'passed' if contract.get('verdict', {}).get('passed') else 'FAILED'}; "
        f"{figures['tokens_per_s']:.0f} tokens/s at micro-batch {figures['micro_batch']:.0f} "
        f"({figures['oom_fallbacks']:.0f} out-of-memory fallback(s)); {supervision.get('hangs', 0)} hang(s), "
        f"{supervision.get('restarts', 0)} restart(s)"
        + (
            f"; {figures['model_tflops'] * 1e3:.2f} model GFLOP/s, step {figures['profile_compute_share']:.0%} "
            f"compute (top: {profile['table']['operators'][0]['name']})"
            if profile and profile["table"]["operators"]
            else ""
        )
        + (
            f"; training passes confirmed: {', '.join(result.get('passes') or []) or 'none'}"
            if "passes_tried" in figures
            else ""
        )
    )
    outcome_result = {
        "run_dir": RUN_DIR,
        "method": result["method"],
        "paradigm": result["paradigm"],
        "strategy": result["strategy"],
        "evaluation": evaluation["verdict"],
        "checkpoint": result["checkpoint"],
        "loss_curve": f"{RUN_DIR}/{LOSS_CURVE}",
        "memory_plan": memory.evidence() if memory else None,
    }
    metrics = [
        FigureSet(
            figures,
            device=result["device"]["kind"],
            dtype=result["precision"],
            units={"tokens_per_s": "tokens/s", "step_time_s": "s", "peak_memory_bytes": "B"},
        )
    ]
    return StageOutcome("done", summary, result=outcome_result, metrics=metrics)


def _cards_short(device: str, processes: int) -> str | None:
    """Why this task's claim (the team lead's visible-device mask) cannot give each of `processes`
    ranks a card of its own on `device`; None when it can, or when nothing is masked (the run's
    device layer then checks the cards it sees)."""
    mask = VISIBLE_ENV.get(device)
    if mask is None or not os.environ.get(mask, "").strip():
        return None
    try:
        claimed = claimed_cards(os.environ, device) or 0
    except DeviceSpecError as exc:
        return f"{processes} processes on {device}: the claim is unreadable ({exc})"
    if claimed >= processes:
        return None
    return (
        f"{processes} processes on {device} need a card each but this task's claim holds {claimed} "
        f"({mask}={os.environ[mask]}); run it through the team lead, which claims one card per process, "
        f"or make {processes} cards visible"
    )


def _train_py(ctx: StageContext, settings: TrainingSettings, env: dict[str, str], *args: str) -> CommandResult:
    """`python train.py ARGS` in the package's environment, its output to the attempt's log."""
    return uv_env.run_in_env(
        ctx.adaptation_dir, [TRAIN_PY, *args], timeout_s=settings.run_timeout_s, log=ctx.log, env=env
    )


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class TrainingStage:
    name = "training"

    def run(self, ctx: StageContext) -> StageOutcome:
        job = ctx.model.training
        if job is None:
            return StageOutcome(
                "skipped",
                "no training job registered for this model (board_ops.py register_model ... --train-data PATH)",
            )
        return run_with_inputs(ctx, TrainingSettings, "training_setup", lambda c, s, spec: self._run(c, s, spec, job))

    def _run(
        self, ctx: StageContext, settings: TrainingSettings, spec: AdaptationSpec, job: TrainingJob
    ) -> StageOutcome:
        unfit = _unfit(settings, job)
        if unfit is not None:
            return unfit

        def plan(parameters: int, room: Room) -> MemoryPlan:
            return training_plan(
                self.name, parameters, job.method, settings.precision, job.processes, room, memory_remedy(job.method)
            )

        memory = memory_planned(ctx, settings.device, plan)
        if isinstance(memory, StageOutcome):
            return memory
        directory = ctx.adaptation_dir
        hub = hub_dataset(job.data)
        if hub is not None:
            ctx.say(f"loading {job.data} with the datasets library (cached into {TRAIN_DIR}/data/)")
            try:
                job = job.model_copy(update={"data": str(cache_dataset(job.data, hub, directory / TRAIN_DIR / "data"))})
            except Exception as exc:  # the library, the Hub, the split: any failure to load is this one rule
                return failed(
                    f"loading training data {job.data} failed: {exc}",
                    "training_data_load",
                    retryable=isinstance(exc, OSError),
                )  # the Hub or the disk may come back; a bad split won't
        if not Path(job.data).is_file():
            return failed(f"training data {job.data} is gone", "training_data_missing", retryable=False)
        try:
            proxy = spec.model.proxy.layers if spec.model.proxy else None
            written = render_package(directory, spec.model.model_id, model_dir(spec), job, settings, proxy)
        except Exception as exc:  # the Hub, the disk: any failure to prepare is this one rule
            return failed(f"preparing the training package failed: {exc}", "training_setup")
        resumed = _prepare_run_dir(directory, written[TRAIN_CONFIG])
        ctx.say(
            f"{TRAIN_PY} rendered ({job.method}, {job.steps} steps on {Path(job.data).name}); syncing the "
            f"{settings.profile} environment"
        )
        sync = uv_env.sync(directory, settings.profile, timeout_s=settings.sync_timeout_s, log=ctx.log)
        if not sync.ok:
            return failed(f"uv sync --extra {settings.profile} failed", "sync_failed", log_tail=sync.tail(20))
        env = {"OMP_NUM_THREADS": str(settings.threads)} if settings.threads else {}
        measure = package_measure(directory, settings, job.processes, env)
        pre = preflight(ctx, settings, job.steps, lambda: str(env_stack(directory)["stack_id"]), measure)
        if pre.refusal is not None:
            return pre.refusal
        if pre.judged is not None:
            write_peak(directory / RUN_DIR, pre.judged)  # MFU's denominator
        return with_events(self._train(ctx, settings, job, (resumed, env, memory)), pre.events)

    def _train(
        self,
        ctx: StageContext,
        settings: TrainingSettings,
        job: TrainingJob,
        run_setup: tuple[bool, dict[str, str], MemoryPlan | None],
    ) -> StageOutcome:
        """The baseline contract (unless a run is resumed), then the training under the hang watch.
        `run_setup`: whether a run is resumed, the run's environment, the memory plan it was given."""
        resumed, env, memory = run_setup
        directory = ctx.adaptation_dir
        if not resumed:
            ctx.say(
                f"baseline contract: {settings.contract_steps} steps, {settings.device} {settings.precision} "
                "vs CPU float32"
            )
            baseline = _train_py(ctx, settings, env, "contract", "--config", CONTRACT_CONFIG, "--out", RUN_DIR)
            problem = self._contract_problem(baseline)
            if problem is not None:
                return problem
            if settings.pass_list() and job.processes == 1:
                self._search_passes(ctx, directory, settings, env)
        else:
            ctx.say("resuming the unfinished run from its last good checkpoint")
        watch = [
            "-m",
            "ab_runtime.train.supervise",
            "--out",
            RUN_DIR,
            "--k",
            str(settings.hang_k),
            "--max-restarts",
            str(settings.max_restarts),
            "--startup-s",
            str(settings.startup_s),
            "--",
            *train_command(job.processes, package_python(directory)),
            *(["--resume"] if resumed else []),
        ]
        command = uv_env.run_in_env(directory, watch, timeout_s=settings.run_timeout_s, log=ctx.log, env=env)
        run = directory / RUN_DIR
        result, stopped = _read(run / "train_result.json"), _read(run / "stopped.json")
        supervision = _read(run / "supervision.json") or {}
        if stopped:  # a guard's diagnosis: the same config stops the same way, unless the disk frees up
            return failed(
                f"training stopped: {stopped.get('summary')}",
                f"training_{stopped.get('rule', 'stopped')}",
                stop=stopped,
                supervision=supervision,
                retryable=stopped.get("rule") == "disk_full",
            )
        if not command.ok or not result:
            error = (uv_env.parse_result(command.output) or {}).get("error") or (
                "timed out" if command.timed_out else f"exit {command.exit_code}"
            )
            return failed(
                f"training failed: {error}", "training_run_failed", log_tail=command.tail(30), supervision=supervision
            )
        ctx.say("profiling a window of steady-state steps (where a step's time goes)")
        profiled = _train_py(ctx, settings, env, "profile", "--config", TRAIN_CONFIG, "--out", RUN_DIR)
        if not profiled.ok:  # optional evidence: the run's figures stand without it, and the log says why
            ctx.say(f"the profile did not run: {profiled.tail_line()}")
        return _trained(run, result, supervision, memory)

    @staticmethod
    def _search_passes(ctx: StageContext, directory: Path, settings: TrainingSettings, env: dict[str, str]) -> None:
        """Try the training passes (judged by the contract's loss bounds, timed in pairs), then the
        kept ones again in a fresh process; the passes both runs keep go into the run's config.
        The search is optional: when it cannot run, the job trains as configured and the log says why."""
        candidates = settings.pass_list()
        for file_name in (PASSES_FILE, CONFIRM_FILE):
            ctx.say(f"training passes: trying {', '.join(candidates)} ({file_name})")
            args = [
                "--config",
                TRAIN_CONFIG,
                "--out",
                RUN_DIR,
                "--candidates",
                ",".join(candidates),
                "--file",
                file_name,
            ]
            search = _train_py(ctx, settings, env, "passes", *args, "--judge-steps", str(settings.contract_steps))
            candidates = (uv_env.parse_result(search.output) or {}).get("kept") or [] if search.ok else []
            if not search.ok:
                ctx.say(f"the pass search did not run: {search.tail_line()}")
            if not candidates:
                return
        ctx.say(f"training with the confirmed pass(es): {', '.join(candidates)}")
        train = {**json.loads((directory / TRAIN_CONFIG).read_text()), "passes": candidates}
        (directory / TRAIN_CONFIG).write_text(config_text(train))
        (directory / RUN_DIR / "config.json").write_text(config_text(train))

    @staticmethod
    def _contract_problem(contract: CommandResult) -> StageOutcome | None:
        """None when the baseline contract passed; else the failed outcome (a refusal is not retried)."""
        result = uv_env.parse_result(contract.output) or {}
        if contract.ok and result.get("ok"):
            return None
        if contract.exit_code == EXIT_BAD_INPUT:  # an architecture outside the paradigms, a corpus it cannot read
            return failed(
                f"training refused: {result.get('error') or contract.tail(1)}", "training_refused", retryable=False
            )
        verdict = result.get("verdict")
        if verdict:
            failing = [c["name"] for c in verdict["checks"] if not c["passed"]]
            return failed(
                f"baseline contract failed: {', '.join(failing)}",
                "training_contract_failed",
                failing_checks=failing,
                checks=verdict["checks"],
            )
        error = result.get("error") or ("timed out" if contract.timed_out else f"exit {contract.exit_code}")
        return failed(f"baseline contract did not run: {error}", "training_contract_error", log_tail=contract.tail(30))

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        return package_gate(self.name, ctx.adaptation_dir)


TRAINING_STAGE = TrainingStage()
