"""The calibration probe, and the load-proof judgement of a re-timed figure (no torch at import).

Why: a gate re-times a reported latency on a host whose load it does not control; load only ever
adds time, but by how much depends on the moment (a 2-core host beside two CPU loops and two
memory-copy loops slowed single calls x2 to x100). So every timed call of the model is followed,
in the same process and placement (device, cores, threads), by one call of a FIXED probe: a small
matrix product and a memory copy on the model's device. What the load does to the model it does,
roughly, to the probe beside it, so the ratio of the fastest model call to the fastest probe call
(per block of calls, as in ab_runtime/pairstats.py: load only adds time, the fastest call is the
stable estimate) is mostly a property of the model on that device: enough to pass a figure the
load slowed, never enough to fail one (below). What fails a figure under any load is a call the
host did not interrupt (the process's context switches are counted around it) that slowed far
more than the probe beside it (the load rule below).

The run records the probe's samples in a `calibration` block next to the samples it was paired
with (`calibration_block`); the gate recomputes it from the samples (`check_block`). The gate then
re-times model and probe interleaved in rounds, counting the context switches of its process
(involuntary and voluntary) per round and, where it can, per model call (`quiet_calls`), and the
CPU time the host gave OTHER processes (and a hypervisor's steal) over the rounds
(`others_cpus`, from /proc/stat), and judges (`judge`):
- passed: the gate's fastest call (load only adds time) is within the band (x1.5) of the reported
  one; or one round's model/probe ratio is within the band of the reported ratio while the
  fastest call and the probe are within HARD_BAND (x4) of the reported ones;
- failed, the load rule: a gate never fails honest evidence because of its host. A context switch
  counted shows the host interrupted a call, but no switch does not mean no contention (memory
  bandwidth, caches evicted by the processes sharing the core, a hypervisor's steal are invisible
  to getrusage: beside four CPU loops and two memory-copy loops an honest demo/tiny-llama forward
  call ran x9 slower without one). So a figure beyond the hard bound fails only when the probe
  does not explain it: the probe's slowdown in a round (`load_x`: the larger of its fastest and
  its median call over the run's, at least 1) is what this host's load did to a call in that
  round, and the figure's slowdown over it (`unexplained`, the best round's) is beyond HARD_BAND
  (x4), as is its fastest call no context switch interrupted (preemption, which slows a long
  call more than the short probe beside it, is excluded). "About as much" is thus within x4: a
  figure forged 10x reads x10 over an honest probe at any load (x30 beside a probe slowed x3)
  and fails; an honest one whose probe slowed with it reads about x1 and is left inconclusive.
  The median is the load's measure because the model's fastest call spans several probe calls'
  time and needs that long a quiet moment, where the probe's fastest call finds the load's
  shortest gap (in the case above it ran about x1.2 slower, x8.93 over the ratio's x7.37, while
  the model ran x9);
- failed, on an idle host only (the other processes used at most IDLE_OTHERS_CPUS over the
  series of rounds, so nothing else can have slowed the probe): the probe itself more than HARD_BAND slower
  than the run's (a calibration forged along with the figure); or, outside the band, the rounds
  agree (spread <= SPREAD), the host preempted no round (at most QUIET_PREEMPTIONS involuntary
  context switches a round) and the run's probe reproduces within SPREAD either way (the run and
  the gate saw the same quiet host); evidence without a calibration beyond the hard bound;
- inconclusive otherwise: the host's load left it undecided (the team lead re-runs the gate).
  The model/probe ratio alone never fails a figure (a run timed under load recorded a probe x11
  slower than the gate's, and an honest figure came out x23 on the ratio).
Every failure needs all the gate's rounds (an interim look only passes), and a second series of
rounds that fails too (`confirm`). The limits, by design: a claim between the band and the hard
bound (a latency forged x3) is failed only on an idle host; a figure forged 10x is left
inconclusive (never passed) where the load slowed the probe's typical call x2.5 or more, and where
calibration and figure are forged together under load; a host that is never idle leaves those
for a later re-check.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .figures import recorded_matches
from .pairstats import percentile

PROBE: dict[str, Any] = {"name": "matmul_copy", "version": 1, "matmul_n": 128, "matmuls": 4, "copy_elements": 1 << 20}
CALIBRATION_SCHEMA = "ascendbridge.calibration/1"
HARD_BAND = 4.0  # a ratio (or probe) this much better than the gate's best fails under any load
SPREAD = 1.25  # rounds whose ratios agree within this are steady enough to fail a claim
QUIET_PREEMPTIONS = 2  # involuntary context switches in a round for the host to count as quiet
# Other processes' CPU use (CPUs' worth, a hypervisor's steal included) over a series of rounds
# below which the host counts as idle: /proc/stat counts in 10 ms ticks and a tiny model's series
# lasts a tenth of a second or more, so an idle host reads about 0-0.3; one CPU loop alone ~1.
IDLE_OTHERS_CPUS = 0.5


def make_probe(torch_device: Any, sync: Callable[[], None]) -> Callable[[], float]:
    """The fixed probe on `torch_device`: one call does PROBE's matrix products and copy and
    returns its milliseconds, the device synchronised around it (as the model's timed calls)."""
    import torch

    n, copies = int(PROBE["matmul_n"]), int(PROBE["copy_elements"])
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(n, n, generator=gen).to(torch_device)
    src = torch.rand(copies, generator=gen).to(torch_device)
    dst = torch.empty_like(src)

    def probe() -> float:
        sync()
        start = time.perf_counter_ns()
        x = a
        for _ in range(int(PROBE["matmuls"])):
            x = torch.mm(x, a)
        dst.copy_(src)
        sync()
        return (time.perf_counter_ns() - start) / 1e6

    with torch.inference_mode():
        probe()  # allocations and kernel selection happen outside every timed call
    return probe


def ratio(model_ms: list[float], probe_ms: list[float]) -> float:
    """Fastest model call over fastest probe call of one block of interleaved calls."""
    return min(model_ms) / min(probe_ms)


def calibration_block(model_ms: list[float], probe_ms: list[float], warmup: int, paired_with: str) -> dict[str, Any]:
    """The evidence's record of the probe calls interleaved with `model_ms` (`paired_with` names them)."""
    return {
        "schema": CALIBRATION_SCHEMA,
        "probe": dict(PROBE),
        "paired_with": paired_with,
        "warmup": warmup,
        "iterations": len(probe_ms),
        "samples_ms": list(probe_ms),
        "median_ms": statistics.median(probe_ms),
        "p90_ms": percentile(probe_ms, 90),
        "min_ms": min(probe_ms),
        "ratio": ratio(model_ms, probe_ms),
    }


def check_block(where: str, block: Any, model_ms: Any, warmup: Any) -> list[str]:
    """Problems of a recorded calibration block against the samples it was paired with (and their warmup)."""
    if not isinstance(block, dict):
        return [f"{where}: must be an object"]
    if block.get("warmup") != warmup:
        return [f"{where}.warmup {block.get('warmup')!r} != {warmup!r} of the calls it was paired with"]
    samples = block.get("samples_ms")
    if block.get("schema") != CALIBRATION_SCHEMA or block.get("probe") != PROBE:
        return [
            f"{where}: not this runtime's calibration probe ({CALIBRATION_SCHEMA}, {PROBE['name']} v{PROBE['version']})"
        ]
    if not (
        isinstance(samples, list)
        and samples
        and all(isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 for s in samples)
    ):
        return [f"{where}.samples_ms: must be a non-empty list of positive latencies"]
    if not isinstance(model_ms, list) or len(model_ms) != len(samples) or block.get("iterations") != len(samples):
        return [
            f"{where}: {len(samples)} probe calls recorded for {len(model_ms) if isinstance(model_ms, list) else 0} "
            f"paired calls (iterations {block.get('iterations')!r}): one probe call follows every timed call"
        ]
    expected = {
        "median_ms": statistics.median(samples),
        "p90_ms": percentile(samples, 90),
        "min_ms": min(samples),
        "ratio": ratio([float(m) for m in model_ms], samples),
    }
    return [
        f"{where}.{k}: recorded {block.get(k)!r}, its samples give {v!r}"
        for k, v in expected.items()
        if not recorded_matches(block.get(k), v)
    ]


@dataclass
class Round:
    """One round of the gate's re-timing: the fastest model call, the fastest and the median probe
    call beside them (None without a calibration), the involuntary context switches the process
    suffered in the round (the host taking it off a CPU), its voluntary ones (a thread put to
    sleep, which the load may wake late), the fastest model call that no switch interrupted
    (`quiet_model_ms`; None when every call was, or when switches were not counted per call), and
    the CPUs' worth of time the host gave other processes from the series' first round to this
    round's end (`others_cpus`, the whole series so the 10 ms ticks of /proc/stat average out
    over a tiny model's short rounds; None where it cannot be read)."""

    model_min_ms: float
    probe_min_ms: float | None = None
    preemptions: int = 0
    quiet_model_ms: float | None = None
    voluntary: int = 0
    probe_median_ms: float | None = None
    others_cpus: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.probe_min_ms is None else self.model_min_ms / self.probe_min_ms

    @property
    def quiet_ms(self) -> float | None:
        """The fastest uninterrupted model call: a round without any switch of either kind is quiet
        throughout, as quiet_calls counts a call: a worker thread put to sleep and woken late
        behind the load is no involuntary switch, yet the call waited for it."""
        if self.preemptions == 0 and self.voluntary == 0:
            return self.model_min_ms
        return self.quiet_model_ms


def others_cpus() -> Callable[[], float | None]:
    """Start counting the CPU time the host gives other processes; the returned call says how many
    CPUs' worth they used since (busy time of all CPUs in /proc/stat, steal included, less this
    process's own CPU time), None where /proc/stat cannot be read (not Linux). What the gate's own
    counters cannot see, another process on its core or a hypervisor's steal, shows here."""
    import resource  # Unix only: imported where the counting happens

    def snapshot() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as stat:
                ticks = [int(v) for v in stat.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        busy = sum(ticks) - ticks[3] - ticks[4]  # user nice system idle iowait irq softirq steal
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return busy / os.sysconf("SC_CLK_TCK"), usage.ru_utime + usage.ru_stime, time.monotonic()

    start = snapshot()

    def since() -> float | None:
        end = snapshot()
        if start is None or end is None or end[2] <= start[2]:
            return None
        return max(0.0, ((end[0] - start[0]) - (end[1] - start[1])) / (end[2] - start[2]))

    return since


def quiet_calls(fn: Callable[[], Any], tally: list[int]) -> Callable[[], Any]:
    """`fn` that appends to `tally` the context switches of this process (every thread, voluntary
    and involuntary) during each call: a call with none ran without any of its threads leaving a
    CPU (not preempted, no worker thread put to sleep and woken late), so the host's scheduler did
    not slow it; contention for memory, caches and a hypervisor's CPU still may (Round.quiet_ms)."""
    import resource  # Unix only: imported where the counting happens

    def switches() -> int:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_nivcsw + usage.ru_nvcsw

    def call() -> Any:
        before = switches()
        value = fn()
        tally.append(switches() - before)
        return value

    return call


@dataclass
class Judgement:
    """The verdict on one re-timed figure: passed, failed or inconclusive, with one line why."""

    verdict: str
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def decided(self) -> bool:
        return self.verdict != "inconclusive"


@dataclass(frozen=True)
class Undecided:
    """What left a figure outside the band undecided: the host's state in the rounds and what excuses
    the figure (its uninterrupted call within the hard bound, or the probe slowed about as much)."""

    spread: float
    preempted: int
    probe_x: float
    idle: bool
    host: str
    quiet_x: float | None
    unexplained: float | None  # None: no calibration recorded

    def reason(self, hard: float) -> str:
        why = [
            f"rounds spread x{self.spread:.2f} > x{SPREAD:g}" if self.spread > SPREAD else "",
            f"the host preempted the re-check ({self.preempted} involuntary context switches in a round)"
            if self.preempted > QUIET_PREEMPTIONS
            else "",
            f"the host ran the probe x{self.probe_x:.2f} slower than the run did" if self.probe_x > SPREAD else "",
            f"the run's probe was x{1 / self.probe_x:.2f} slower than this host's (timed under load)"
            if self.probe_x < 1 / SPREAD
            else "",
            "" if self.idle else f"{self.host}, more than the {IDLE_OTHERS_CPUS:g} of an idle host",
        ]
        excuse = (
            "no re-timed call ran without a context switch"
            if self.quiet_x is None
            else f"its fastest uninterrupted call (x{self.quiet_x:.2f}) is within the hard bound x{hard:g}"
            if self.quiet_x <= hard
            else f"the probe beside it slowed about as much (the figure x{self.unexplained:.2f} more, within x{hard:g})"
            if self.unexplained is not None
            else f"without a calibration only an idle host can tell ({self.host})"
        )
        steadiness = "; ".join(w for w in why if w) or "one round shows no steadiness"
        return f"{excuse}, and {steadiness}: the host's load leaves it undecided"


@dataclass(frozen=True)
class Probed:
    """The gate's rounds seen through the probe the run recorded beside its model: the model/probe
    ratios against the reported one, how much the load slowed the probe in each round, and how much
    of the model's slowdown that leaves unexplained (the load rule, module doc). Its fields are the
    figures a judgement records of the calibration."""

    reported_ratio: float
    ratios: list[float]
    spread: float
    relative: float
    probe_fastest_ms: float
    probe_x: float
    load_x: list[float]  # per round, how much the load slowed the probe (`load_x`)
    unexplained: float

    @property
    def best(self) -> float:
        """The gate's best round: its lowest model/probe ratio."""
        return min(self.ratios)

    @classmethod
    def of(
        cls,
        rounds: list[Round],
        ratios: list[float],
        reported_min_ms: float,
        reported_probe_min_ms: float,
        reported_probe_median_ms: float | None,
    ) -> Probed:
        reported_ratio = reported_min_ms / reported_probe_min_ms
        best = min(ratios)
        probe_fastest = min(float(r.probe_min_ms) for r in rounds if r.probe_min_ms is not None)
        loads = [load_x(r, reported_probe_min_ms, reported_probe_median_ms) for r in rounds]
        return cls(
            reported_ratio=reported_ratio,
            ratios=ratios,
            spread=max(ratios) / best,
            relative=best / reported_ratio,
            probe_fastest_ms=probe_fastest,
            probe_x=probe_fastest / reported_probe_min_ms,
            load_x=loads,
            unexplained=min(r.model_min_ms / reported_min_ms / x for r, x in zip(rounds, loads)),
        )

    def said(self) -> str:
        return (
            f"{self.reported_ratio:.2f} probe calls reported, the gate's best round {self.best:.2f}: "
            f"x{self.relative:.2f}, the probe slowed x{min(self.load_x):.2f}..x{max(self.load_x):.2f}, "
            f"rounds spread x{self.spread:.2f}"
        )


def _rounds_figures(what: str, reported_min_ms: float, rounds: list[Round], quiet_x: float | None) -> dict[str, Any]:
    """What a judgement records of the gate's rounds: the fastest call against the reported one, and
    per round the host's interruptions and the CPUs its other processes used."""
    fastest = min(r.model_min_ms for r in rounds)
    return {
        "what": what,
        "reported_min_ms": reported_min_ms,
        "fastest_ms": fastest,
        "absolute": fastest / reported_min_ms,
        "quiet_x": quiet_x,
        "rounds": len(rounds),
        "preemptions": [r.preemptions for r in rounds],
        "voluntary_switches": [r.voluntary for r in rounds],
        "others_cpus": [r.others_cpus for r in rounds],
    }


def judge(
    what: str,
    reported_min_ms: float,
    reported_probe_min_ms: float | None,
    rounds: list[Round],
    band: float,
    final: bool = True,
    reported_probe_median_ms: float | None = None,
) -> Judgement:
    """The judgement of a reported fastest call (`what`) against the gate's rounds (module doc).
    `final` False: an interim look, where only a pass is taken (more rounds may still pass).
    `reported_probe_median_ms`: the run's median probe call, the reference of the load's measure
    (without it the probe's fastest call alone measures the load)."""
    fastest = min(r.model_min_ms for r in rounds)
    absolute = fastest / reported_min_ms
    quiet_model = [q for q in (r.quiet_ms for r in rounds) if q is not None]
    quiet_x = min(quiet_model) / reported_min_ms if quiet_model else None
    host_load = rounds[-1].others_cpus  # over the whole series (Round.others_cpus)
    idle = host_load is not None and host_load <= IDLE_OTHERS_CPUS
    figures = _rounds_figures(what, reported_min_ms, rounds, quiet_x)
    hard = max(HARD_BAND, band)
    ratios = [float(r.ratio) for r in rounds if r.ratio is not None]
    calibrated = reported_probe_min_ms is not None and len(ratios) == len(rounds)
    minima = [r.model_min_ms for r in rounds]
    spread, probe_x, unexplained = max(minima) / min(minima), 1.0, absolute
    said = (
        f"reported fastest {what} {reported_min_ms:.3f} ms is x{absolute:.2f} faster than the gate's fastest "
        f"re-measured call ({fastest:.3f} ms; allowed band x{band:g}"
    )
    probed = None
    if calibrated:
        assert reported_probe_min_ms is not None
        probed = Probed.of(rounds, ratios, reported_min_ms, reported_probe_min_ms, reported_probe_median_ms)
        spread, probe_x, unexplained = probed.spread, probed.probe_x, probed.unexplained
        figures.update(asdict(probed))
        said += f"; {probed.said()})"
    else:
        said += "; no calibration recorded)"
    if absolute <= band:
        return Judgement(
            "passed",
            f"{what}: fastest re-timed call {fastest:.3f} ms within x{band:g} of the reported {reported_min_ms:.3f} ms",
            figures,
        )
    if probed is not None and probed.relative <= band and absolute <= hard and probe_x <= hard:
        return Judgement(
            "passed",
            f"{what}: model/probe ratio {probed.best:.2f} within x{band:g} of the reported {probed.reported_ratio:.2f}",
            figures,
        )
    if not final:
        return Judgement("inconclusive", said, figures)
    host = (
        "the host's load could not be read"
        if host_load is None
        else f"the host's other processes used {host_load:.2f} CPUs during the rounds"
    )
    # The load rule (module doc): beyond the hard bound, uninterrupted, and not explained by what the
    # load did to the probe beside it; without a probe, only an idle host can tell.
    if quiet_x is not None and quiet_x > hard and (unexplained > hard if calibrated else idle):
        cause = (
            f"x{unexplained:.2f} more than the probe beside it slowed in its best round"
            if calibrated
            else f"on an idle host ({host})"
        )
        return Judgement(
            "failed",
            f"{said}: even its fastest call no context switch interrupted is x{quiet_x:.2f} slower, "
            f"{cause}, beyond the hard bound x{hard:g} that no load excuses; the latency does not reproduce",
            figures,
        )
    if calibrated and probe_x > hard and idle:  # a probe forged along with the model
        return Judgement(
            "failed",
            f"{said}: the calibration probe's reported fastest call {reported_probe_min_ms:.4f} "
            f"ms is x{probe_x:.2f} faster than this host's while the host was idle ({host}), "
            f"beyond the hard bound x{hard:g}: the calibration does not reproduce",
            figures,
        )
    preempted = max(r.preemptions for r in rounds)
    same_host = 1 / SPREAD <= probe_x <= SPREAD  # the run's probe reproduces: its host was as quiet as this one
    if len(rounds) > 1 and spread <= SPREAD and preempted <= QUIET_PREEMPTIONS and same_host and idle:
        return Judgement(
            "failed",
            f"{said}: outside the band x{band:g} on an idle host with steady rounds; the latency does not reproduce",
            figures,
        )
    undecided = Undecided(spread, preempted, probe_x, idle, host, quiet_x, unexplained if calibrated else None)
    return Judgement("inconclusive", f"{said}: outside the band x{band:g}, but {undecided.reason(hard)}", figures)


def load_x(r: Round, reported_probe_min_ms: float, reported_probe_median_ms: float | None) -> float:
    """How much this host's load slowed the probe in round `r` relative to the run: the larger of
    its fastest and its median call's slowdown, at least 1 (a run timed under load, its probe the
    slower, is never held against the gate's host)."""
    slowdowns = [1.0, float(r.probe_min_ms or 0.0) / reported_probe_min_ms]
    if r.probe_median_ms is not None and reported_probe_median_ms:
        slowdowns.append(r.probe_median_ms / reported_probe_median_ms)
    return max(slowdowns)


def confirm(first: Judgement, later: Judgement, series: int = 2) -> Judgement:
    """The verdict of a later series of rounds (`series`: its number) when the first failed: a
    failure must reproduce. In CI (2026-12-04), an honest decode step re-timed beside busy loops
    and the suite's other worker came out x4.32 slower in a round the host did not preempt, its
    ratio beyond x4 too: a burst of load that neither the switches nor the probe showed. In CI
    beside busy loops (2026-12-05) honest forward and batch calls came out x12 to x48 slower
    without a context switch, in two series 2 s apart, while the probe beside them ran at the
    run's speed (x1.07-x1.10): for tens of seconds the host slowed the model and not the probe,
    so the gate looks again over a longer horizon (reexecute.CONFIRM_PAUSES_S). A forged figure
    fails every series; a pass needs one (load only adds time), and a series left undecided is
    inconclusive."""
    said = "a second series of rounds" if series == 2 else f"series {series} of rounds, every earlier one failed"
    if later.decided:
        return Judgement(later.verdict, f"{later.reason} ({said})", {**later.figures, "series": series})
    return Judgement(
        "inconclusive",
        f"{later.reason}; a first series had failed ({first.reason}), a failure that did not reproduce",
        {**later.figures, "series": series, "first_series": first.figures},
    )
