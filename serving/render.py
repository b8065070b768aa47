"""Render the deployment artefacts into `<adaptation>/serve/` from the plans.

serve.sh is the exact command (and environment) the stage launched for its acceptance: the
launcher and the script take their arguments from the one `engine_args`. The docker run line, the
compose file and the Kubernetes manifests deploy the same weights on an Ascend host through
vllm-ascend's image. Every file is a pure function of the plans and the package's name, so the gate
re-renders them byte for byte.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ab_runtime.fileops import write_text_atomic
from serving.plan import SERVER_MODULE, ServePlan

TEMPLATES = Path(__file__).resolve().parent / "templates"
SERVE_DIR = "serve"
WEIGHTS_DIR = "serve/weights"  # relative to the adaptation directory
PLAN_FILE = "plan.json"
ARTEFACTS = ("serve.sh", "docker-run.sh", "compose.yaml", "k8s.yaml")
# The device nodes and host mounts vllm-ascend's installation docs give every container.
ASCEND_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
ASCEND_MOUNTS = (
    "/usr/local/dcmi:/usr/local/dcmi",
    "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/",
    "/usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info",
    "/etc/ascend_install.info:/etc/ascend_install.info",
)
# The Ascend device plugin's resource per generation.
NPU_RESOURCE = {"A2": "huawei.com/Ascend910", "A3": "huawei.com/Ascend910", "310P": "huawei.com/Ascend310P"}


def engine_args(plan: ServePlan, name: str, model: str, host: str | None) -> list[str]:
    """The engine's arguments before --port: the same for serve.sh, the stage's launch and the gate's."""
    return ["--model", model, "--served-model-name", name, *(["--host", host] if host else []), *plan.args]


def yaml_scalar(value: str) -> str:
    """`value` as one double-quoted YAML scalar on one line (PyYAML's own escaping: quotes, colons,
    newlines, `%`, `#` and any unicode read back equal), for the compose and Kubernetes templates."""
    return yaml.safe_dump(str(value), default_style='"', width=float("inf"), allow_unicode=True).rstrip("\n")


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    env.filters["yaml"] = yaml_scalar
    return env


def render_texts(
    name: str,
    model_id: str,
    local: ServePlan,
    ascend: ServePlan,
    generation: str,
    quantized: Sequence[tuple[str, str]] = (),
) -> dict[str, str]:
    """{file name: text} of serve/: plan.json, serve.sh (the local plan), the Ascend deployment files
    of the float model, and those of each accepted quantized checkpoint (`quantized`: (scheme, its
    directory in the package)) in `<scheme>/`, served with `--quantization ascend`."""
    env = _environment()
    texts = {
        PLAN_FILE: json.dumps(
            {"local": local.as_dict(), "ascend": {**ascend.as_dict(), "generation": generation}},
            indent=1,
            sort_keys=True,
        )
        + "\n",
        "serve.sh": env.get_template("serve.sh.j2").render(
            model_id=model_id,
            name=name,
            plan=local,
            env=sorted(local.env.items()),
            module=SERVER_MODULE,
            args=shlex.join(engine_args(local, name, WEIGHTS_DIR, "127.0.0.1")),
        ),
    }
    float_model = AscendLayout(name, WEIGHTS_DIR, "..", "./weights", "")
    texts.update(_ascend_texts(env, model_id, ascend, generation, float_model))
    for scheme, checkpoint in quantized:
        slug = scheme.lower()
        layout = AscendLayout(
            f"{name}-{slug}",
            checkpoint,
            "../..",
            f"../../{checkpoint}",
            f"{scheme} weights by msModelSlim ({checkpoint}, accepted by the quantization stage), served with "
            "--quantization ascend: vLLM-Ascend only, rendered here and not run on this host.",
            ["--quantization", "ascend"],
        )
        texts.update({f"{slug}/{f}": t for f, t in _ascend_texts(env, model_id, ascend, generation, layout).items()})
    return texts


@dataclass(frozen=True)
class AscendLayout:
    """Where one deployment's weights lie and what it is called: the float model's serve/weights,
    or a quantized checkpoint's folder, whose files live one level deeper (serve/<scheme>/)."""

    name: str  # the served model name and the container's
    weights: str  # the weights folder, relative to the package
    up: str  # from the script's folder to the package
    compose_weights: str  # the weights folder, relative to the compose file
    note: str  # one comment line; "" for the float model
    extra_args: Sequence[str] = ()


def _ascend_texts(
    env: Environment, model_id: str, ascend: ServePlan, generation: str, at: AscendLayout
) -> dict[str, str]:
    """docker-run.sh, compose.yaml and k8s.yaml of one deployment through vllm-ascend's image."""
    container = f"{at.name.replace('.', '-').replace('_', '-')}-vllm"
    model_path = f"/models/{at.name}"
    ascend_args = [
        *engine_args(ascend, at.name, model_path, None)[2:],
        *at.extra_args,
    ]  # the model is vllm serve's argument
    cards = ascend.tensor_parallel_size
    common: dict[str, Any] = {
        "model_id": model_id,
        "name": at.name,
        "generation": generation,
        "image": ascend.image,
        "cards": cards,
        "container": container,
        "model_path": model_path,
        "mounts": ASCEND_MOUNTS,
        "weights": at.weights,
        "quantized": at.note,
    }
    command = ["vllm", "serve", model_path, *ascend_args, "--port", "8000"]
    return {
        "docker-run.sh": env.get_template("docker-run.sh.j2").render(
            **common,
            up=at.up,
            default_devices=",".join(str(i) for i in range(cards)),
            nodes=ASCEND_NODES,
            args=shlex.join(ascend_args),
        ),
        "compose.yaml": env.get_template("compose.yaml.j2").render(
            **common,
            compose_weights=at.compose_weights,
            devices=[*(f"/dev/davinci{i}" for i in range(cards)), *ASCEND_NODES],
            command=command,
        ),
        "k8s.yaml": env.get_template("k8s.yaml.j2").render(
            **common, resource=NPU_RESOURCE[generation], host_weights=f"/data/models/{at.name}", command=command
        ),
    }


def render_serve_dir(directory: Path, texts: dict[str, str]) -> Path:
    """Write the rendered files into `<directory>/serve/` (only those that changed); the scripts executable."""
    target = Path(directory) / SERVE_DIR
    target.mkdir(exist_ok=True)
    for file_name, text in texts.items():
        path = target / file_name
        path.parent.mkdir(exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            write_text_atomic(path, text)
        if file_name.endswith(".sh"):
            path.chmod(0o755)
    return target


def rendered_differences(directory: Path, texts: dict[str, str]) -> list[str]:
    """The files of serve/ that are not byte for byte what the framework renders (the gate's check)."""
    problems = []
    for file_name, text in texts.items():
        path = Path(directory) / SERVE_DIR / file_name
        if not path.is_file():
            problems.append(f"{SERVE_DIR}/{file_name} is missing")
        elif path.read_bytes() != text.encode():
            problems.append(f"{SERVE_DIR}/{file_name} differs from what the plan renders")
    return problems
