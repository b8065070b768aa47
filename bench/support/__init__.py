"""Support code the benchmarks, scripts and tests share: the shared CPU torch environment, a local
Ray cluster, tiny local models registered on a real board, tiny rendered adaptations.

It lives outside `tests/` because `bench/` and `scripts/` use it: `tests/` imports it, never the
other way round (tests/test_layout.py).
"""
