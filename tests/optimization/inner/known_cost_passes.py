"""TEST-ONLY passes of known cost, loaded by ab_runtime.passes through AB_RUNTIME_EXTRA_PASSES.

They let the search, the confirmation and the gates be tested against controlled effects instead
of machine luck:
- test_twice: runs the forward pass twice per call; outputs unchanged. A certain slowdown (about
  x0.5, whatever the machine's load, since both sides of a pair see the same load).
- test_cached_outputs: returns the outputs of the first call for the same input objects; outputs
  unchanged (they ARE the model's outputs). A certain, large speedup (a dictionary lookup
  against a forward pass), so the gates' "clears 1 + min_gain" is exercised deterministically.
"""

from __future__ import annotations

from typing import Any, Optional


class _Twice:
    """Wraps a model: every call computes the forward pass twice."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __call__(self, **inputs: Any) -> Any:
        self.model(**inputs)
        return self.model(**inputs)


class _Cached:
    """Wraps a model: same input objects -> the same outputs object, computed once."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.seen: list[tuple[tuple[Any, ...], Any]] = []

    def __getattr__(self, name: str) -> Any:  # parameters(), config, ... of the wrapped model
        return getattr(self.model, name)

    def __call__(self, **inputs: Any) -> Any:
        values = tuple(inputs.values())
        for key, out in self.seen:
            if len(key) == len(values) and all(a is b for a, b in zip(key, values)):
                return out
        out = self.model(**inputs)
        self.seen.append((values, out))
        return out


def _apply_twice(build: Any) -> None:
    build.model = _Twice(build.model)


def _apply_cache(build: Any) -> None:
    build.model = _Cached(build.model)


def _always(_: Any) -> Optional[str]:
    return None


def extra_passes(Pass: Any) -> tuple[Any, ...]:  # noqa: N803 (the catalogue's Pass class)
    return (
        Pass("test_twice", "cpu", "compile", None, "TEST ONLY: the forward pass twice per call",
             _always, _apply_twice),
        Pass("test_cached_outputs", "cpu", "compile", None, "TEST ONLY: outputs cached per input objects",
             _always, _apply_cache),
    )
