#!/usr/bin/env python3
"""FakeAgentCli: a scripted stand-in for the `claude` / `codex` CLIs (no LLM exists in tests).

It is a real executable the backends start exactly as they start the real tools. It records
how it was called (argv, cwd, the prompt) as one JSON line in $FAKE_AGENT_LOG, then performs the
actions in the JSON file $FAKE_AGENT_SCRIPT, in order:

  {"set_json": "adaptation.json", "key": "config_overrides", "value": {}}   edit a JSON file
  {"write": "path (relative to cwd, or absolute)", "text": "..."}           write a file
  {"sleep": 30}                                                             hang
  {"spawn": "pidfile"}          start a child in its own session (as a daemonising tool would),
                                write its pid to pidfile; it sleeps 600 s
  {"exit": 3}                                                               exit with a code

and finally prints a Claude-Code-style JSON result with the script's "usage" (token counts).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def prompt_of(argv: list[str]) -> str:
    if "-p" in argv:
        return argv[argv.index("-p") + 1]
    return argv[-1] if argv else ""


def set_json(path: Path, key: str, value: object) -> None:
    data = json.loads(path.read_text())
    *parents, leaf = key.split("/")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def main() -> int:
    argv = sys.argv[1:]
    with open(os.environ["FAKE_AGENT_LOG"], "a") as log:
        log.write(
            json.dumps(
                {
                    "argv": argv,
                    "cwd": os.getcwd(),
                    "prompt": prompt_of(argv),
                    "env_has_hf_token": "HF_TOKEN" in os.environ,
                }
            )
            + "\n"
        )
    script = json.loads(Path(os.environ["FAKE_AGENT_SCRIPT"]).read_text())
    for action in script.get("actions", []):
        if "set_json" in action:
            set_json(Path(action["set_json"]), action["key"], action["value"])
        elif "write" in action:
            target = Path(action["write"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(action["text"])
        elif "spawn" in action:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
            Path(action["spawn"]).write_text(str(child.pid))
        elif "sleep" in action:
            time.sleep(float(action["sleep"]))
        elif "exit" in action:
            return int(action["exit"])
    print(json.dumps({"type": "result", "result": script.get("say", "done"), "usage": script.get("usage", {})}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
