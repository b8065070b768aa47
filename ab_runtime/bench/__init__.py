"""The benchmark's side of the runtime: benchmark_run, what the generated accuracy_run.py wraps."""
