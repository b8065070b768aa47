"""A shared, cached uv environment with CPU torch + transformers for tests and benches that run model code.

Tests of generated adaptations build their own environments through the product; this one is
for unit tests of code that runs *inside* adaptation environments (runtime, comparator, ...).
Creation is guarded by a file lock so parallel test processes build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ascendbridge.config import REPO_ROOT, torch_source, uv_binary

REQUIREMENTS = (
    "torch==2.13.0",
    "transformers>=4.46",
    "safetensors>=0.4",
    "numpy>=1.26",
    "sentencepiece>=0.2",
    "pillow>=10",
    "sentence-transformers>=3",  # library parity tests (ab_runtime.parity) compare against it
    "accelerate>=1.0",  # device_map sharding of models larger than one device (ab_runtime.sharding)
    "peft>=0.18",  # LoRA training (ab_runtime.train.harness), as in every package (BASE_DEPENDENCIES)
)


def torch_env_python(extra: tuple[str, ...] = ()) -> Path:
    """Return the interpreter of the shared test environment, creating it if needed; `extra`
    requirements make a separate cached environment (the shared one is never changed)."""
    source = torch_source()
    requirements = REQUIREMENTS + tuple(extra)
    key = hashlib.sha256("\n".join(requirements + (str(source.wheel_dir),)).encode()).hexdigest()[:12]
    root = REPO_ROOT / ".cache" / f"test-torch-env-{key}"
    python = root / "bin" / "python"
    marker = root / ".complete"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return python
        uv = uv_binary()
        env = dict(os.environ)
        subprocess.run([uv, "venv", "--quiet", "--python", "3.11", str(root)], check=True, env=env)
        cmd = [uv, "pip", "install", "--quiet", "--python", str(python), *requirements]
        if source.wheel_dir:
            cmd += ["--find-links", source.wheel_dir]
        else:
            cmd += [
                "--index-url",
                "https://download.pytorch.org/whl/cpu",
                "--extra-index-url",
                "https://pypi.org/simple",
                "--index-strategy",
                "unsafe-best-match",
            ]
        subprocess.run(cmd, check=True, env=env)
        marker.write_text("ok\n")
    return python


def run_inner_json(
    script: Path, *args: str, python: Path | None = None, timeout: int = 600, env: dict[str, str] | None = None
) -> Any:
    """Run an inner script in the torch environment (or `python`) and return the JSON of its last
    output line; a non-zero exit raises with the script's stderr (a test fails on it)."""
    proc = subprocess.run(
        [str(python or torch_env_python()), str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(script).name} exited {proc.returncode}: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
