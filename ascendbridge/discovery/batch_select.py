"""The selection rules of a batch, applied in rank order so the better-ranked copy survives.

1. the same repository twice (a renamed repo, another spelling of the id);
2. the policy: licence allow-list, a parameter ceiling, then discovery's own decision rules
   (too large for the device, gated without a token, remote code not allowed) and --no-gated;
3. forks whose weight files have the same sha256 as a better-ranked kept model;
4. quantized or format variants (GGUF, AWQ, GPTQ, ONNX, MLX) of a model kept in the batch.
"""

from __future__ import annotations

import re

from ascendbridge.discovery.batch_model import BatchPolicy, Candidate
from ascendbridge.discovery.decisions import GIB, MEMORY_MARGIN, decide, host_pool, weight_bytes

FORMAT_MARKERS = ("gguf", "awq", "gptq", "onnx", "mlx")
# Name tokens that only say how a variant is stored, stripped to find its base by name.
STORAGE_TOKEN_RE = re.compile(r"^(gguf|awq|gptq|onnx|mlx|\d+-?bits?|int\d+|q\d+(_k)?(_[a-z0-9]+)?)$")
SI = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "k"))


def short_count(value: int | None) -> str:
    """22.7M, 7.0B: counts that fit a table column."""
    if value is None:
        return "?"
    for scale, suffix in SI:
        if value >= scale:
            return f"{value / scale:.1f}{suffix}"
    return str(value)


def _name_tokens(model_id: str) -> list[str]:
    return [t for t in re.split(r"[-_.]", model_id.rsplit("/", 1)[-1].casefold()) if t]


def format_variant(cand: Candidate) -> str | None:
    """GGUF / AWQ / GPTQ / ONNX / MLX when the tags or the id say the repo is a converted copy."""
    words = {t.casefold() for t in cand.tags} | set(_name_tokens(cand.model_id))
    words |= set(re.split(r"[-_.]", cand.model_id.split("/", 1)[0].casefold()))  # mlx-community/...
    return next((m.upper() for m in FORMAT_MARKERS if m in words), None)


def _base_name(model_id: str) -> str:
    return "-".join(t for t in _name_tokens(model_id) if not STORAGE_TOKEN_RE.match(t))


def drop_same_repository(candidates: list[Candidate]) -> None:
    first: dict[str, str] = {}
    for cand in candidates:
        if not cand.kept:
            continue
        if cand.repo_key in first:
            listed = f"{cand.detail}: " if cand.detail else ""
            cand.drop(
                "same_repository",
                f"{listed}same repository as {first[cand.repo_key]}",
                duplicate_of=first[cand.repo_key],
            )
        else:
            first[cand.repo_key] = cand.model_id


def _allowed_licence(licence: str | None, allowed: list[str]) -> bool:
    if not licence:
        return False
    keys = {licence.casefold()}
    if licence.startswith("other (") and licence.endswith(")"):
        keys.add(licence[len("other (") : -1].casefold())  # license: other + license_name
    return bool(keys & set(allowed))


def _why_decided(cand: Candidate, rule: str, memory_gb: float | None) -> str:
    if rule == "too_large":
        need = (weight_bytes(cand.info) or 0) * MEMORY_MARGIN / GIB
        most = max(h.count * h.memory_gb for h in host_pool(memory_gb))
        return f"too large: {need:.1f} > {most:g} GiB"
    if rule == "gated_no_token":
        return "gated; no HF_TOKEN"
    if rule == "remote_code_not_allowed":
        return "remote code (--allow-remote-code)"
    return rule


def apply_policy(candidates: list[Candidate], policy: BatchPolicy) -> None:
    memory = policy.memory_gb  # None: the team lead's device pool, else ASCENDBRIDGE_DEVICE_MEMORY_GB
    for cand in candidates:
        if not cand.kept:
            continue
        info = cand.info
        if policy.licenses and not _allowed_licence(info.license, policy.licenses):
            cand.drop("license_not_allowed", f"licence {info.license or 'none'} not allowed")
            continue
        count = info.parameter_count
        if policy.max_params is not None and count is not None and count > policy.max_params:
            cand.drop("too_many_parameters", f"{short_count(count)} params > {short_count(policy.max_params)}")
            continue
        decision = decide(info, policy.allow_remote_code, policy.has_token, memory)
        if decision.action != "proceed" and decision.rule:
            cand.drop(decision.rule, _why_decided(cand, decision.rule, memory), decision.reason)
            continue
        if policy.exclude_gated and info.gated:
            cand.drop("gated_excluded", "gated (--no-gated)")
            continue
        cand.why, cand.detail = "kept", decision.reason


def drop_same_weights(candidates: list[Candidate]) -> None:
    first: dict[tuple[str, ...], str] = {}
    for cand in candidates:
        if not cand.kept or not cand.weight_sha256:
            continue
        key = tuple(cand.weight_sha256)
        if key in first:
            cand.drop("same_weights", f"same weights as {first[key]}", duplicate_of=first[key])
        else:
            first[key] = cand.model_id


def drop_variants(candidates: list[Candidate]) -> None:
    """A converted copy leaves the batch when its base (by card/tags, else by name) is kept."""
    variants = {c.model_id: format_variant(c) for c in candidates if c.kept}
    kept_ids = {c.model_id.casefold(): c.model_id for c in candidates if c.kept}
    # A duplicate dropped above stands for the model it duplicates.
    kept_ids.update(
        {
            c.model_id.casefold(): c.duplicate_of
            for c in candidates
            if c.duplicate_of and c.duplicate_of.casefold() in kept_ids
        }
    )
    by_name = {_base_name(c.model_id): c.model_id for c in candidates if c.kept and not variants[c.model_id]}
    for cand in candidates:
        marker = variants.get(cand.model_id)
        if not cand.kept or not marker:
            continue
        base = next((kept_ids[b.casefold()] for b in cand.base_models if b.casefold() in kept_ids), None)
        base = base or by_name.get(_base_name(cand.model_id))
        if base and base != cand.model_id:
            cand.drop("variant_of_base", f"{marker} variant of {base}", duplicate_of=base)
