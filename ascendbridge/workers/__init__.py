"""Running things outside the team lead's process: subprocesses, workers, executors, uv."""
