"""TEST-ONLY passes of known cost, loaded by ab_runtime.optimize.passes through AB_RUNTIME_EXTRA_PASSES.

They let the search, the confirmation and the gates be tested against controlled effects instead
of machine luck:
- test_twice: runs the forward pass twice per call; outputs unchanged. A certain slowdown (about
  x0.5, whatever the machine's load, since both sides of a pair see the same load).
- test_same: the forward pass once per call through a wrapper: no gain at all (x1.0 under any
  load), the pass a forged speedup claims.
- test_cached_outputs: returns the outputs of the first call for the same input objects; outputs
  unchanged (they ARE the model's outputs). A certain, large speedup (a dictionary lookup
  against a forward pass), so the gates' "clears 1 + min_gain" is exercised deterministically.
- test_cached_decode: a decode pass (kind `decode`, through Build.decoder like the real ones): the
  first generation from given input objects runs the eager decoder and records its tokens, later
  ones replay them. Greedy tokens unchanged, a certain, large generation speedup.
- test_batch1_decode: a decode pass specialised to batch 1 (as a static-cache graph is to its
  shape): it replays at batch 1 like test_cached_decode and decodes every larger batch
  SLOW_COPIES times over (ten: a loss of about x0.2, so large that no load on a shared CI machine
  turns it into a measured gain; three copies once measured x1.33 under load). Greedy tokens
  unchanged; a certain win at batch 1 and a certain, larger loss at the workload's larger batch,
  so a headline that times both batches must not keep it.
- test_slow_cached / test_slow_twice: test_cached_outputs / test_twice in the exclusive group
  `precision`, each built as slowly as a compile (a sleep of quick.COSTLY_BUILD_S): a kept
  test_slow_cached outranks the CPU bf16 passes of its group (quick.outranked), so they are never
  built; a test_slow_twice that loses outranks nothing.
- test_refused_swap: a module swap held to the operator acceptance contract (passes.contracted_swap)
  whose replacement is wrong (every RMSNorm scaled by 1 + weight): the contract refuses it before
  it takes effect, so the search lists it as not applied, with the contract's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class _Repeated:
    """Wraps a model: every call computes the forward pass `times` times and answers the last."""

    def __init__(self, model: Any, times: int) -> None:
        self.model, self.times = model, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __call__(self, **inputs: Any) -> Any:
        for _ in range(self.times - 1):
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


class _ReplayDecoder:
    """A workloads.Decoder: eager decoding once per input objects, then the recorded tokens."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.recorded: list[tuple[Any, list[Any]]] = []
        self.tokens: list[Any] = []
        self.live = False
        self.index = 0

    def encode(self, inputs: Any) -> None:
        self.inner.encode(inputs)

    def prefill(self, inputs: Any) -> Any:
        seen = next((tokens for key, tokens in self.recorded if key is inputs), None)
        self.live, self.index = seen is None, 0
        if seen is None:
            self.tokens = [self.inner.prefill(inputs)]
            self.recorded.append((inputs, self.tokens))
        else:
            self.tokens = seen
        return self.tokens[0]

    def step(self, tokens: Any) -> Any:
        self.index += 1
        if self.live:
            self.tokens.append(self.inner.step(tokens))
        return self.tokens[self.index]

    def cache_bytes(self) -> int:
        return self.inner.cache_bytes()


SLOW_COPIES = 10


