"""A stage that does nothing, for measuring the orchestration itself (bench/orchestration_bench.py)."""

from ascendbridge.stage_api import GateResult, StageContext, StageOutcome


class TrivialStage:
    name = "discovery"

    def run(self, ctx: StageContext) -> StageOutcome:
        return StageOutcome("done", "trivial")

    def gate(self, ctx: StageContext) -> GateResult:
        return GateResult(True, "trivial")


TRIVIAL = TrivialStage()
