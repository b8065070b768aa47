"""The gap report of one model against one release's operator table, and the release comparison.

Input: the model's op profile (ab_runtime/ops/record.py: the ATen ops its workload dispatches on
CPU, as the NPU backend would see them) and a release's table (table.py). An op is covered when the
release registers it, or when ATen has a composite kernel for it (it runs on any backend through
other ops; a structured op's functional form runs through its `.out` kernel, which the release
must then have). Every other op is a gap, with a remedy class:
- `decomposition`: the framework knows a decomposition into ops the release has (DECOMPOSITIONS);
- `cpu_fallback`: the op costs at most CPU_FALLBACK_MAX_SHARE of the recorded CPU time, so running
  it on the host (two copies a call) is the cheap answer; its cost is estimated from that share;
- `custom_op`: an Ascend C operator is needed; an operator spec is written (signature, shapes and
  dtypes seen, the ATen reference, the acceptance file of ab_runtime/ops/standard.py).
A dtype gap: the op is registered but the table says its kernel does not take a dtype the model
uses (only where the table knows the op's dtypes: a wheel carries no dtype lists).
What it cannot know: an op that is registered but fails for a shape or attribute at run time.
"""

from __future__ import annotations

from typing import Any

from ab_runtime.ops import standard
from ascendbridge.operators.table import OpTable

REPORT_FORMAT = "ascendbridge.op_gaps/1"
CPU_FALLBACK_MAX_SHARE = 0.02
# op -> the ops of the table it decomposes into (a replacement: it must pass the acceptance contract).
DECOMPOSITIONS: dict[str, list[str]] = {
    "_scaled_dot_product_flash_attention": ["scaled_dot_product_attention"],
    "linalg_vector_norm": ["pow.Tensor_Scalar", "sum.dim_IntList", "sqrt"],
}


def _out_variant(op: str, table: OpTable) -> bool:
    base = op.split(".")[0]
    return any(
        name.split(".")[0] == base and name.split(".", 1)[-1].endswith("out") and "." in name for name in table.ops
    )


def covered(op: str, record: dict[str, Any], table: OpTable) -> str | None:
    """How the release runs `op` (None: it does not)."""
    if table.has(op):
        return "registered"
    composite = record.get("composite") or []
    if "CompositeExplicitAutograd" in composite:
        return "ATen composite kernel"
    if "CompositeExplicitAutogradNonFunctional" in composite and _out_variant(op, table):
        return "ATen composite kernel through its .out variant"
    return None


def operator_spec(op: str, record: dict[str, Any]) -> dict[str, Any]:
    """What an operator author needs: signature, what the model feeds it, reference, acceptance."""
    dtypes = list(record.get("dtypes") or [])
    return {
        "operator": op,
        "signature": record.get("schema") or "",
        "shapes_seen": record.get("shapes") or [],
        "dtypes_seen": dtypes,
        "calls": record.get("calls"),
        "modules": record.get("modules") or {},
        "reference_implementation": f"torch.ops.aten.{op if '.' in op else op + '.default'} (CPU, float64)",
        "acceptance": standard.acceptance_file(
            op, list(record.get("shapes") or []), [d for d in dtypes if d in standard.THRESHOLDS]
        ),
    }


def remedy(op: str, record: dict[str, Any], table: OpTable) -> dict[str, Any]:
    parts = DECOMPOSITIONS.get(op)
    if parts and all(table.has(p) for p in parts):
        return {"class": "decomposition", "into": parts}
    share = float(record.get("cpu_share") or 0.0)
    if share <= CPU_FALLBACK_MAX_SHARE:
        return {
            "class": "cpu_fallback",
            "cpu_share": share,
            "cpu_ms_per_pass": record.get("cpu_ms"),
            "cost": f"{share:.2%} of the recorded CPU time ({record.get('cpu_ms')} ms a pass) plus two "
            f"host-device copies per call ({record.get('calls')} calls)",
        }
    return {"class": "custom_op", "cpu_share": share, "spec": operator_spec(op, record)}


def gap_report(profile: dict[str, Any], table: OpTable) -> dict[str, Any]:
    """Missing ops and dtype refusals of one model's profile against one release."""
    gaps: list[dict[str, Any]] = []
    dtype_gaps: list[dict[str, Any]] = []
    how: dict[str, int] = {}
    for op, record in profile["ops"].items():
        way = covered(op, record, table)
        if way is None:
            top = next(iter(record.get("modules") or {}), "(model)")
            gaps.append(
                {
                    "op": op,
                    "module": top,
                    "modules": record.get("modules") or {},
                    "calls": record.get("calls"),
                    "dtypes": record.get("dtypes"),
                    "cpu_share": record.get("cpu_share"),
                    "remedy": remedy(op, record, table),
                }
            )
            continue
        how[way] = how.get(way, 0) + 1
        refused = [d for d in record.get("dtypes") or [] if op in table.dtypes and d not in table.dtypes[op]]
        if refused:
            dtype_gaps.append(
                {
                    "op": op,
                    "dtypes": refused,
                    "takes": table.dtypes[op],
                    "module": next(iter(record.get("modules") or {}), "(model)"),
                }
            )
    return {
        "format": REPORT_FORMAT,
        "release": table.release,
        "table_sha256": table.source.get("sha256"),
        "model_id": profile.get("model_id"),
        "ops": len(profile["ops"]),
        "covered": how,
        "gaps": gaps,
        "dtype_gaps": dtype_gaps,
        "blocking": [g["op"] for g in gaps if g["remedy"]["class"] == "custom_op"],
        "cannot_know": "ops registered but failing for a shape, attribute or dtype at run time",
    }


def compare(profile: dict[str, Any], old: OpTable, new: OpTable) -> dict[str, Any]:
    """The same model against two releases: the gaps the newer one closes and any it opens."""
    a, b = gap_report(profile, old), gap_report(profile, new)
    before, after = {g["op"] for g in a["gaps"]}, {g["op"] for g in b["gaps"]}
    return {
        "model_id": profile.get("model_id"),
        "old": old.release,
        "new": new.release,
        "closed": sorted(before - after),
        "opened": sorted(after - before),
        "remaining": sorted(before & after),
        "old_gaps": len(before),
        "new_gaps": len(after),
    }