class _Batch1Decoder:
    """Batch 1: _ReplayDecoder. A larger batch: SLOW_COPIES eager decoders in lockstep, the first's tokens."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.replay = _ReplayDecoder(make())
        self.slow = [make() for _ in range(SLOW_COPIES)]
        self.active: list[Any] = []

    def _choose(self, inputs: Any) -> list[Any]:
        batch = int(next(v for v in inputs.values() if hasattr(v, "shape")).shape[0])
        self.active = [self.replay] if batch == 1 else self.slow
        return self.active

    def encode(self, inputs: Any) -> None:  # encoder-decoders only; prefill follows
        for decoder in self._choose(inputs):
            decoder.encode(inputs)

    def prefill(self, inputs: Any) -> Any:
        return [decoder.prefill(inputs) for decoder in self._choose(inputs)][0]

    def step(self, tokens: Any) -> Any:
        return [decoder.step(tokens) for decoder in self.active][0]

    def cache_bytes(self) -> int:
        return self.active[0].cache_bytes()


def _replay_decoder(build: Any, model: Any, encoder_decoder: bool, new_tokens: int) -> Any:
    from ab_runtime import workloads

    return _ReplayDecoder(workloads.HFDecoder(build, model, encoder_decoder))


def _batch1_decoder(build: Any, model: Any, encoder_decoder: bool, new_tokens: int) -> Any:
    from ab_runtime import workloads

    return _Batch1Decoder(lambda: workloads.HFDecoder(build, model, encoder_decoder))


def _apply_replay(build: Any) -> None:
    build.decoder = _replay_decoder


def _apply_batch1(build: Any) -> None:
    build.decoder = _batch1_decoder


def _apply_twice(build: Any) -> None:
    build.model = _Repeated(build.model, 2)


def _apply_same(build: Any) -> None:
    build.model = _Repeated(build.model, 1)


def _apply_cache(build: Any) -> None:
    build.model = _Cached(build.model)


def _slow(apply: Callable[[Any], None]) -> Callable[[Any], None]:
    """`apply`, after a build as dear as a compile (quick.COSTLY_BUILD_S seconds)."""

    def slowly(build: Any) -> None:
        import time

        from ab_runtime.optimize.quick import COSTLY_BUILD_S

        time.sleep(COSTLY_BUILD_S)
        apply(build)

    return slowly


def _always(_: Any) -> str | None:
    return None


def _wrong_norm(module: Any) -> int:
    """Replaces one RMSNorm's forward with a wrong formula (scaled by 1 + weight)."""
    import types

    import torch

    def forward(self: Any, x: Any) -> Any:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon) * (1 + self.weight)

    module.forward = types.MethodType(forward, module)
    return 1


def _apply_refused_swap(build: Any) -> None:
    from ab_runtime.optimize import npu_swaps, passes  # loaded by passes itself: imported when applied

    passes.contracted_swap(
        "test_refused_swap",
        npu_swaps.rms_norm_modules,
        _wrong_norm,
        lambda m: int(m.weight.shape[0]),
        "RMSNorm modules wrongly swapped",
    )(build)


def extra_passes(Pass: Any) -> tuple[Any, ...]:  # the catalogue's Pass class
    return (
        Pass("test_twice", "cpu", "compile", None, "TEST ONLY: the forward pass twice per call", _always, _apply_twice),
        Pass(
            "test_same",
            "cpu",
            "compile",
            None,
            "TEST ONLY: the forward pass once, through a wrapper",
            _always,
            _apply_same,
        ),
        Pass(
            "test_cached_outputs",
            "cpu",
            "compile",
            None,
            "TEST ONLY: outputs cached per input objects",
            _always,
            _apply_cache,
        ),
        Pass(
            "test_cached_decode",
            "cpu",
            "decode",
            "compile",
            "TEST ONLY: greedy tokens replayed per input objects",
            _always,
            _apply_replay,
        ),
        Pass(
            "test_batch1_decode",
            "cpu",
            "decode",
            "compile",
            f"TEST ONLY: replayed at batch 1, decoded {SLOW_COPIES} times over at a larger batch",
            _always,
            _apply_batch1,
        ),
        Pass(
            "test_slow_cached",
            "cpu",
            "precision",
            "precision",
            "TEST ONLY: outputs cached per input objects, built as slowly as a compile",
            _always,
            _slow(_apply_cache),
        ),
        Pass(
            "test_slow_twice",
            "cpu",
            "precision",
            "precision",
            "TEST ONLY: the forward pass twice per call, built as slowly as a compile",
            _always,
            _slow(_apply_twice),
        ),
        Pass(
            "test_refused_swap",
            "cpu",
            "module_swap",
            None,
            "TEST ONLY: a wrong RMSNorm swap the contract refuses",
            _always,
            _apply_refused_swap,
            changes_code=True,
        ),
    )
