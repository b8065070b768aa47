"""Device problems: tensors created on another device, or an NPU that is not there."""

from __future__ import annotations

import re

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure
from healing.rules.base import Block, Fix, FixContext, GiveUp, Match, Remedy, Rule

_MISMATCH = re.compile(
    r"Expected all tensors to be on the same device|found at least two devices|"
    r"Tensor on device \S+ is not on the expected device \S+|"
    r"Expected (?:object|tensor) of device type \S+ but got device type \S+|"
    r"Input type \(\S+\) and weight type \(\S+\) should be the same"
)
_NPU_MISSING = re.compile(
    r"No module named 'torch_npu'|module 'torch' has no attribute 'npu'|"
    r"(?:NPU|npu)\b[^\n]{0,80}(?:not available|unavailable|is not installed)|"
    r"torch_npu[^\n]{0,80}(?:not available|unavailable|not installed|failed to load)|"
    r"libascendcl\.so|ASCEND_HOME_PATH|Ascend toolkit|\bCANN\b"
)


class DeviceMismatchRule(Rule):
    name = "device_mismatch"
    description = (
        "Model code mixes devices (tensors made without a device): build and run with the run "
        "device as torch's default device."
    )

    pattern = _MISMATCH
    found = "tensors on different devices"

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        if spec.set_default_device:
            return GiveUp("the run device is already torch's default device and tensors still mix devices")
        return Fix(
            "use the run device as torch's default device (set_default_device = true)", {"set_default_device": True}
        )


class DeviceUnavailableRule(Rule):
    name = "device_unavailable"
    description = (
        "The requested device is not usable here (torch_npu / CANN / no NPU, no CUDA): "
        "blocked until the stage runs on a host that has it; never a silent fallback."
    )

    def match(self, failure: Failure) -> Match | None:
        result = failure.result or {}
        requested = result.get("device_requested")
        found = _NPU_MISSING.search(failure.text)
        if found and (requested in (None, "npu") or "torch_npu" in found.group(0)):
            return Match(f"no usable NPU ({found.group(0)})", {"device": "npu"})
        if result.get("error_kind") == "device_unavailable":
            return Match(f"device {requested} unavailable: {result.get('error')}", {"device": requested})
        return None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        if match.facts.get("device") == "npu":
            return Block(
                "an NPU run needs an Ascend host with CANN and torch_npu (the `ascend` extra); "
                "this host has none. Run the healing stage on an NPU host or select the cpu/cuda profile"
            )
        return Block(
            f"device {match.facts.get('device')} is not available on this host; run the stage where it "
            "is, or select another device profile"
        )
