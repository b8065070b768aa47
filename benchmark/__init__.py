"""Benchmark stage: accuracy_run template, comparator, the accuracy gate and benchmark_tool."""
