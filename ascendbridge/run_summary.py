"""The main job's closing table: per model, how far it got, its latency, TPOT (generating models)
and speedup, its evidence.

Read only through the board (tasks and the metrics the gated stages recorded), so it shows what
the gates accepted, wherever the stages wrote their files. A person reads one line per model and
knows what to open or retry next. Paths and commands are printed on lines of their own after each
table, never in a cell: a cell folds its text to the console's width, and a path broken in two
cannot be copied (a log file is laid out at a fixed width).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ascendbridge.attempt_costs import attempt_costs, summary_line
from ascendbridge.board import BoardStore, MetricRecord, TaskRecord
from ascendbridge.stage_table import column_sources
from ascendbridge.stages import DONE_STATUSES

COLUMNS = column_sources()  # header -> (stage, figure), from each stage's stage.toml


@dataclass(frozen=True)
class ModelResult:
    model_id: str
    outcome: str  # "all 5 stages completed" / "healing failed: <reason>" / "benchmark pending"
    latency_ms: float | None  # benchmark median, target device and dtype
    latency_basis: str  # "cpu float32"
    speedup: float | None  # optimization's confirmed speedup over the baseline
    evidence: Path
    tpot_ms: float | None = None  # generation workload (causal LMs, encoder-decoders): time per output token
    tokens_per_s: float | None = None  # batch-1 decode throughput
    proxy: str | None = None  # `proxy: N of M layers`: the figures are a reduced-depth proxy's


def _outcome(tasks: Sequence[TaskRecord]) -> str:
    """How far the model got; every skipped stage with its reason (a bare "skipped" leaves a person
    guessing whether it was the policy, a request or the stage's own decision)."""
    stuck = next((t for t in tasks if t.status not in DONE_STATUSES), None)
    if stuck is None:
        skipped = [f"{t.stage}: {_reason(t) or NO_REASON}" for t in tasks if t.status == "skipped"]
        return f"all {len(tasks)} stages done" + (f"; skipped {'; '.join(skipped)}" if skipped else "")
    return f"{stuck.stage} {_not_done(stuck)}"


def _named(store: BoardStore) -> dict[str, str]:
    """model id -> its cell in every table: the id, and under it `proxy: N of M layers` for a
    reduced-depth proxy, so no figure of a proxy reads as the full model's."""
    return {m.model_id: _model_cell(m.model_id, m.proxy_label()) for m in store.list_models()}


def _model_cell(model_id: str, proxy: str | None) -> str:
    return model_id + (f"\n({proxy})" if proxy else "")


def _latest(metrics: Sequence[MetricRecord], stage: str, name: str) -> MetricRecord | None:
    found = [m for m in metrics if m.stage == stage and m.name == name]
    return max(found, key=lambda m: m.ts) if found else None


def _column(metrics: Sequence[MetricRecord], header: str) -> MetricRecord | None:
    """The latest gated figure of the stage.toml column `header` (latency: the benchmark's median_ms)."""
    stage, figure = COLUMNS.get(header, ("", ""))
    return _latest(metrics, stage, figure)


def model_results(store: BoardStore, stages: Sequence[str], adaptations: Path) -> list[ModelResult]:
    """One result per registered model over `stages`, in registration order."""
    by_model: dict[str, list[TaskRecord]] = {}
    for task in store.list_tasks():
        if task.stage in stages:
            by_model.setdefault(task.model_id, []).append(task)
    metrics: dict[str, list[MetricRecord]] = {}
    for metric in store.list_metrics():
        metrics.setdefault(metric.model_id, []).append(metric)
    out = []
    for model in store.list_models():
        tasks = sorted(by_model.get(model.model_id, []), key=lambda t: stages.index(t.stage))
        mine = metrics.get(model.model_id, [])
        latency, speedup = _column(mine, "latency"), _column(mine, "speedup")
        tpot, tokens = _column(mine, "TPOT"), _column(mine, "tokens/s")
        out.append(
            ModelResult(
                model_id=model.model_id,
                outcome=_outcome(tasks) if tasks else "no task in these stages",
                latency_ms=latency.value if latency else None,
                latency_basis=f"{latency.device} {latency.dtype}" if latency else "",
                speedup=speedup.value if speedup else None,
                evidence=adaptations / model.adaptation_name,
                tpot_ms=tpot.value if tpot else None,
                tokens_per_s=tokens.value if tokens else None,
                proxy=model.proxy_label(),
            )
        )
    return out


def print_summary(console: Console, store: BoardStore, stages: Sequence[str], adaptations: Path, root: Path) -> None:
    """The main job's closing summary: results per model and their evidence, what was trained and
    what was served (for the stages run), each table followed by its paths, one per line; then the
    work it took in slot-minutes, with the bench that shows where it went."""
    results = model_results(store, stages, adaptations)
    console.print(results_table(results))
    evidence = [(r.model_id, f"{_shown(r.evidence, root)}/") for r in results if r.evidence.is_dir()]
    _print_paths(console, "evidence per model", evidence)
    if "training" in stages and (trained := trained_table(store)).row_count:
        console.print(trained)
    if "quantization" in stages and (quantized := quantized_table(store)).row_count:
        console.print(quantized)
    if "serving" in stages:
        console.print(served_table(store))
        _print_paths(console, "serve commands", serve_commands(store, adaptations, root))
    work = summary_line(attempt_costs(store), str(_shown(store.path.resolve(), root)))
    if work:  # a command in it: never broken over two lines
        console.print(work, soft_wrap=True, markup=False, highlight=False)


def _print_paths(console: Console, title: str, rows: Sequence[tuple[str, str]]) -> None:
    """`title:` then `  model  path` per row, never wrapped (soft_wrap) and free of markup and
    highlighting: the path is copied as printed, whatever the console's width."""
    if not rows:
        return
    console.print(f"{title}:", highlight=False)
    width = max(len(model) for model, _ in rows)
    for model, path in rows:
        console.print(f"  {model:<{width}}  {path}", soft_wrap=True, markup=False, highlight=False)


def _shown(path: Path, root: Path) -> Path:
    """`path` relative to `root` when it lies under it (shorter, and what a person in the repo types)."""
    return path.relative_to(root) if path.is_relative_to(root) else path


FIGURE_WIDTH = 13  # "(cpu float32)": a figure folds under its value, leaving the outcome room


def results_table(results: Sequence[ModelResult]) -> Table:
    """One row per model; every cell may fold (no path or command is in one: print_summary prints them)."""
    table = Table(title="results per model", title_justify="left", show_lines=True)  # rows apart: cells fold
    table.add_column("model", overflow="fold")
    table.add_column("outcome", overflow="fold")
    table.add_column("latency", justify="right", overflow="fold", max_width=FIGURE_WIDTH)
    table.add_column("TPOT", justify="right", overflow="fold", max_width=FIGURE_WIDTH)
    table.add_column("speedup", justify="right", no_wrap=True)
    for r in results:
        latency = f"{r.latency_ms:.2f} ms ({r.latency_basis})" if r.latency_ms is not None else "—"
        speedup = f"{r.speedup:.2f}x" if r.speedup is not None else "—"
        tpot = f"{r.tpot_ms:.2f} ms ({r.tokens_per_s:.0f} tok/s)" if r.tpot_ms is not None and r.tokens_per_s else "—"
        table.add_row(_model_cell(r.model_id, r.proxy), r.outcome, latency, tpot, speedup)
    return table


# The served figures in the order they are told: (figure, how one reads); a group of alternatives
# tells only its first figure present (generation reports tokens/s, embeddings requests/s).
_SERVED_FIGURES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("greedy_exact_match", "greedy tokens {:.0%} equal to the reference"),),
    (("chat_equal", "chat {}"),),
    (("chat_stream_equal", "streamed chat {}"),),
    (("embedding_cosine_min", "cosine >= {:.6f}"),),
    (("classify_max_abs_diff", "class probabilities within {:.1e} of the reference"),),
    (("score_max_abs_diff", "scores within {:.1e} of the reference"),),
    (("ttft_ms", "TTFT {:.0f} ms, TPOT {tpot_ms:.1f} ms"),),
    (
        ("bench_inf_output_tokens_per_s", "vllm bench: {:.0f} tok/s at rate inf"),
        ("bench_inf_requests_per_s", "vllm bench: {:.1f} requests/s at rate inf"),
    ),
    (("cold_start_s", "ready in {:.0f} s"),),
)


