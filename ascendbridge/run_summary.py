"""The main job's closing table: per model, how far it got, its latency, TPOT (generating models)
and speedup, its evidence.

Read only through the board (tasks and the metrics the gated stages recorded), so it shows what
the gates accepted, wherever the stages wrote their files. A person reads one line per model and
knows what to open or retry next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

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


def _outcome(tasks: Sequence[TaskRecord]) -> str:
    stuck = next((t for t in tasks if t.status not in DONE_STATUSES), None)
    if stuck is None:
        skipped = [t.stage for t in tasks if t.status == "skipped"]
        return f"all {len(tasks)} stages done" + (f" (skipped: {', '.join(skipped)})" if skipped else "")
    return f"{stuck.stage} {_not_done(stuck)}"


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
            )
        )
    return out


def results_table(results: Sequence[ModelResult], root: Path) -> Table:
    """The table; evidence paths relative to `root` when they lie under it."""
    table = Table(title="results per model", title_justify="left")
    table.add_column("model", overflow="fold")
    table.add_column("outcome", overflow="fold")
    table.add_column("latency", justify="right", no_wrap=True)
    table.add_column("TPOT", justify="right", no_wrap=True)
    table.add_column("speedup", justify="right", no_wrap=True)
    table.add_column("evidence", overflow="fold")
    for r in results:
        latency = f"{r.latency_ms:.2f} ms ({r.latency_basis})" if r.latency_ms is not None else "—"
        speedup = f"{r.speedup:.2f}x" if r.speedup is not None else "—"
        tpot = f"{r.tpot_ms:.2f} ms ({r.tokens_per_s:.0f} tok/s)" if r.tpot_ms is not None and r.tokens_per_s else "—"
        evidence = r.evidence.relative_to(root) if r.evidence.is_relative_to(root) else r.evidence
        table.add_row(r.model_id, r.outcome, latency, tpot, speedup, f"{evidence}/" if r.evidence.is_dir() else "—")
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


def served_table(store: BoardStore, adaptations: Path, root: Path) -> Table:
    """What the serving stage served on vLLM, per model with a serving task: the gated figures and
    the serve command, or why it was not served."""
    table = Table(title="served on vLLM", title_justify="left")
    for column in ("model", "served", "serve command"):
        table.add_column(column, overflow="fold")
    latest = _latest_figures(store, "serving")
    for task in store.list_tasks(stage="serving"):
        mine = latest.get(task.model_id, {})
        if task.status == "completed" and mine:
            first = next(iter(mine.values()))
            served = f"{first.device} {first.dtype}: " + _served_figures({k: m.value for k, m in mine.items()})
            script = adaptations / task.adaptation_name / "serve" / "serve.sh"
            command = str(script.relative_to(root) if script.is_relative_to(root) else script)
        else:
            served, command = _not_done(task), "—"
        table.add_row(task.model_id, served, command)
    return table


def trained_table(store: BoardStore) -> Table:
    """What the training stage trained, per model registered with a training job: the gated loss,
    held-out and contract figures, or why it did not train."""
    table = Table(title="trained", title_justify="left")
    for column in ("model", "job", "trained"):
        table.add_column(column, overflow="fold")
    latest = _latest_figures(store, "training")
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
            )
        else:
            trained = _not_done(task)
        table.add_row(task.model_id, f"{job.method}, {job.steps} steps on {Path(job.data).name}", trained)
    return table


def _latest_figures(store: BoardStore, stage: str) -> dict[str, dict[str, MetricRecord]]:
    """model id -> figure name -> the latest gated figure of `stage`."""
    latest: dict[str, dict[str, MetricRecord]] = {}
    for metric in sorted(store.list_metrics(), key=lambda m: m.ts):
        if metric.stage == stage:
            latest.setdefault(metric.model_id, {})[metric.name] = metric
    return latest


def _not_done(task: TaskRecord) -> str:
    reason = str((task.diagnosis or {}).get("summary") or (task.diagnosis or {}).get("reason") or "")
    return task.status.replace("_", " ") + (f": {reason}" if reason else "")
