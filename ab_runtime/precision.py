"""Dtype findings: which operator (in which module) refuses a dtype, and the fp32-island remedy.

A model that runs in float32 but not in bfloat16 (FNet's FFT has no bf16 CPU kernel) is a
finding about one operator, not a failed model. `probe_dtype_failure` runs one forward with a
module stack kept by hooks, so the innermost module that was executing when the error was raised
is named, plus the innermost torch function that raised (a torch function mode watches them). `keep_in_fp32` is the standard
remedy: that module's class runs in float32 inside the lower-precision model (autocast off, its
floating inputs cast up and its floating outputs cast back), so the rest keeps the low dtype.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from typing import Any

import torch

FINDING_MARKER = "ASCENDBRIDGE_DTYPE_FINDING "
_TORCH_CALL = re.compile(r"\b(torch(?:\.\w+)+|F\.\w+)\s*\(")


def operator_from_traceback(exc: BaseException) -> str | None:
    """The torch call on the innermost traceback line that names one (e.g. torch.fft.fftn)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        found = _TORCH_CALL.search(frame.line or "")
        if found:
            return found.group(1)
    return None


class _FailingOp(torch.overrides.TorchFunctionMode):
    """Remembers the innermost torch function that raised (e.g. torch.fft.fftn)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: str | None = None

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            if self.failed is None:
                self.failed = _qualified(func)
            raise


def _qualified(func: Any) -> str:
    module = getattr(func, "__module__", None) or ""
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return f"{module}.{name}" if module and module != "builtins" else name


def probe_dtype_failure(model: torch.nn.Module, call: Callable[[], Any]) -> dict[str, Any] | None:
    """Run `call` (one forward of `model`) with a module stack kept by hooks; when it raises,
    return the innermost module executing at the time, its class, the operator and the error.
    None when the call succeeds (the failure was not in the forward)."""
    names = {id(m): n for n, m in model.named_modules()}
    stack: list[torch.nn.Module] = []

    def enter(module: torch.nn.Module, _args: Any) -> None:
        stack.append(module)

    def leave(module: torch.nn.Module, _args: Any, _out: Any) -> None:
        if stack and stack[-1] is module:
            stack.pop()

    handles = [h for m in model.modules() for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
    op = _FailingOp()
    try:
        with torch.inference_mode(), op:
            call()
        return None
    except Exception as exc:  # the failure being diagnosed; its facts are returned
        module = stack[-1] if stack else model  # hooks of the raising modules never ran: still stacked
        return {
            "module": names.get(id(module), "") or "(model)",
            "module_class": type(module).__name__,
            "operator": op.failed or operator_from_traceback(exc),
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
        }
    finally:
        for handle in handles:
            handle.remove()


def _cast_floats(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_cast_floats(v, dtype) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floats(v, dtype) for v in value)
    if isinstance(value, dict):
        for key in list(value.keys()):  # ModelOutput is a dict that must keep its class
            value[key] = _cast_floats(value[key], dtype)
        return value
    return value


def keep_in_fp32(model: torch.nn.Module, class_names: list[str], dtype: torch.dtype) -> list[str]:
    """Run every module of the named classes in float32 inside a `dtype` model; returns the
    modules changed. A no-op for a float32 model or an empty list."""
    if dtype == torch.float32 or not class_names:
        return []
    wanted = set(class_names)
    changed = []
    for name, module in model.named_modules():
        if type(module).__name__ not in wanted:
            continue
        module.float()
        original = module.forward

        def forward(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            device_type = next(
                (t.device.type for t in list(args) + list(kwargs.values()) if isinstance(t, torch.Tensor)), "cpu"
            )
            with torch.autocast(device_type=device_type, enabled=False):
                out = _original(*_cast_floats(list(args), torch.float32), **_cast_floats(kwargs, torch.float32))
            return _cast_floats(out, dtype)

        module.forward = forward
        changed.append(name or "(model)")
    return changed