def _served_figures(values: dict[str, float]) -> str:
    """The served answers and speed in one line (generation, embeddings, classification or scores),
    from the gated figures."""
    same = {key: "equal" if values.get(key) == 1.0 else "differs" for key in ("chat_equal", "chat_stream_equal")}
    shown = {**values, **same}
    parts = []
    for group in _SERVED_FIGURES:
        told = next(((key, text) for key, text in group if key in values), None)
        if told:
            parts.append(told[1].format(shown[told[0]], tpot_ms=values.get("tpot_ms", 0.0)))
    return "; ".join(parts)


def served_table(store: BoardStore) -> Table:
    """What the serving stage served on vLLM, per model with a serving task: the gated figures, or
    why it was not served (its serve command: serve_commands)."""
    table = Table(title="served on vLLM", title_justify="left", show_lines=True)
    for column in ("model", "served"):
        table.add_column(column, overflow="fold")
    latest, named = _latest_figures(store, "serving"), _named(store)
    for task in store.list_tasks(stage="serving"):
        mine = latest.get(task.model_id, {})
        if task.status == "completed" and mine:
            first = next(iter(mine.values()))
            served = f"{first.device} {first.dtype}: " + _served_figures({k: m.value for k, m in mine.items()})
        else:
            served = _not_done(task)
        table.add_row(named.get(task.model_id, task.model_id), served)
    return table


