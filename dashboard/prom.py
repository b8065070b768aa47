"""The board in the Prometheus text exposition format (version 0.0.4) for /metrics.

prometheus_client writes it (a collector read once per scrape over the board's totals): values
at full precision, names and labels escaped as the format says. Counters only grow: finished
attempts are counted per outcome, and attempts still running are a gauge of their own (counting
them in the counter made it drop when they finished, which Prometheus reads as a reset).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from ascendbridge.stages import STAGES, STATUSES

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
RUNNING = "running"  # board/queries.py counts(): the outcome of an attempt not finished yet


class BoardCollector:
    """One scrape's metrics from the board's totals (BoardQueries.counts()). Every stage x status
    series is present, zero included, so dashboards see stable series."""

    def __init__(self, counts: dict[str, Any]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self.counts
        yield GaugeMetricFamily("ascendbridge_models", "Models registered on the board.", value=counts["models"])

        tasks = GaugeMetricFamily("ascendbridge_tasks", "Stage tasks per stage and status.", labels=["stage", "status"])
        per_status = {(stage, status): n for stage, status, n in counts["tasks"]}
        for stage in STAGES:
            for status in STATUSES:
                tasks.add_metric([stage, status], per_status.get((stage, status), 0))
        yield tasks

        finished = CounterMetricFamily(
            "ascendbridge_attempts", "Finished stage attempts per stage and outcome.", labels=["stage", "outcome"]
        )
        running = GaugeMetricFamily("ascendbridge_attempts_running", "Stage attempts running now.", labels=["stage"])
        now: dict[str, int] = {}
        per_stage: dict[str, tuple[int, float]] = {}
        for stage, outcome, n, seconds in counts["attempts"]:
            if outcome == RUNNING:
                now[stage] = now.get(stage, 0) + n
                continue
            finished.add_metric([stage, outcome], n)
            c, s = per_stage.get(stage, (0, 0.0))
            per_stage[stage] = (c + n, s + seconds)
        for stage in STAGES:
            running.add_metric([stage], now.get(stage, 0))
        yield finished
        yield running

        durations = SummaryMetricFamily(
            "ascendbridge_attempt_duration_seconds", "Wall time of finished attempts per stage.", labels=["stage"]
        )
        for stage in STAGES:
            c, s = per_stage.get(stage, (0, 0.0))
            durations.add_metric([stage], count_value=c, sum_value=s)
        yield durations

        agents = GaugeMetricFamily("ascendbridge_agents", "Agents per status.", labels=["status"])
        for status, n in counts["agents"]:
            agents.add_metric([status], n)
        yield agents

        guidance = GaugeMetricFamily("ascendbridge_guidance", "Guidance items per state.", labels=["state"])
        for state, n in counts["guidance"]:
            guidance.add_metric([state], n)
        yield guidance

        yield GaugeMetricFamily(
            "ascendbridge_last_event_id",
            "Id of the newest board event (grows with every change).",
            value=counts["last_event_id"],
        )


def render(counts: dict[str, Any]) -> str:
    """The exposition text of one scrape (a registry of its own: nothing process-wide is shared)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BoardCollector(counts))
    return generate_latest(registry).decode("utf-8")
