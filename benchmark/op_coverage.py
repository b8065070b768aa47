"""The benchmark stage's operator coverage: record the model's ATen ops once, report its gaps.

run (`record_and_report`): one untimed pass of the model's workload, recorded by the target dtype's
accuracy run after its timed measurement (`accuracy_run.py --op-profile`, on its own target), or,
when that run did not record, by `python -m ab_runtime.ops.record` in the adaptation's environment
(on CPU); then the gap
report against every stored torch_npu release's table (ascendbridge/operators), written as
`op_gaps.json` beside the profile `op_profile.json`. gate (`evidence_check`): the report must be
what the framework's tables make of that profile (its sha256 recorded, every release it reports
recomputed, the pinned release among them; a table stored after the run leaves it valid);
a missing report is noted (evidence of a run from before this check), never invented.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ab_runtime.fileops import sha256_file, write_text_atomic
from ascendbridge.gatekit.compare import recorded_differences
from ascendbridge.gatekit.report import EvidenceCheck
from ascendbridge.operators import gaps
from ascendbridge.operators import table as op_table
from ascendbridge.package import uv_env
from ascendbridge.stage_api import StageContext

PROFILE = "op_profile.json"
REPORT = "op_gaps.json"
RECORD_TIMEOUT_S = 600.0


def reports(profile: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The gap report of `profile` against every stored release, by release."""
    return {release: gaps.gap_report(profile, op_table.load_table(release)) for release in op_table.releases()}


def record_and_report(ctx: StageContext, recorded: bool = False, new_tokens: int = 3) -> dict[str, Any]:
    """Report (and record first unless the target-dtype accuracy run `recorded` its target with
    `--op-profile`), write op_gaps.json; the outcome's summary of it (an `error` when not recorded)."""
    directory = Path(ctx.adaptation_dir)
    if not recorded:
        ctx.say("recording the model's ATen operators on CPU (one untimed pass)")
        command = uv_env.run_in_env(
            directory,
            ["-m", "ab_runtime.ops.record", "--out", PROFILE, "--new-tokens", str(new_tokens)],
            timeout_s=RECORD_TIMEOUT_S,
            log=ctx.log,
        )
        result = uv_env.parse_result(command.output)
        if not (result and result.get("ok")) or not (directory / PROFILE).is_file():
            error = command.why_failed(result)
            ctx.say(f"operator recording failed: {error}")
            return {"error": f"operator recording failed: {error}"}
    profile = json.loads((directory / PROFILE).read_text())
    by_release = reports(profile)
    write_text_atomic(
        directory / REPORT,
        json.dumps(
            {"profile": PROFILE, "profile_sha256": sha256_file(directory / PROFILE), "reports": by_release}, indent=1
        )
        + "\n",
    )
    summary = {
        release: {
            "ops": r["ops"],
            "gaps": [g["op"] for g in r["gaps"]],
            "blocking": r["blocking"],
            "dtype_gaps": [g["op"] for g in r["dtype_gaps"]],
        }
        for release, r in by_release.items()
    }
    for release, s in summary.items():
        ctx.say(
            f"torch_npu {release}: {s['ops']} ops, {len(s['gaps'])} without an NPU kernel"
            + (f" ({', '.join(s['gaps'])})" if s["gaps"] else "")
        )
    return {"report": REPORT, "releases": summary}


def evidence_check(adaptation_dir: Path) -> EvidenceCheck | None:
    """op_gaps.json re-derived from op_profile.json with the framework's tables; None when absent."""
    directory = Path(adaptation_dir)
    if not (directory / REPORT).is_file():
        return None
    problems: list[str] = []
    try:
        saved = json.loads((directory / REPORT).read_text())
        profile_path = directory / PROFILE
        if saved.get("profile") != PROFILE or not profile_path.is_file():
            problems.append(f"{REPORT}: its profile {PROFILE} is missing")
        elif sha256_file(profile_path) != saved.get("profile_sha256"):
            problems.append(f"{PROFILE}: sha256 does not match {REPORT} (profile changed after the report)")
        else:
            profile = json.loads(profile_path.read_text())
            recorded = saved.get("reports") or {}
            if op_table.PINNED_RELEASE not in recorded:
                problems.append(f"{REPORT}: no report for the pinned torch_npu {op_table.PINNED_RELEASE}")
            for release, report in sorted(recorded.items()):  # a table stored later leaves old evidence valid
                diff = recorded_differences(report, gaps.gap_report(profile, op_table.load_table(release)))
                if diff:
                    problems.append(f"{REPORT}: torch_npu {release} report does not recompute ({diff[0]})")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, op_table.TableError) as exc:
        problems.append(f"{REPORT}: unreadable ({exc})")
    if problems:
        return EvidenceCheck(REPORT, False, None, problems, [], "operator coverage")
    pinned = saved["reports"][op_table.PINNED_RELEASE]
    gap_count, blocking = len(pinned.get("gaps") or []), len(pinned.get("blocking") or [])
    found = f"{gap_count} gap(s)" + (f" ({blocking} blocking)" if blocking else "") if gap_count else "no gaps"
    verdict = f"{pinned.get('ops')} ops, {found} in torch_npu {op_table.PINNED_RELEASE}"
    notes = [f"operator gaps recomputed for {', '.join(sorted(saved['reports']))}"]
    return EvidenceCheck(REPORT, True, verdict, [], notes, "operator coverage")
