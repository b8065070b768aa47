"""Run ab_runtime.demo.main for several specs in ONE torch process (import cost is ~7 s each).

`python batch_demo.py RUNTIME_PARENT ARGS_JSON` where ARGS_JSON is a list of argv lists (or of
{"module": "parity", "argv": [...]} to call `python -m ab_runtime.parity`'s main instead); prints
one JSON line per run: {"argv", "rc", "result" (the parsed RESULT line), "stdout", "stderr"}.
It calls the same main() that demo.py calls; tests of the real demo.py process run it directly.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys

sys.path.insert(0, sys.argv[1])

from ab_runtime import RESULT_MARKER

for run in json.loads(sys.argv[2]):
    module, argv = (run["module"], run["argv"]) if isinstance(run, dict) else ("demo", run)
    main = importlib.import_module(f"ab_runtime.{module}").main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    lines = out.getvalue().splitlines()
    result = json.loads(lines[-1][len(RESULT_MARKER) :]) if lines and lines[-1].startswith(RESULT_MARKER) else None
    print(
        json.dumps({"argv": argv, "rc": rc, "result": result, "stdout": out.getvalue(), "stderr": err.getvalue()}),
        flush=True,
    )
