"""Simulated stacks for the stack tests: interpreters layered on the shared CPU torch env.

`slowed_stack(root, torch_python, delay_s)` builds a venv that sees the torch env's packages
(site.addsitedir) and whose torch, once imported, runs on one thread and sleeps `delay_s`
in every top-level nn.Module call: a slowed runtime, simulating a stack change that costs speed. The delay dominates
the tiny models' own forward time, so a re-validation's verdict does not depend on machine load.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

_SLOW_MODULE = '''"""Test-only: a slowed torch runtime (sleeps in every top-level nn.Module call)."""
import importlib.abc, importlib.util, sys, threading, time

DELAY_S = {delay!r}
_depth = threading.local()


def _patch(torch):
    torch.set_num_threads(1)  # the model's own time stays small next to DELAY_S on a loaded machine
    original = torch.nn.Module.__call__

    def slowed(self, *args, **kwargs):
        depth = getattr(_depth, "n", 0)
        if depth == 0:
            time.sleep(DELAY_S)
        _depth.n = depth + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _depth.n = depth

    torch.nn.Module.__call__ = slowed


class _OnTorchImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _OnTorchImport())
'''


def site_dirs(python: Path) -> list[str]:
    code = "import json, sysconfig; p = sysconfig.get_paths(); print(json.dumps(sorted({p['purelib'], p['platlib']})))"
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)


def slowed_stack(root: Path, torch_python: Path, delay_s: float) -> Path:
    """A venv seeing torch_python's packages whose torch forward calls take `delay_s` longer."""
    subprocess.run([str(torch_python), "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    own = Path(site_dirs(python)[0])
    (own / "a_torch_env.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs(torch_python))
    )
    (own / "_ab_test_slow_torch.py").write_text(_SLOW_MODULE.format(delay=delay_s))
    (own / "zz_slow_torch.pth").write_text("import _ab_test_slow_torch\n")
    return python
