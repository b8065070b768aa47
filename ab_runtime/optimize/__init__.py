"""The optimizer's side of the runtime: the pass catalogue (passes, npu_swaps, decode_passes), the
search (`python -m ab_runtime.optimize`), its fresh-process confirmation and the perf run that the
optimized package's accuracy_run_perf.py wraps."""
