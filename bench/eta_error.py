#!/usr/bin/env python3
"""How far the team lead's ETA is from the truth: replays a finished board.

    uv run bench/eta_error.py BOARD [--workers 2] [--timed-slots 1] [--prior-scale STAGE=X,...] [--json]
    uv run bench/eta_error.py BOARD --derive-costs    # a cost model (stage_costs.json) from BOARD
    uv run bench/eta_error.py BOARD... --per-size [--history FILE]   # each model's prior against its truth, by size

At the moments when 25 %, 50 % and 75 % of the board's tasks had finished, it rebuilds the board as
the team lead saw it then (a task finished, running since its attempt's start, or not started yet)
and computes the ETA with the team lead's own estimator (ascendbridge/teamlead/eta.py), knowing
only the attempts completed before that moment. Priors come from the shipped cost model alone
(ascendbridge/teamlead/stage_costs.json, or --costs): never from this board's later attempts, and
never from the host's stage history. When the shipped cost model was derived from this very board
(its `derived_from` names the board's first and last attempt), the replay says so: its priors are
then in-sample, and --prior-scale (one stage's priors multiplied, e.g. optimization=0.33 for a
search three times quicker than the shipped figures) shows how the ETA fares when they are off.
Scaling every stage alike changes nothing once a stage has completed: the estimator scales the
priors by how this board's costed attempts ran against them.
The true remaining time is from that moment to the board's last finished task; the error is
(ETA - true) / true. --workers and --timed-slots describe the run being replayed (the main job on
2 cores: 2 workers, one timed core); the layout is the documented scheduling rule, not what the
replayed run did, so a board run under an older scheduler shows that difference too.

--per-size answers "does the prior scale with the model?": for every model of each board (several
boards: one table, sorted by parameters), the prior the team lead gives each of its costed stages
before the board has run anything (the shipped cost model's figure at the model's size, with the
size terms and host speed fitted from --history, a stage_history.json, when given: the host's other
boards, whenever they ran) against what the attempt took; per model the sum of its stages and the
error of that sum, and the median per-stage error. It says when no model of real size
(REAL_SIZE parameters or more) is among them: the size term is then not exercised.

Opens the board read-only. Exit 0; 1 with --max-error when an error exceeds it; 2 on bad input
(no such board, a board with unfinished tasks or none).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from ab_runtime.progress import fmt_s  # noqa: E402
from ascendbridge.board import AttemptRecord, BoardError, BoardStore, ModelRecord, TaskRecord  # noqa: E402
from ascendbridge.discovery.batch_select import short_count  # noqa: E402
from ascendbridge.stages import COSTED_OUTCOMES, DONE_STATUSES, STAGES, TERMINAL_STATUSES  # noqa: E402
from ascendbridge.teamlead.eta import COSTS_FILE, CostModel, Eta, Lanes, Sample, derive_costs, estimate  # noqa: E402
from ascendbridge.teamlead.history import HostHistory  # noqa: E402

FRACTIONS = (0.25, 0.50, 0.75)
REAL_SIZE = 100_000_000  # parameters: a model at the size teams port starts about here


class InputError(Exception):
    """Bad input: one line, exit 2."""


@dataclass(frozen=True)
class Replay:
    """A finished board: its models, tasks and every task's attempts, with when each task finished."""

    models: list[ModelRecord]
    tasks: list[TaskRecord]
    attempts: dict[int, list[AttemptRecord]]  # task id -> its attempts, oldest first
    finished: dict[int, datetime]  # task id -> when the team lead had recorded it (task and attempt)

    @property
    def first_attempt(self) -> str:
        return min(a.started_at for rows in self.attempts.values() for a in rows)

    @property
    def last_attempt(self) -> str:
        return max(a.finished_at or a.started_at for rows in self.attempts.values() for a in rows)

    def samples(self, before: datetime | None = None) -> list[Sample]:
        """The costed attempts (COSTED_OUTCOMES, no gate re-check; finished before `before`, if given),
        oldest first: what the team lead's ETA reads (BoardStore.costed_attempts)."""
        family = {m.pk: m.task_family for m in self.models}
        size = {m.pk: m.parameter_count for m in self.models}
        out = []
        for task in self.tasks:
            for a in self.attempts.get(task.id, []):
                if (
                    a.outcome in COSTED_OUTCOMES
                    and not a.recheck
                    and a.duration_s is not None
                    and a.finished_at
                    and (before is None or _t(a.finished_at) <= before)
                ):
                    sample = Sample(task.stage, family.get(task.model_pk), a.duration_s, size.get(task.model_pk))
                    out.append((a.finished_at, sample))
        return [s for _, s in sorted(out, key=lambda pair: pair[0])]

    def at(self, moment: datetime) -> list[TaskRecord]:
        """The tasks as the board showed them at `moment`."""
        by_model: dict[int, dict[str, TaskRecord]] = defaultdict(dict)
        for task in self.tasks:
            by_model[task.model_pk][task.stage] = task
        out = []
        for task in self.tasks:
            if self.finished[task.id] <= moment:
                out.append(task)
                continue
            running = [
                a
                for a in self.attempts.get(task.id, [])
                if _t(a.started_at) <= moment and (a.finished_at is None or _t(a.finished_at) > moment)
            ]
            if running:
                out.append(task.model_copy(update={"status": "in_progress", "started_at": running[-1].started_at}))
                continue
            i = STAGES.index(task.stage)
            before = by_model[task.model_pk].get(STAGES[i - 1]) if i else None
            ready = before is None or (self.finished[before.id] <= moment and before.status in DONE_STATUSES)
            out.append(task.model_copy(update={"status": "pending" if ready else "waiting", "started_at": None}))
        return out


