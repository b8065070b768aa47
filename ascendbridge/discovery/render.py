"""Human-readable summaries of a ModelInfo, shared by the CLI and the stage's log."""

from __future__ import annotations

from ascendbridge.discovery.model_info import ModelInfo


def summary_lines(info: ModelInfo) -> list[str]:
    count = f"{info.parameter_count:,}" if info.parameter_count is not None else "unknown"
    size = f"{info.size_bytes:,} bytes" if info.size_bytes is not None else "no weights"
    return [
        f"architecture: {', '.join(info.architectures) or '-'} (model_type {info.model_type or '-'})",
        f"task family: {info.task_family or 'none'} ({info.task_family_reason}); class {info.model_class or '-'}",
        f"parameters: {count} ({info.parameter_count_source}), dtype {info.dtype or '-'}, {size}",
        f"license: {info.license or '-'}, gated: {info.gated}, remote code: {info.needs_remote_code}, "
        f"tokenizer: {info.has_tokenizer}, processor: {info.has_processor}",
    ]


def render(info: ModelInfo) -> str:
    where = info.local_dir or "-"
    lines = [
        f"{info.model_id}  [{info.source}{' @ ' + info.resolved_revision if info.resolved_revision else ''}]",
        f"files: {where}",
    ]
    lines += summary_lines(info)
    if info.sentence_transformers:
        lines.append(
            f"sentence-transformers: pooling {info.sentence_transformers_pooling or '-'}, "
            f"normalize {info.sentence_transformers_normalize}"
        )
    if info.num_layers is not None:
        lines.append(f"layers: {info.num_layers}")
    lines += [f"warning: {w}" for w in info.warnings]
    if info.decision is not None:
        lines.append(
            f"decision: {info.decision.action}"
            f"{' (' + info.decision.rule + ')' if info.decision.rule else ''}: {info.decision.reason}"
        )
    return "\n".join(lines)