def serve_commands(store: BoardStore, adaptations: Path, root: Path) -> list[tuple[str, str]]:
    """(model, the serve script of its served package) for every model the serving stage served."""
    served = _latest_figures(store, "serving")
    return [
        (task.model_id, str(_shown(adaptations / task.adaptation_name / "serve" / "serve.sh", root)))
        for task in store.list_tasks(stage="serving", status="completed")
        if task.model_id in served
    ]


def trained_table(store: BoardStore) -> Table:
    """What the training stage trained, per model registered with a training job: the gated loss,
    held-out and contract figures, or why it did not train."""
    table = Table(title="trained", title_justify="left")
    for column in ("model", "job", "trained"):
        table.add_column(column, overflow="fold")
    latest, named = _latest_figures(store, "training"), _named(store)
    jobs = {m.model_id: m.training for m in store.list_models() if m.training is not None}
    for task in store.list_tasks(stage="training"):
        job = jobs.get(task.model_id)
        if job is None:
            continue
        mine = {k: m.value for k, m in latest.get(task.model_id, {}).items()}
        if task.status == "completed" and mine:
            verdict = {1.0: "improved", 0.0: "flat", -1.0: "worse"}.get(mine.get("eval_verdict", 0.0), "?")
            trained = (
                f"loss {mine.get('loss_first', 0.0):.2f} -> {mine.get('loss_last', 0.0):.2f}; held-out loss "
                f"{mine.get('eval_loss_before', 0.0):.2f} -> {mine.get('eval_loss_after', 0.0):.2f} ({verdict}); "
                f"baseline contract {'passed' if mine.get('contract_passed') == 1.0 else 'failed'}; "
                f"{mine.get('tokens_per_s', 0.0):,.0f} tokens/s"
                + (f" (MFU {mine['mfu']:.1%})" if "mfu" in mine else "")
                + _passes_text(mine)
            )
        else:
            trained = _not_done(task)
        job_text = f"{job.method}, {job.steps} steps on {Path(job.data).name}"
        table.add_row(named.get(task.model_id, task.model_id), job_text, trained)
    return table