def _t(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def load(path: Path) -> Replay:
    if not path.is_file():
        raise InputError(f"no board at {path}")
    try:
        store = BoardStore(path, read_only=True)
    except BoardError as exc:
        raise InputError(f"cannot open {path}: {exc}") from None
    try:
        models, tasks = store.list_models(), store.list_tasks()
        attempts: dict[int, list[AttemptRecord]] = defaultdict(list)
        for model in models:
            for _, row in store.list_attempts(model.model_id):
                attempts[row.task_id].append(row)
    finally:
        store.close()
    # Tasks of stages the run left out (--stages): never attempted, still pending or waiting.
    tasks = [t for t in tasks if attempts.get(t.id) or t.status not in ("pending", "waiting")]
    if not tasks:
        raise InputError(f"{path} has no tasks")
    unfinished = [t for t in tasks if t.status not in TERMINAL_STATUSES or not t.finished_at]
    if unfinished:
        raise InputError(
            f"{path} is not finished: {len(unfinished)} task(s) not finished "
            f"(e.g. {unfinished[0].model_id}/{unfinished[0].stage} {unfinished[0].status})"
        )
    finished = {}
    for task in tasks:
        assert task.finished_at is not None  # checked above
        ends = [_t(a.finished_at) for a in attempts.get(task.id, []) if a.finished_at]
        finished[task.id] = max([_t(task.finished_at), *ends])
    return Replay(models, tasks, dict(attempts), finished)


def replay(
    board: Replay, costs: CostModel, lanes: Lanes, prior_scale: dict[str, float] | None = None
) -> list[dict[str, Any]]:
    """One row per fraction: the moment, the ETA then, the true remaining time and the error."""
    scale = prior_scale or {}
    scaled = dataclasses.replace(
        costs, stages={st: {fam: s * scale.get(st, 1.0) for fam, s in per.items()} for st, per in costs.stages.items()}
    )
    ends = sorted(board.finished.values())
    end = ends[-1]
    stages = [st for st in STAGES if any(t.stage == st for t in board.tasks)]
    rows = []
    for fraction in FRACTIONS:
        done = max(1, math.ceil(fraction * len(ends)))
        moment = ends[done - 1]
        eta: Eta = estimate(board.at(moment), board.models, stages, board.samples(moment), [], scaled, lanes, moment)
        true = (end - moment).total_seconds()
        err = None if eta.seconds is None or true <= 0 else 100.0 * (eta.seconds - true) / true
        rows.append(
            {
                "fraction": fraction,
                "finished": done,
                "tasks": len(ends),
                "moment": moment.isoformat(),
                "eta_s": eta.seconds,
                "true_s": true,
                "error_pct": err,
                "eta_line": eta.text(),
            }
        )
    return rows


def per_model(board: Replay, costs: CostModel, host: list[Sample]) -> list[dict[str, Any]]:
    """One row per model with costed attempts: its size, the prior of each of its costed stages (the
    team lead's estimate of that task alone, nothing of this board known) against what it took."""
    first = _t(board.first_attempt)
    rows: list[dict[str, Any]] = []
    for m in board.models:
        pairs = []
        for task in (t for t in board.tasks if t.model_pk == m.pk):
            took = _costed(board, task.id)
            if not took:
                continue
            alone = task.model_copy(update={"status": "pending", "started_at": None})
            eta = estimate([alone], [m], [task.stage], [], host, costs, Lanes(1, 1), first)
            if eta.seconds is not None:
                pairs.append((task.stage, eta.seconds, took[-1]))
        if not pairs:
            continue
        prior, actual = sum(p for _, p, _ in pairs), sum(a for _, _, a in pairs)
        errors = [100.0 * (p - a) / a for _, p, a in pairs if a > 0]
        rows.append(
            {
                "model": m.model_id,
                "params": m.parameter_count,
                "family": m.task_family,
                "stages": len(pairs),
                "prior_s": prior,
                "actual_s": actual,
                "error_pct": 100.0 * (prior - actual) / actual if actual > 0 else None,
                "median_stage_error_pct": statistics.median(errors) if errors else None,
            }
        )
    return rows


def _costed(board: Replay, task_id: int) -> list[float]:
    """The durations of a task's costed attempts (what the ETA learns from), oldest first."""
    return [
        a.duration_s
        for a in board.attempts.get(task_id, [])
        if a.outcome in COSTED_OUTCOMES and not a.recheck and a.duration_s is not None
    ]


def print_per_model(rows: list[dict[str, Any]]) -> None:
    print(f"{'model':<44} {'params':>7} {'stages':>6} {'prior':>8} {'took':>8} {'error':>8} {'stage med.':>10}")
    for r in sorted(rows, key=lambda r: (r["params"] or 0, r["model"])):
        err = "n/a" if r["error_pct"] is None else f"{r['error_pct']:+.0f}%"
        med = "n/a" if r["median_stage_error_pct"] is None else f"{r['median_stage_error_pct']:+.0f}%"
        print(
            f"{r['model'][:44]:<44} {short_count(r['params']):>7} {r['stages']:>6} {fmt_s(r['prior_s']):>8} "
            f"{fmt_s(r['actual_s']):>8} {err:>8} {med:>10}"
        )
    if not any((r["params"] or 0) >= REAL_SIZE for r in rows):
        print(f"no model of real size ({short_count(REAL_SIZE)} parameters or more): the size term is not exercised")


def in_sample(board: Replay, costs: CostModel) -> bool:
    """Whether the cost model was derived from this very board (same first and last attempt)."""
    src = costs.source
    return src.get("first_attempt") == board.first_attempt and src.get("last_attempt") == board.last_attempt


def parse_scale(raw: str) -> dict[str, float]:
    """`optimization=0.5,benchmark=2` -> {stage: factor}; InputError on a bad item."""
    out = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        stage, _, value = item.partition("=")
        try:
            factor = float(value)
        except ValueError:
            factor = -1.0
        if stage not in STAGES or not factor > 0:
            raise InputError(
                f"--prior-scale: '{item}' is not STAGE=FACTOR (a stage of {', '.join(STAGES)}, FACTOR > 0)"
            )
        out[stage] = factor
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "board", type=Path, nargs="+", help="a finished board.db (opened read-only); --per-size takes several"
    )
    p.add_argument("--workers", type=int, default=2, help="the replayed run's --workers (default 2)")
    p.add_argument("--timed-slots", type=int, default=1, help="its timed slots: devices, or core groups (default 1)")
    p.add_argument(
        "--lendable",
        type=int,
        choices=(0, 1),
        default=1,
        help="1: idle preparation cores were lent as one more timed slot (a CPU-only host, default); "
        "0: a board run without lending",
    )
    p.add_argument("--costs", type=Path, default=COSTS_FILE, help="the cost model (default: the shipped one)")
    p.add_argument("--prior-scale", default="", help="STAGE=X,...: multiply a stage's priors by X (sensitivity)")
    p.add_argument("--max-error", type=float, help="exit 1 when an |error| in percent exceeds this")
    p.add_argument("--derive-costs", action="store_true", help="print a cost model derived from BOARD and exit")
    p.add_argument("--per-size", action="store_true", help="each model's prior against its truth, by size")
    p.add_argument("--history", type=Path, help="--per-size: a stage_history.json to fit the host's priors from")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.per_size:
        return main_per_size(args.board, args.costs, args.history, args.json)
    try:
        if args.workers < 1 or args.timed_slots < 1:
            raise InputError("--workers and --timed-slots must be >= 1")
        if len(args.board) != 1:
            raise InputError("one board, except with --per-size")
        args.board = args.board[0]
        prior_scale = parse_scale(args.prior_scale)
        board = load(args.board)
        if args.derive_costs:
            print(
                json.dumps(
                    {
                        "derived_from": {
                            "board": str(args.board),
                            "first_attempt": board.first_attempt,
                            "last_attempt": board.last_attempt,
                            "tasks": len(board.tasks),
                        },
                        "stages": derive_costs(board.samples()),
                    },
                    indent=1,
                )
            )
            return 0
        costs = CostModel.load(args.costs)
    except (InputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = replay(board, costs, Lanes(args.workers, args.timed_slots, lendable=args.lendable), prior_scale)
    same = in_sample(board, costs)
    if args.json:
        print(
            json.dumps(
                {
                    "board": str(args.board),
                    "costs": str(args.costs),
                    "priors_in_sample": same,
                    "prior_scale": prior_scale,
                    "workers": args.workers,
                    "timed_slots": args.timed_slots,
                    "lendable": args.lendable,
                    "rows": rows,
                },
                indent=1,
            )
        )
    else:
        print(
            f"board {args.board}: {len(board.tasks)} tasks; lanes: {args.workers} worker(s), "
            f"{args.timed_slots} timed slot(s){' + lent' if args.lendable else ''}; priors: {args.costs.name}"
            + "".join(f", {st} x{x:g}" for st, x in prior_scale.items())
            + (" (derived from this very board: in-sample)" if same else "")
        )
        print(f"{'finished':>14}  {'moment':>8}  {'ETA':>8}  {'true left':>9}  {'error':>7}")
        for r in rows:
            err = "n/a" if r["error_pct"] is None else f"{r['error_pct']:+.1f}%"
            done = f"{r['fraction']:.0%} ({r['finished']}/{r['tasks']})"
            print(f"{done:>14}  {r['moment'][11:19]:>8}  {fmt_s(r['eta_s']):>8}  {fmt_s(r['true_s']):>9}  {err:>7}")
        for r in rows:
            print(f"  at {r['fraction']:.0%}: {r['eta_line']}")
    worst = max((abs(r["error_pct"]) if r["error_pct"] is not None else math.inf) for r in rows)
    return 1 if args.max_error is not None and worst > args.max_error else 0


def main_per_size(paths: list[Path], costs_path: Path, history: Path | None, as_json: bool) -> int:
    """--per-size over `paths`: one table of every model, sorted by size."""
    try:
        costs = CostModel.load(costs_path)
        rows: list[dict[str, Any]] = []
        for path in paths:
            host = HostHistory(history, path).priors() if history is not None else []
            rows += [{"board": str(path), **row} for row in per_model(load(path), costs, host)]
    except (InputError, ValueError) as exc:  # HistoryError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(
            json.dumps({"costs": str(costs_path), "history": str(history) if history else None, "rows": rows}, indent=1)
        )
    else:
        print(f"{len(paths)} board(s); priors: {costs_path.name}" + (f" fitted with {history}" if history else ""))
        print_per_model(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
