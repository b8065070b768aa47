"""Real failing cases for the healing rules, run inside the shared torch test environment.

Usage: python failing_cases.py OUT.json [CASE ...]. Each case really executes code that fails
(model construction, forward passes, hub access, imports); its output is recorded the way the
adaptation runtime reports a failure: the traceback on stderr and a last `ASCENDBRIDGE_RESULT`
line with ok=false and the one-line error. One process runs every case, so torch and
transformers are imported once. Not a pytest module: tests/healing/test_healing_rules.py runs it.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable

import torch
import transformers

RESULT_MARKER = "ASCENDBRIDGE_RESULT "
CASES: dict[str, Callable[[], object]] = {}


def case(name: str) -> Callable[[Callable[[], object]], Callable[[], object]]:
    def register(fn: Callable[[], object]) -> Callable[[], object]:
        CASES[name] = fn
        return fn

    return register


def tiny_bert(**overrides: object) -> transformers.BertConfig:
    base = dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    base.update(overrides)
    return transformers.BertConfig(**base)


@case("missing_module")
def _missing_module() -> None:
    import einops  # noqa: F401  (not installed in the test environment)


@case("missing_module_remote_code")
def _missing_module_remote() -> None:
    from transformers.dynamic_module_utils import check_imports

    path = os.path.join(tempfile.mkdtemp(), "modeling_custom.py")
    with open(path, "w") as handle:
        handle.write("import torch\nimport einops\nimport timm\n")
    check_imports(path)


@case("transformers_removed_name")
def _removed_name() -> None:
    exec("from transformers import TFBertModel")  # TensorFlow classes are gone in transformers 5


@case("transformers_removed_module")
def _removed_module() -> None:
    import transformers.onnx  # noqa: F401  (removed in transformers 5)


@case("unrelated_unexpected_kwarg")
def _unrelated_kwarg() -> None:
    def build_inputs(batch: int) -> None:
        pass

    build_inputs(batch=2, seq=8)


@case("transformers_unexpected_kwarg")
def _unexpected_kwarg() -> None:
    transformers.BertModel(tiny_bert(), add_pooling_layer=False, use_flash_attn=True)


@case("transformers_too_old")
def _too_old() -> None:
    directory = tempfile.mkdtemp()
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump({"model_type": "brand_new_arch_2027", "hidden_size": 8}, handle)
    transformers.AutoConfig.from_pretrained(directory)


@case("pad_token")
def _pad_token() -> None:
    config = transformers.GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=64, bos_token_id=99, eos_token_id=99
    )
    model = transformers.GPT2ForSequenceClassification(config)
    model(input_ids=torch.randint(0, 99, (2, 8)))


@case("dtype_unsupported")
def _dtype_unsupported() -> None:
    weight = torch.randn(8, 8).to(torch.bfloat16)
    torch.linalg.svd(weight)  # orthogonalisation some models do at init; no bf16 kernel on CPU


@case("out_of_memory")
def _out_of_memory() -> None:
    torch.empty(10**13, dtype=torch.uint8)  # 10 TB: DefaultCPUAllocator refuses


@case("device_mismatch")
def _device_mismatch() -> None:
    layer = torch.nn.Linear(4, 4).to("meta")
    layer(torch.ones(2, 4))  # input made on the default device, weights elsewhere


@case("remote_code")
def _remote_code() -> None:
    directory = tempfile.mkdtemp()
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(
            {
                "model_type": "custom_arch",
                "architectures": ["CustomModel"],
                "auto_map": {"AutoConfig": "configuration_custom.CustomConfig"},
            },
            handle,
        )
    with open(os.path.join(directory, "configuration_custom.py"), "w") as handle:
        handle.write(
            "from transformers import PretrainedConfig\n\nclass CustomConfig(PretrainedConfig):\n"
            "    model_type = 'custom_arch'\n"
        )
    transformers.AutoConfig.from_pretrained(directory)  # no trust_remote_code


class _GatedHub(http.server.BaseHTTPRequestHandler):
    """A local stand-in for the hub's answer to a gated repo without a token (401 + GatedRepo)."""

    def _deny(self) -> None:
        self.send_response(401)
        self.send_header("X-Error-Code", "GatedRepo")
        self.send_header(
            "X-Error-Message",
            "Access to model org/gated-model is restricted. You must have "
            "access to it and be authenticated to access it. Please log in.",
        )
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = _deny
    do_HEAD = _deny

    def log_message(self, *args: object) -> None:
        pass


@case("gated_repo")
def _gated() -> str:
    """huggingface_hub reads HF_ENDPOINT at import, so the hub call runs in a child process."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _GatedHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}", HF_HUB_OFFLINE="0")
    try:
        child = subprocess.run(
            [sys.executable, "-c", "import transformers; transformers.AutoConfig.from_pretrained('org/gated-model')"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.shutdown()
    return child.stderr


@case("weights_unreachable")
def _unreachable() -> None:
    transformers.AutoConfig.from_pretrained("org/model-not-in-cache")  # HF_HUB_OFFLINE=1, empty cache


@case("missing_config_attribute")
def _missing_attribute() -> None:
    config = tiny_bert()
    config.__dict__.pop("layer_norm_eps")
    delattr(type(config), "layer_norm_eps")  # as if config.json and the class had no such field
    transformers.BertModel(config)


@case("sequence_too_long")
def _too_long() -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    transformers.GPT2Model(config)(input_ids=torch.randint(0, 100, (2, 32)))


@case("sequence_too_long_expanded")
def _too_long_bert() -> None:
    model = transformers.BertModel(tiny_bert(max_position_embeddings=16))
    model(input_ids=torch.randint(0, 100, (2, 32)))


@case("non_finite_outputs")
def _non_finite() -> dict[str, torch.Tensor]:
    layer = torch.nn.Linear(4, 4).to(torch.float16)
    with torch.no_grad():
        layer.weight.fill_(300.0)
    return {"logits": layer(torch.full((2, 4), 100.0, dtype=torch.float16))}  # 1.2e5 > fp16 max


@case("npu_unavailable")
def _npu() -> None:
    import torch_npu  # noqa: F401


@case("unclassified")
def _unclassified() -> None:
    transformers.BertModel(tiny_bert(hidden_size=30, num_attention_heads=4))


def run_case(name: str) -> str:
    """Run one case; return its output as the runtime would print it."""
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    result = {
        "ok": False,
        "mode": "dry_run",
        "device_requested": "cpu",
        "device_used": "cpu",
        "fallback": False,
        "outputs": {},
        "versions": versions,
        "error": None,
    }
    try:
        outputs = CASES[name]()
    except BaseException as exc:  # every failure is the point of the case
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return traceback.format_exc() + RESULT_MARKER + json.dumps(result) + "\n"
    if isinstance(outputs, str):  # a child process's traceback
        result["error"] = [x for x in outputs.splitlines() if x.strip()][-1]
        return outputs + RESULT_MARKER + json.dumps(result) + "\n"
    result["outputs"] = {
        key: {"shape": list(t.shape), "dtype": str(t.dtype), "finite": bool(torch.isfinite(t).all())}
        for key, t in (outputs or {}).items()
    }
    bad = [key for key, o in result["outputs"].items() if not o["finite"]]
    result["ok"] = not bad
    result["error"] = f"non-finite values in outputs: {', '.join(bad)}" if bad else None
    return RESULT_MARKER + json.dumps(result) + "\n"


def main(argv: list[str]) -> int:
    out, names = argv[0], argv[1:] or list(CASES)
    captured = {name: run_case(name) for name in names}
    with open(out, "w") as handle:
        json.dump(captured, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