def quantized_table(store: BoardStore) -> Table:
    """What the quantization stage made, per model that runs it (an opt-in stage): per scheme its
    gated verdict, logits cosine, top-1 agreement and weight size (and, for a checkpoint the serving
    stage served here, its greedy match and throughput against the float model's), or why it did
    not quantize."""
    table = Table(title="quantized", title_justify="left")
    for column in ("model", "quantized"):
        table.add_column(column, overflow="fold")
    latest, named = _latest_figures(store, "quantization"), _named(store)
    served = _latest_figures(store, "serving")
    opted_out = {m.model_id for m in store.list_models() if "quantization" in m.skip_stages}
    for task in store.list_tasks(stage="quantization"):
        if task.model_id in opted_out and task.status != "completed":
            continue
        mine = {k: m.value for k, m in latest.get(task.model_id, {}).items()}
        schemes = [name.removesuffix("_accepted") for name in mine if name.endswith("_accepted")]
        if task.status == "completed" and schemes:
            quantized = "; ".join(
                f"{s.upper()} {'accepted' if mine[f'{s}_accepted'] == 1.0 else 'refused'}: cosine min "
                f"{mine.get(f'{s}_cosine_min', float('nan')):.5f}, top-1 {mine.get(f'{s}_top1_agreement', float('nan')):.3f}, "
                f"weights {mine.get(f'{s}_size_ratio', float('nan')):.2f}x"
                + _served_text(s, {k: m.value for k, m in served.get(task.model_id, {}).items()})
                for s in sorted(schemes)
            )
        else:
            quantized = _not_done(task)
        table.add_row(named.get(task.model_id, task.model_id), quantized)
    return table


def _served_text(scheme: str, figures: dict[str, float]) -> str:
    """', served here: greedy 100% of its reference, 0.87x the float's tokens/s' for a checkpoint
    the serving stage served on this host; '' for one it did not serve."""
    if f"{scheme}_served" not in figures:
        return ""
    match = figures.get(f"{scheme}_served_greedy_exact_match", float("nan"))
    ratio = figures.get(f"{scheme}_served_throughput_ratio")
    throughput = f", {ratio:.2f}x the float's tokens/s" if ratio is not None else ""
    verdict = "served here" if figures[f"{scheme}_served"] == 1.0 else "served here, differs"
    return f", {verdict}: greedy {match:.0%} of its reference{throughput}"


def _passes_text(figures: dict[str, float]) -> str:
    """'; pass fused_adamw x1.06' per confirmed training pass, or '; no pass of 2 helped'."""
    if "passes_tried" not in figures:
        return ""
    confirmed = {
        k.removeprefix("pass_").removesuffix("_speedup"): v for k, v in figures.items() if k.startswith("pass_")
    }
    if not confirmed:
        return f"; no pass of {figures['passes_tried']:.0f} helped"
    return "".join(f"; pass {name} x{speedup:.2f}" for name, speedup in sorted(confirmed.items()))


def _latest_figures(store: BoardStore, stage: str) -> dict[str, dict[str, MetricRecord]]:
    """model id -> figure name -> the latest gated figure of `stage`."""
    latest: dict[str, dict[str, MetricRecord]] = {}
    for metric in sorted(store.list_metrics(), key=lambda m: m.ts):
        if metric.stage == stage:
            latest.setdefault(metric.model_id, {})[metric.name] = metric
    return latest


NO_REASON = "no reason recorded"  # a skip written before the board kept every skip's reason


def _reason(task: TaskRecord) -> str:
    return str((task.diagnosis or {}).get("summary") or (task.diagnosis or {}).get("reason") or "")


def _not_done(task: TaskRecord) -> str:
    reason = _reason(task) or (NO_REASON if task.status == "skipped" else "")
    return task.status.replace("_", " ") + (f": {reason}" if reason else "")
